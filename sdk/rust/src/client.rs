//! The connection to airlockd: over its Unix socket, or its TCP listener with mutual TLS.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Code, Error, Result};
use crate::grpc::Channel;
use crate::pb;

/// airlockd's socket when neither the address nor `$AIRLOCK_SOCKET` names one.
pub const DEFAULT_SOCKET: &str = "/run/airlock/airlockd.sock";

/// The API level this SDK was built for (proto/airlock/v1/airlock.proto, `service Api`): it
/// needs an airlockd of this level or newer, and [`Client::connect`] checks that airlockd
/// serves it.
pub const API_LEVEL: u32 = 1;

/// What this SDK tells airlockd it is, for airlockd's log.
const CLIENT: &str = concat!("rust-sdk ", env!("CARGO_PKG_VERSION"));

/// What airlockd speaks ([`Client::version`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// airlockd's API level: it serves clients of this level and older ones, down to
    /// `oldest_client_level`.
    pub level: u32,
    pub oldest_client_level: u32,
    /// airlockd's release, like "0.1.0".
    pub daemon_version: String,
}

/// How long [`Client::connect`] waits for airlockd before giving up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Mutual TLS for airlockd's TCP listener: the CA that signed airlockd's certificate, and this
/// client's certificate and key (PEM files). `server_name` overrides the name checked in
/// airlockd's certificate (when it is not the host dialled; an IP address must be overridden
/// by the DNS name the certificate holds).
#[derive(Clone, Debug, Default)]
pub struct Tls {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub server_name: Option<String>,
}

/// Where and how to reach airlockd again (the guard that removes a session on drop dials
/// anew when no runtime is left to use this connection on).
#[derive(Clone, Debug)]
pub(crate) struct Address {
    pub address: String,
    pub tls: Option<Tls>,
}

/// A connection to airlockd, safe to share between tasks (clone it: clones share the one
/// HTTP/2 connection, each call its own stream). Every call is cancelled by dropping its
/// future: wrap one in `tokio::time::timeout` for a deadline.
#[derive(Clone)]
pub struct Client {
    pub(crate) channel: Channel,
    pub(crate) address: Arc<Address>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("address", &self.address.address).finish()
    }
}

impl Client {
    /// Connects to airlockd. `address` "" is the local socket (`$AIRLOCK_SOCKET`, else
    /// [`DEFAULT_SOCKET`]); a path (or `unix:PATH`) is another socket. For airlockd's TCP
    /// listener use [`Client::connect_tls`]. airlockd decides the caller's tenant from the
    /// socket's peer credentials. Returns once airlockd has said that it serves this SDK's
    /// [`API_LEVEL`] ([`Error::VersionMismatch`] when it does not).
    pub async fn connect(address: &str) -> Result<Client> {
        Client::dial(Address { address: address.to_string(), tls: None }).await
    }

    /// Connects to airlockd's TCP listener (`host:port`) with mutual TLS; airlockd decides the
    /// caller's tenant from the client certificate. A socket path works here too (`tls` unused).
    pub async fn connect_tls(address: &str, tls: Tls) -> Result<Client> {
        Client::dial(Address { address: address.to_string(), tls: Some(tls) }).await
    }

    pub(crate) async fn dial(address: Address) -> Result<Client> {
        Client::dial_at(address, API_LEVEL).await
    }

