//! Who and what reaches a session, and the record of who did what: a session's secrets, its
//! ports (exposed through airlockd's gateway, or forwarded here), and the host's audit log.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::future::Either;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::grpc::Channel;
use crate::pb;
use crate::session::{secret_bindings, time_ms, Session};

/// A secret bound to a session: its name, source, hosts and placeholder, never its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretInfo {
    pub name: String,
    /// "env:OPENAI_API_KEY", "op://vault/item/field".
    pub source: String,
    pub hosts: Vec<String>,
    /// Swapped in request bodies too.
    pub body: bool,
    /// What the guest holds in its environment instead of the value.
    pub placeholder: String,
    /// The value is in airlockd's memory (false after a restart for env: and file: sources,
    /// until set again).
    pub available: bool,
    pub last_used: Option<SystemTime>,
}

fn secret_infos(reply: pb::ListSecretsResponse) -> Vec<SecretInfo> {
    reply
        .secrets
        .into_iter()
        .map(|s| SecretInfo {
            name: s.name,
            source: s.source,
            hosts: s.hosts,
            body: s.body,
            placeholder: s.placeholder,
            available: s.available,
            last_used: if s.last_used_unix_ms == 0 { None } else { Some(time_ms(s.last_used_unix_ms)) },
        })
        .collect()
}

/// A session's secrets ([`Session::secrets`]).
pub struct Secrets<'a> {
    session: &'a Session,
}

impl Secrets<'_> {
    /// The secrets bound to the session.
    pub async fn list(&self) -> Result<Vec<SecretInfo>> {
        let request = pb::ListSecretsRequest { session_id: self.session.id().to_string() };
        Ok(secret_infos(self.session.call("/airlock.v1.Secrets/List", &request).await?))
    }

    /// Binds secrets ("NAME=SOURCE@HOST[,HOST...]" to a value, or `None` to read it here as
    /// [`SessionOptions::secrets`](crate::SessionOptions::secrets) does), or gives bound ones a
    /// new value or source (their placeholders stay).
    pub async fn set(&self, secrets: &BTreeMap<String, Option<Vec<u8>>>) -> Result<Vec<SecretInfo>> {
        let request = pb::SetSecretsRequest {
            session_id: self.session.id().to_string(),
            secrets: secret_bindings(secrets)?,
        };
        Ok(secret_infos(self.session.call("/airlock.v1.Secrets/Set", &request).await?))
    }

    /// Unbinds secrets by name.
    pub async fn remove<S: AsRef<str>>(&self, names: &[S]) -> Result<Vec<SecretInfo>> {
        let request = pb::RemoveSecretsRequest {
            session_id: self.session.id().to_string(),
            names: names.iter().map(|n| n.as_ref().to_string()).collect(),
        };
        Ok(secret_infos(self.session.call("/airlock.v1.Secrets/Remove", &request).await?))
    }
}

/// A port of the session's guest reached as a URL through airlockd's HTTP gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exposure {
    pub port: u16,
    /// To open: carries `?airlock_token=TOKEN` unless public.
    pub url: String,
    /// Send it as the header X-Airlock-Token; "" when public.
    pub token: String,
    pub public: bool,
    /// PORT-ID.DOMAIN: the Host a request names.
    pub host: String,
    pub created: SystemTime,
}

fn exposure(e: pb::Exposure) -> Exposure {
    Exposure {
        port: e.port as u16,
        url: e.url,
        token: e.token,
        public: e.public,
        host: e.host,
        created: time_ms(e.created_unix_ms),
    }
}

/// Bytes of a forwarded connection read here at a time.
const FORWARD_PIECE: usize = 64 << 10;

fn check_port(port: u16) -> Result<u32> {
    if port == 0 {
        return Err(Error::invalid("0 is not a TCP port; give one from 1 to 65535"));
    }
    Ok(port as u32)
}

/// A session's exposed ports ([`Session::ports`]).
pub struct Ports<'a> {
    session: &'a Session,
}

