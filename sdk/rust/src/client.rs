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
    /// socket's peer credentials.
    pub async fn connect(address: &str) -> Result<Client> {
        Client::dial(Address { address: address.to_string(), tls: None }).await
    }

    /// Connects to airlockd's TCP listener (`host:port`) with mutual TLS; airlockd decides the
    /// caller's tenant from the client certificate. A socket path works here too (`tls` unused).
    pub async fn connect_tls(address: &str, tls: Tls) -> Result<Client> {
        Client::dial(Address { address: address.to_string(), tls: Some(tls) }).await
    }

    pub(crate) async fn dial(mut address: Address) -> Result<Client> {
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
        probe(&channel, &target).await?;
        Ok(Client { channel, address: Arc::new(address) })
    }
}

/// Waits until airlockd answers a call, as the other SDKs' connects do (a TLS listener that
/// refuses the client's certificate says so only then), and checks that it serves this SDK's
/// API: a server without `airlock.v1` fails here, loudly, rather than at the first real call.
async fn probe(channel: &Channel, address: &str) -> Result<()> {
    let call = channel
        .unary::<pb::GetQuotaRequest, pb::QuotaReport>("/airlock.v1.Sessions/Quota", &pb::GetQuotaRequest {});
    match tokio::time::timeout(CONNECT_TIMEOUT, call).await {
        Err(_) => Err(unavailable(address, format!("no answer in {}s", CONNECT_TIMEOUT.as_secs()))),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(status)) => match status.code {
            Code::Unimplemented => Err(Error::Other {
                code: Code::Unimplemented,
                message: format!(
                    "{} does not serve the API airlock.v1 this SDK speaks (it is not airlockd, or an airlockd \
                     older than this SDK: upgrade it)",
                    address
                ),
            }),
            Code::Unavailable | Code::Cancelled | Code::Internal | Code::Unknown => {
                Err(unavailable(address, status.message))
            }
            // It answered as airlockd does, if not to this caller's liking (a read-only operator).
            _ => Ok(()),
        },
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

    #[tokio::test]
    async fn tls_files_that_are_missing_are_invalid_arguments() {
        let tls = Tls { ca: "/nonexistent/ca.pem".into(), ..Default::default() };
        assert!(matches!(Client::connect_tls("127.0.0.1:1", tls).await, Err(Error::InvalidArgument { .. })));
    }
}