    async fn dial_at(mut address: Address, level: u32) -> Result<Client> {
        if address.address.is_empty() {
            address.address = std::env::var("AIRLOCK_SOCKET")
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| DEFAULT_SOCKET.to_string());
        }
        let target = address.address.clone();
        let socket = target.strip_prefix("unix:").map(str::to_string).or_else(|| {
            if target.starts_with('/') {
                Some(target.clone())
            } else {
                None
            }
        });
        let channel = match (socket, &address.tls) {
            (Some(path), _) => {
                let stream = within(&target, tokio::net::UnixStream::connect(&path)).await?;
                Channel::handshake(stream, "localhost".to_string(), false).await
            }
            (None, None) => {
                return Err(Error::invalid(format!(
                    "{}: airlockd listens on TCP only with mutual TLS; use Client::connect_tls(address, \
                     Tls {{ ca, cert, key, server_name }}), or give a socket path",
                    target
                )))
            }
            (None, Some(tls)) => {
                let connector = tls_connector(tls)?;
                let host = target.rsplit_once(':').map_or(target.as_str(), |(h, _)| h);
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let name = tls.server_name.as_deref().unwrap_or(host);
                let server_name = rustls::ServerName::try_from(name).map_err(|_| {
                    Error::invalid(format!(
                        "{:?} is not a name to check airlockd's certificate against",
                        name
                    ))
                })?;
                let tcp = within(&target, tokio::net::TcpStream::connect(target.as_str())).await?;
                let _ = tcp.set_nodelay(true);
                let stream = tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(server_name, tcp))
                    .await
                    .map_err(|_| unavailable(&target, "the TLS handshake timed out".to_string()))?
                    .map_err(|e| unavailable(&target, format!("the TLS handshake failed: {}", e)))?;
                Channel::handshake(stream, target.clone(), true).await
            }
        }
        .map_err(|s| unavailable(&target, s.message))?;
        check_version(&channel, &target, level).await?;
        Ok(Client { channel, address: Arc::new(address) })
    }

    /// What airlockd speaks: its API level, the oldest client level it serves, and its release.
    /// [`Client::connect`] has already checked that it serves this SDK's [`API_LEVEL`].
    pub async fn version(&self) -> Result<Version> {
        version_at(&self.channel, API_LEVEL).await
    }

    /// Not for programs: connects as if this SDK had been built for API level `level`, so
    /// that the SDK's own tests can meet the refusal of an airlockd older than the SDK. Hidden
    /// from the documentation and outside any promise of compatibility.
    #[doc(hidden)]
    pub async fn connect_claiming_level_for_tests_only(address: &str, level: u32) -> Result<Client> {
        Client::dial_at(Address { address: address.to_string(), tls: None }, level).await
    }
}

/// Waits until airlockd answers a call, as the other SDKs' connects do (a TLS listener that
/// refuses the client's certificate says so only then), and checks that it speaks this SDK's
/// API level: an airlockd too old for the SDK (or the SDK too old for it) fails here, loudly,
/// rather than at the first call it does not know.
async fn check_version(channel: &Channel, address: &str, level: u32) -> Result<()> {
    let version = match tokio::time::timeout(CONNECT_TIMEOUT, version_at(channel, level)).await {
        Err(_) => return Err(unavailable(address, format!("no answer in {}s", CONNECT_TIMEOUT.as_secs()))),
        Ok(Ok(version)) => version,
        Ok(Err(e @ Error::VersionMismatch { .. })) => return Err(e),
        Ok(Err(e)) => {
            return match e.code() {
                Some(Code::Unavailable | Code::Cancelled | Code::Internal | Code::Unknown) => {
                    Err(unavailable(address, e.message()))
                }
                // It answered as airlockd does, but refuses this caller everything.
                _ => Err(e),
            };
        }
    };
    if version.level < level {
        return Err(Error::VersionMismatch {
            message: format!(
                "airlockd {} speaks API level {}; this SDK needs {}: upgrade airlockd",
                version.daemon_version, version.level, level
            ),
            daemon_level: version.level,
            client_level: level,
        });
    }
    if level < version.oldest_client_level {
        return Err(Error::VersionMismatch {
            message: format!(
                "airlockd {} serves API levels {} to {}; this SDK ({}) speaks {}: upgrade the SDK",
                version.daemon_version, version.oldest_client_level, version.level, CLIENT, level
            ),
            daemon_level: version.level,
            client_level: level,
        });
    }
    Ok(())
}