impl Ports<'_> {
    /// Makes a port of the guest reachable as a URL (exposing it again gives it a new token).
    pub async fn expose(&self, port: u16, public: bool) -> Result<Exposure> {
        let request =
            pb::ExposeRequest { session_id: self.session.id().to_string(), port: check_port(port)?, public };
        Ok(exposure(self.session.call("/airlock.v1.Sessions/Expose", &request).await?))
    }

    /// The session's exposures.
    pub async fn list(&self) -> Result<Vec<Exposure>> {
        let request = pb::ListExposuresRequest { session_id: self.session.id().to_string() };
        let reply: pb::ListExposuresResponse =
            self.session.call("/airlock.v1.Sessions/ListExposures", &request).await?;
        Ok(reply.exposures.into_iter().map(exposure).collect())
    }

    /// Ends an exposure and cuts its open connections.
    pub async fn unexpose(&self, port: u16) -> Result<()> {
        let request =
            pb::UnexposeRequest { session_id: self.session.id().to_string(), port: check_port(port)? };
        let _: pb::UnexposeResponse = self.session.call("/airlock.v1.Sessions/Unexpose", &request).await?;
        Ok(())
    }

    /// Listens here on `address` ("127.0.0.1:0": any free port) and carries each connection to
    /// `port` in the guest through airlockd, as `airlock port-forward` does: a server there
    /// listening on 127.0.0.1, ::1 or every address. A paused session is resumed by a
    /// connection, and is not paused while one is open. Runs on the current tokio runtime
    /// until the [`Forward`] is dropped.
    pub async fn forward(&self, port: u16, address: &str) -> Result<Forward> {
        let port = check_port(port)? as u16;
        // A session that is not the caller's is said now rather than at each connection.
        crate::session::get_info(&self.session.client, self.session.id()).await?;
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| Error::invalid(format!("cannot listen on {}: {}", address, e)))?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| Error::invalid(format!("cannot listen on {}: {}", address, e)))?;
        let channel = self.session.client.channel.clone();
        let session_id = self.session.id().to_string();
        let accepting = tokio::spawn(async move {
            while let Ok((connection, _)) = listener.accept().await {
                let _ = connection.set_nodelay(true);
                // Each connection runs to its end, whatever becomes of the listener.
                tokio::spawn(relay(channel.clone(), session_id.clone(), port, connection));
            }
        });
        Ok(Forward { local_addr, port, accepting })
    }
}

/// A listener here whose connections reach a port in a session's guest ([`Ports::forward`]).
/// Dropping it (or [`close`](Forward::close)) stops listening; connections already open run to
/// their end.
#[derive(Debug)]
pub struct Forward {
    local_addr: SocketAddr,
    port: u16,
    accepting: tokio::task::JoinHandle<()>,
}

impl Forward {
    /// Where it listens (the port asked for, or the free one it got).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The guest's port its connections reach.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops listening.
    pub fn close(self) {}
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// One connection here carried to `port` of the session's guest: its bytes and its end each
/// way. A reset there (nothing listens on the port, the server reset it, the session paused)
/// closes the connection here.
async fn relay(channel: Channel, session_id: String, port: u16, connection: tokio::net::TcpStream) {
    use pb::port_forward_request::Kind as Out;
    use pb::port_forward_response::Kind as In;
    let (mut requests, mut responses) = match channel
        .streaming::<pb::PortForwardRequest, pb::PortForwardResponse>("/airlock.v1.Sessions/ForwardPort")
        .await
    {
        Ok(call) => call,
        Err(_) => return,
    };
    let start = pb::PortForwardStart { session_id, port: port as u32 };
    if requests.send(&pb::PortForwardRequest { kind: Some(Out::Start(start)) }).await.is_err() {
        return;
    }
    let (mut reader, mut writer) = connection.into_split();
    // Here to the guest: the connection's bytes, then its end (a half-close).
    let to_guest = async move {
        let mut buffer = vec![0u8; FORWARD_PIECE];
        loop {
            match reader.read(&mut buffer).await {
                Ok(0) => break,
                Ok(n) => {
                    let data = Out::Data(Bytes::copy_from_slice(&buffer[..n]));
                    if requests.send(&pb::PortForwardRequest { kind: Some(data) }).await.is_err() {
                        return requests;
                    }
                }
                Err(_) => {
                    // Reset here: reset there.
                    requests.cancel();
                    return requests;
                }
            }
        }
        let _ = requests.send_last(&pb::PortForwardRequest { kind: Some(Out::Eof(true)) }).await;
        requests
    };
    // The guest to here, until its end or a reset.
    let to_here = async move {
        while let Ok(Some(answer)) = responses.message().await {
            let going = match answer.kind {
                Some(In::Data(data)) => writer.write_all(&data).await.is_ok(),
                Some(In::Eof(_)) => {
                    let _ = writer.shutdown().await;
                    true
                }
                Some(In::Reset(_)) => false,
                None => true, // a kind newer than this SDK
            };
            if !going {
                return;
            }
        }
    };
    futures_util::pin_mut!(to_guest, to_here);
    match futures_util::future::select(to_guest, to_here).await {
        // Sent all there is to send: the guest's side goes on until its end.
        Either::Left((_requests, to_here)) => to_here.await,
        // The guest's side ended (or was reset): nothing more goes there.
        Either::Right(_) => {}
    }
}

impl Session {
    /// The session's secrets: names, sources, hosts and placeholders, never values.
    pub fn secrets(&self) -> Secrets<'_> {
        Secrets { session: self }
    }

