//! Who and what reaches a session, and the record of who did what: a session's secrets and
//! exposed ports, and the host's audit log.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::client::Client;
use crate::error::{Error, Result};
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

/// Whether the audit log's hash chain is whole ([`Client::verify_audit`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditVerification {
    pub ok: bool,
    pub records: u64,
    pub last_seq: i64,
    /// The first break in the chain; "" when ok.
    pub problem: String,
    pub first_bad_seq: i64,
}

impl Client {
    /// The audit log's records from `since` on (`None`: all): the newest `limit` (0: 1000),
    /// oldest first. Root over the Unix socket only ([`Error::PermissionDenied`] otherwise).
    pub async fn audit(&self, since: Option<SystemTime>, limit: u32) -> Result<Vec<AuditRecord>> {
        let since_unix_ms = since
            .map(|t| t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0))
            .unwrap_or(0);
        let request = pb::ListAuditRequest { since_unix_ms, limit };
        let mut responses =
            self.channel.server_streaming::<_, pb::AuditRecord>("/airlock.v1.Audit/List", &request).await?;
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

    /// Walks the audit log's whole chain and says whether a record was changed, removed or
    /// moved, and where.
    pub async fn verify_audit(&self) -> Result<AuditVerification> {
        let v: pb::AuditVerification =
            self.channel.unary("/airlock.v1.Audit/Verify", &pb::VerifyAuditRequest {}).await?;
        Ok(AuditVerification {
            ok: v.ok,
            records: v.records,
            last_seq: v.last_seq,
            problem: v.problem,
            first_bad_seq: v.first_bad_seq,
        })
    }
}