/// Api.Version, telling airlockd that this client speaks `level`. The refusals that mean the
/// two disagree are [`Error::VersionMismatch`].
async fn version_at(channel: &Channel, level: u32) -> Result<Version> {
    let request = pb::VersionRequest { client_level: level, client: CLIENT.to_string() };
    match channel.unary::<_, pb::VersionReply>("/airlock.v1.Api/Version", &request).await {
        Ok(reply) => Ok(Version {
            level: reply.level,
            oldest_client_level: reply.oldest_client_level,
            daemon_version: reply.daemon_version,
        }),
        // Older than API levels (level 1 is the first that has this call), or not airlockd.
        Err(status) if status.code == Code::Unimplemented => Err(Error::VersionMismatch {
            message: format!(
                "airlockd does not answer airlock.v1.Api/Version: it predates API levels (or is not \
                 airlockd); this SDK needs API level {}: upgrade airlockd",
                level
            ),
            daemon_level: 0,
            client_level: level,
        }),
        // airlockd no longer serves this level; its message names the levels it serves.
        Err(status) if status.code == Code::FailedPrecondition => {
            Err(Error::VersionMismatch { message: status.message, daemon_level: 0, client_level: level })
        }
        Err(status) => Err(status.into()),
    }
}

fn unavailable(address: &str, why: String) -> Error {
    Error::Unavailable {
        message: format!(
            "airlockd does not answer at {} ({}; is it running, and may you use it? members of the \
             airlock group may use its socket)",
            address, why
        ),
    }
}

async fn within<T>(
    address: &str,
    connect: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(unavailable(address, e.to_string())),
        Err(_) => Err(unavailable(address, format!("no answer in {}s", CONNECT_TIMEOUT.as_secs()))),
    }
}

fn read_pem(path: &Path, what: &str) -> Result<Vec<rustls_pemfile::Item>> {
    let file = File::open(path).map_err(|e| Error::invalid(format!("{} {}: {}", what, path.display(), e)))?;
    rustls_pemfile::read_all(&mut BufReader::new(file))
        .map_err(|e| Error::invalid(format!("{} {}: {}", what, path.display(), e)))
}