    /// The session's ports exposed through airlockd's HTTP gateway.
    pub fn ports(&self) -> Ports<'_> {
        Ports { session: self }
    }
}

/// A record of the host's audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRecord {
    /// 1, 2, ... in the order written.
    pub seq: i64,
    pub time: SystemTime,
    /// Who asked: uid:N, cert:NAME.
    pub principal: String,
    /// Whose sessions or images it concerned.
    pub tenant: String,
    /// session.create, file.read, network.allow, quota.refuse, ...
    pub action: String,
    /// A session id, image name, path, ...
    pub target: String,
    /// "ok..." or what went wrong.
    pub outcome: String,
    /// SHA-256 hex of the previous hash and this record's fields.
    pub hash: String,
}

/// Whether the audit log's hash chain is whole ([`Audit::verify`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditVerification {
    pub ok: bool,
    pub records: u64,
    pub last_seq: i64,
    /// The first break in the chain; "" when ok.
    pub problem: String,
    pub first_bad_seq: i64,
}

/// The host's audit log ([`Client::audit`]): root over the Unix socket and read-only operators
/// only ([`Error::PermissionDenied`] otherwise: the log holds every user's records).
pub struct Audit<'a> {
    client: &'a Client,
}

impl Client {
    /// The host's audit log: `client.audit().list(since, limit)`, `client.audit().verify()`.
    pub fn audit(&self) -> Audit<'_> {
        Audit { client: self }
    }
}

impl Audit<'_> {
    /// The records from `since` on (`None`: all): the newest `limit` (0: 1000), oldest first.
    pub async fn list(&self, since: Option<SystemTime>, limit: u32) -> Result<Vec<AuditRecord>> {
        let since_unix_ms = since
            .map(|t| t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0))
            .unwrap_or(0);
        let request = pb::ListAuditRequest { since_unix_ms, limit };
        let mut responses = self
            .client
            .channel
            .server_streaming::<_, pb::AuditRecord>("/airlock.v1.Audit/List", &request)
            .await?;
        let mut out = Vec::new();
        while let Some(r) = responses.message().await? {
            out.push(AuditRecord {
                seq: r.seq,
                time: time_ms(r.unix_ms),
                principal: r.principal,
                tenant: r.tenant,
                action: r.action,
                target: r.target,
                outcome: r.outcome,
                hash: r.hash,
            });
        }
        Ok(out)
    }

    /// Walks the whole hash chain and says whether a record was changed, removed or moved, and
    /// where.
    pub async fn verify(&self) -> Result<AuditVerification> {
        let v: pb::AuditVerification =
            self.client.channel.unary("/airlock.v1.Audit/Verify", &pb::VerifyAuditRequest {}).await?;
        Ok(AuditVerification {
            ok: v.ok,
            records: v.records,
            last_seq: v.last_seq,
            problem: v.problem,
            first_bad_seq: v.first_bad_seq,
        })
    }
}