fn tls_connector(tls: &Tls) -> Result<tokio_rustls::TlsConnector> {
    let mut roots = rustls::RootCertStore::empty();
    for item in read_pem(&tls.ca, "the CA file")? {
        if let rustls_pemfile::Item::X509Certificate(der) = item {
            roots
                .add(&rustls::Certificate(der))
                .map_err(|e| Error::invalid(format!("the CA file {}: {}", tls.ca.display(), e)))?;
        }
    }
    if roots.is_empty() {
        return Err(Error::invalid(format!("{} holds no PEM certificate", tls.ca.display())));
    }
    let certs: Vec<rustls::Certificate> = read_pem(&tls.cert, "the client certificate")?
        .into_iter()
        .filter_map(|item| match item {
            rustls_pemfile::Item::X509Certificate(der) => Some(rustls::Certificate(der)),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(Error::invalid(format!("{} holds no PEM certificate", tls.cert.display())));
    }
    let key = read_pem(&tls.key, "the client key")?
        .into_iter()
        .find_map(|item| match item {
            rustls_pemfile::Item::PKCS8Key(der)
            | rustls_pemfile::Item::RSAKey(der)
            | rustls_pemfile::Item::ECKey(der) => Some(rustls::PrivateKey(der)),
            _ => None,
        })
        .ok_or_else(|| Error::invalid(format!("{} holds no PEM private key", tls.key.display())))?;
    let mut config = rustls::ClientConfig::builder()
        .with_safe_defaults()
        .with_root_certificates(roots)
        .with_single_cert(certs, key)
        .map_err(|e| Error::invalid(format!("the client certificate and key: {}", e)))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tcp_without_tls_is_refused_before_dialling() {
        match Client::connect("127.0.0.1:7443").await {
            Err(Error::InvalidArgument { message, .. }) => {
                assert!(message.contains("mutual TLS"), "{}", message)
            }
            other => panic!("{:?}", other.err()),
        }
    }

    #[tokio::test]
    async fn a_socket_nobody_listens_on_is_unavailable() {
        let dir = std::env::temp_dir().join(format!("airlock-rust-sdk-{}", std::process::id()));
        match Client::connect(dir.join("no.sock").to_str().unwrap()).await {
            Err(Error::Unavailable { message }) => {
                assert!(message.contains("does not answer"), "{}", message)
            }
            other => panic!("{:?}", other.err()),
        }
    }

    /// A channel to a server that answers Api.Version with `status` alone, or with `reply`.
    async fn daemon_answering(status: Option<(i32, &'static str)>, reply: pb::VersionReply) -> Channel {
        use crate::grpc::tests::{channel_to, grpc_headers, trailers};
        channel_to(move |request, mut respond| async move {
            assert_eq!(request.uri().path(), "/airlock.v1.Api/Version");
            match status {
                Some((code, message)) => {
                    respond.send_response(grpc_headers(Some(code), message), true).unwrap();
                }
                None => {
                    let mut send = respond.send_response(grpc_headers(None, ""), false).unwrap();
                    send.send_data(crate::grpc::encode(&reply), false).unwrap();
                    send.send_trailers(trailers(0, "")).unwrap();
                }
            }
        })
        .await
    }

    fn reply(level: u32, oldest_client_level: u32) -> pb::VersionReply {
        pb::VersionReply { level, oldest_client_level, daemon_version: "9.9.9".into() }
    }

    #[tokio::test]
    async fn a_daemon_that_serves_the_sdks_level_passes() {
        let channel = daemon_answering(None, reply(API_LEVEL + 3, API_LEVEL)).await;
        check_version(&channel, "sock", API_LEVEL).await.unwrap();
        let v = version_at(&daemon_answering(None, reply(4, 1)).await, API_LEVEL).await.unwrap();
        assert_eq!(v, Version { level: 4, oldest_client_level: 1, daemon_version: "9.9.9".into() });
    }

    #[tokio::test]
    async fn an_sdk_older_than_the_daemon_serves_is_told_to_upgrade_itself() {
        let channel = daemon_answering(None, reply(5, 3)).await;
        match check_version(&channel, "sock", 2).await {
            Err(Error::VersionMismatch { message, daemon_level: 5, client_level: 2 }) => {
                assert!(
                    message.contains("serves API levels 3 to 5") && message.ends_with("upgrade the SDK"),
                    "{}",
                    message
                )
            }
            other => panic!("{:?}", other),
        }
        // airlockd refuses such a client itself, naming the levels: its sentence is kept.
        let refused =
            "this client speaks Airlock API level 2; airlockd 9.9.9 serves levels 3 to 5: upgrade the client";
        let channel = daemon_answering(Some((9, refused)), reply(0, 0)).await;
        match check_version(&channel, "sock", 2).await {
            Err(Error::VersionMismatch { message, client_level: 2, .. }) => assert_eq!(message, refused),
            other => panic!("{:?}", other),
        }
    }

    #[tokio::test]
    async fn a_daemon_from_before_api_levels_is_a_version_mismatch() {
        let channel = daemon_answering(Some((12, "")), reply(0, 0)).await;
        match check_version(&channel, "sock", API_LEVEL).await {
            Err(e @ Error::VersionMismatch { daemon_level: 0, client_level: API_LEVEL, .. }) => {
                assert!(e.to_string().ends_with("upgrade airlockd"), "{}", e);
                assert_eq!(e.code(), None);
            }
            other => panic!("{:?}", other),
        }
    }

    #[tokio::test]
    async fn tls_files_that_are_missing_are_invalid_arguments() {
        let tls = Tls { ca: "/nonexistent/ca.pem".into(), ..Default::default() };
        assert!(matches!(Client::connect_tls("127.0.0.1:1", tls).await, Err(Error::InvalidArgument { .. })));
    }
}
