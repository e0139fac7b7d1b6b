//! Sessions: creating, finding, listing, pausing, resuming, forking and removing them, and the
//! guard that removes one when it is dropped.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::exec::explain;
use crate::pb;
use crate::workspace::WorkspaceBase;

/// What a new session gets; zero and empty fields take airlockd's defaults.
///
/// ```no_run
/// # use airlock::SessionOptions;
/// let options = SessionOptions {
///     memory: "1g".into(),
///     allow: vec!["pypi.org".into()],
///     ..Default::default()
/// };
/// ```
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    /// An image airlockd has ("": its default image).
    pub image: String,
    pub vcpus: u32,
    /// Guest memory: "512m", "1g", or bytes ("536870912"); see [`parse_size`].
    pub memory: String,
    /// The writable layer's size, as `memory`.
    pub disk: String,
    /// Processes in the guest.
    pub pids: u32,
    /// The session is destroyed this long after creation; zero: never.
    pub ttl: Duration,
    /// It pauses itself after this long unused; `None`: 5 minutes, zero: never.
    pub idle_timeout: Option<Duration>,
    /// Egress bytes per second each way, as `memory` ("": no limit).
    pub net_rate: String,
    /// Egress rules: "pypi.org", "*.example.com:8443"; nothing is reachable by default.
    pub allow: Vec<String>,
    /// Rule sets: "pypi", "npm", "github", ...
    pub presets: Vec<String>,
    /// Secrets the guest holds only placeholders of: "NAME=SOURCE@HOST[,HOST...]" to its value.
    /// `None` reads the value here, with this process's rights, for `env:`, `file:` and `op://`
    /// sources (as the CLI does); `shared:` sources are read by airlockd.
    pub secrets: BTreeMap<String, Option<Vec<u8>>>,
    /// Volumes of the caller's to attach: "NAME:/PATH" (read-write, one session at a time)
    /// or "NAME:/PATH:ro" (read-only, any number at once).
    pub volumes: Vec<String>,
    /// A workspace's upload token (Workspaces.Upload): the session sees the project at
    /// /workspace. "": none. This SDK does not capture or upload projects: make a session with
    /// a workspace with the CLI (`airlock session create --workspace DIR`, or `airlock agent`)
    /// and work on it by id ([`Session::workspace`](crate::Session::workspace)).
    pub workspace: String,
    /// In a fleet, the host `Client::create_session` makes it on
    /// (its airlockd --host-id); "": the one with room. A one-shot run is made on the host
    /// called and refuses it.
    pub host: String,
}

/// Bytes from "512m", "1g", "1GiB" or a number of bytes (binary units, as the CLI's).
pub fn parse_size(value: &str, what: &str) -> Result<u64> {
    let refuse = || {
        Error::invalid(format!(
            "{} {:?} is not a size: give bytes, or a number with k, m, g or t (\"512m\", \"1g\")",
            what, value
        ))
    };
    let lower = value.trim().to_ascii_lowercase();
    let digits_end = lower.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(lower.len());
    let (number, unit) = lower.split_at(digits_end);
    let unit = unit.trim_start();
    let unit = unit.strip_suffix('b').unwrap_or(unit);
    let unit = unit.strip_suffix('i').unwrap_or(unit);
    let shift = match unit {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(refuse()),
    };
    let valid_number = !number.is_empty()
        && !number.starts_with('.')
        && !number.ends_with('.')
        && number.matches('.').count() <= 1;
    if !valid_number || (unit.is_empty() && lower.trim_end().ends_with('i')) {
        return Err(refuse());
    }
    let n: f64 = number.parse().map_err(|_| refuse())?;
    Ok((n * (1u64 << shift) as f64) as u64)
}

impl SessionOptions {
    fn limits(&self) -> Result<pb::Limits> {
        let size = |value: &str, what: &str| if value.is_empty() { Ok(0) } else { parse_size(value, what) };
        Ok(pb::Limits {
            vcpus: self.vcpus,
            memory_bytes: size(&self.memory, "memory")?,
            pids: self.pids,
            disk_bytes: size(&self.disk, "disk")?,
            ttl_seconds: self.ttl.as_secs(),
            idle_timeout_seconds: self.idle_timeout.map(|d| d.as_secs()),
            net_bytes_per_second: size(&self.net_rate, "net rate")?,
        })
    }

    fn request(&self) -> Result<pb::CreateSessionRequest> {
        Ok(pb::CreateSessionRequest {
            image: self.image.clone(),
            limits: Some(self.limits()?),
            allow: self.allow.clone(),
            allow_preset: self.presets.clone(),
            secrets: secret_bindings(&self.secrets)?,
            workspace: self.workspace.clone(),
            volumes: volume_mounts(&self.volumes)?,
            host: self.host.clone(),
        })
    }

    /// The session's part of an ExecStart without a session (`Client::run`).
    pub(crate) fn fill_exec(&self, start: &mut pb::ExecStart) -> Result<()> {
        if !self.host.is_empty() {
            return Err(Error::invalid(
                "host is for create_session: a one-shot run is made on the host called".to_string(),
            ));
        }
        start.image = self.image.clone();
        start.limits = Some(self.limits()?);
        start.allow = self.allow.clone();
        start.allow_preset = self.presets.clone();
        start.secrets = secret_bindings(&self.secrets)?;
        start.workspace = self.workspace.clone();
        start.volumes = volume_mounts(&self.volumes)?;
        Ok(())
    }
}

/// Bindings for "NAME=SOURCE@HOST[,HOST...]" specs, their values read here where not given.
pub(crate) fn secret_bindings(secrets: &BTreeMap<String, Option<Vec<u8>>>) -> Result<Vec<pb::SecretBinding>> {
    let mut out = Vec::new();
    for (spec, value) in secrets {
        let value = match value {
            Some(v) => v.clone(),
            None => {
                let source = spec.split_once('=').map_or("", |(_, rest)| rest);
                let source = source.split_once('@').map_or(source, |(s, _)| s);
                if let Some(name) = source.strip_prefix("env:") {
                    std::env::var_os(name)
                        .ok_or_else(|| Error::invalid(format!("secret {}: ${} is not set", spec, name)))?
                        .into_string()
                        .map_err(|_| Error::invalid(format!("secret {}: ${} is not UTF-8", spec, name)))?
                        .into_bytes()
                } else if let Some(path) = source.strip_prefix("file:") {
                    std::fs::read(path)
                        .map_err(|e| Error::invalid(format!("secret {}: {}: {}", spec, path, e)))?
                } else if source.starts_with("op://") {
                    op_read(spec, source)?
                } else {
                    Vec::new() // shared: sources are airlockd's to read
                }
            }
        };
        out.push(pb::SecretBinding { spec: spec.clone(), value: value.into() });
    }
    Ok(out)
}

/// The value 1Password's `op read` prints for `reference`, as this process's user.
fn op_read(spec: &str, reference: &str) -> Result<Vec<u8>> {
    let output = std::process::Command::new("op")
        .args(["read", reference])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Error::invalid(format!("secret {}: cannot run 1Password's `op`: {}", spec, e)))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let why = stderr.lines().next().unwrap_or("");
        return Err(Error::invalid(format!("secret {}: `op read` failed: {} {}", spec, output.status, why)));
    }
    let mut value = output.stdout;
    if value.last() == Some(&b'\n') {
        value.pop();
    }
    Ok(value)
}

/// Reads "NAME:/PATH" and "NAME:/PATH:ro", as airlock's --volume.
pub(crate) fn volume_mounts(specs: &[String]) -> Result<Vec<pb::VolumeMount>> {
    specs
        .iter()
        .map(|spec| {
            let (name, path) = spec.split_once(':').unwrap_or((spec.as_str(), ""));
            let read_only = path.ends_with(":ro");
            let path = if read_only || path.ends_with(":rw") { &path[..path.len() - 3] } else { path };
            if name.is_empty() || !path.starts_with('/') {
                return Err(Error::invalid(format!(
                    "{:?} is not a volume to attach: write NAME:/PATH or NAME:/PATH:ro (like \"data:/data:ro\")",
                    spec
                )));
            }
            Ok(pb::VolumeMount { name: name.to_string(), path: path.to_string(), read_only })
        })
        .collect()
}

/// A session's state, as the other SDKs name it ([`SessionState::as_str`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionState {
    Creating,
    Running,
    Paused,
    Stopped,
    Failed,
    /// A state newer than this SDK.
    Unknown,
}

impl SessionState {
    pub(crate) fn from_wire(value: i32) -> SessionState {
        match pb::SessionState::from_i32(value) {
            Some(pb::SessionState::Creating) => SessionState::Creating,
            Some(pb::SessionState::Running) => SessionState::Running,
            Some(pb::SessionState::Paused) => SessionState::Paused,
            Some(pb::SessionState::Stopped) => SessionState::Stopped,
            Some(pb::SessionState::Failed) => SessionState::Failed,
            _ => SessionState::Unknown,
        }
    }

    /// "creating", "running", "paused", "stopped", "failed" (or "unknown").
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Creating => "creating",
            SessionState::Running => "running",
            SessionState::Paused => "paused",
            SessionState::Stopped => "stopped",
            SessionState::Failed => "failed",
            SessionState::Unknown => "unknown",
        }
    }
}

impl fmt::Display for SessionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A session's limits as airlockd applies them (its defaults filled in).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub vcpus: u32,
    /// Bytes of guest memory.
    pub memory: u64,
    pub pids: u32,
    /// Bytes of the writable layer.
    pub disk: u64,
    /// Zero: no TTL.
    pub ttl: Duration,
    /// `None`: airlockd's default (5 minutes); zero: never.
    pub idle_timeout: Option<Duration>,
    /// Egress bytes per second each way; 0: no limit.
    pub net_rate: u64,
}

/// A volume a session attaches, where, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeMount {
    pub name: String,
    pub path: String,
    pub read_only: bool,
}

/// A session as airlockd last described it.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    pub id: String,
    pub image: String,
    pub image_digest: String,
    pub state: SessionState,
    /// Why it paused, stopped or failed.
    pub reason: String,
    pub hostname: String,
    pub created: SystemTime,
    pub last_used: SystemTime,
    pub limits: Limits,
    /// Who owns it: "uid:1000", "cert:NAME", ...
    pub tenant: String,
    pub volumes: Vec<VolumeMount>,
    /// The project it was made with (`airlock session create --workspace DIR`); see
    /// [`Session::workspace`].
    pub workspace: Option<WorkspaceBase>,
}

pub(crate) fn time_ms(ms: i64) -> SystemTime {
    if ms >= 0 {
        UNIX_EPOCH + Duration::from_millis(ms as u64)
    } else {
        UNIX_EPOCH - Duration::from_millis(ms.unsigned_abs())
    }
}

impl SessionInfo {
    pub(crate) fn from_wire(s: pb::Session) -> SessionInfo {
        let l = s.limits.unwrap_or_default();
        SessionInfo {
            id: s.id,
            image: s.image,
            image_digest: s.image_digest,
            state: SessionState::from_wire(s.state),
            reason: s.reason,
            hostname: s.hostname,
            created: time_ms(s.created_unix_ms),
            last_used: time_ms(s.last_used_unix_ms),
            limits: Limits {
                vcpus: l.vcpus,
                memory: l.memory_bytes,
                pids: l.pids,
                disk: l.disk_bytes,
                ttl: Duration::from_secs(l.ttl_seconds),
                idle_timeout: l.idle_timeout_seconds.map(Duration::from_secs),
                net_rate: l.net_bytes_per_second,
            },
            tenant: s.tenant,
            volumes: s
                .volumes
                .into_iter()
                .map(|v| VolumeMount { name: v.name, path: v.path, read_only: v.read_only })
                .collect(),
            workspace: s.workspace.map(WorkspaceBase::from_wire),
        }
    }
}

/// Airlock's session ids are 12 lowercase hex digits; airlockd checks, this only refuses "".
fn check_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid("a session id is a non-empty string (as create_session returned)"));
    }
    Ok(())
}

pub(crate) async fn get_info(client: &Client, id: &str) -> Result<SessionInfo> {
    let s: pb::Session = client
        .channel
        .unary("/airlock.v1.Sessions/Get", &pb::GetSessionRequest { id: id.to_string() })
        .await?;
    Ok(SessionInfo::from_wire(s))
}

impl Client {
    /// Boots (or restores) a session and returns once it runs commands.
    pub async fn create_session(&self, options: &SessionOptions) -> Result<Session> {
        let request = options.request()?;
        let s: pb::Session = self.channel.unary("/airlock.v1.Sessions/Create", &request).await?;
        Ok(Session { client: self.clone(), info: SessionInfo::from_wire(s) })
    }

    /// [`create_session`](Client::create_session) as a [`SessionGuard`]: the session is
    /// removed when the guard is dropped (or by [`SessionGuard::remove`]).
    pub async fn session(&self, options: &SessionOptions) -> Result<SessionGuard> {
        Ok(self.create_session(options).await?.into_guard())
    }

    /// One of the caller's sessions ([`Error::NotFound`] for another tenant's).
    pub async fn get_session(&self, id: &str) -> Result<Session> {
        check_id(id)?;
        Ok(Session { client: self.clone(), info: get_info(self, id).await? })
    }

    /// The caller's sessions, newest first (stopped and failed ones too).
    pub async fn list_sessions(&self) -> Result<Vec<Session>> {
        let reply: pb::ListSessionsResponse =
            self.channel.unary("/airlock.v1.Sessions/List", &pb::ListSessionsRequest::default()).await?;
        Ok(reply
            .sessions
            .into_iter()
            .map(|s| Session { client: self.clone(), info: SessionInfo::from_wire(s) })
            .collect())
    }
}

/// One session. [`info`](Session::info) is its last known state ([`refresh`](Session::refresh)
/// asks again; pause and resume update it). Cloning it copies the handle, not the session.
#[derive(Clone)]
pub struct Session {
    pub(crate) client: Client,
    pub(crate) info: SessionInfo,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session").field("info", &self.info).finish()
    }
}

impl Session {
    /// The session's id.
    pub fn id(&self) -> &str {
        &self.info.id
    }

    /// The session as airlockd last described it.
    pub fn info(&self) -> &SessionInfo {
        &self.info
    }

    /// The client this session was reached with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) async fn explain(&self, error: Error) -> Error {
        explain(&self.client, self.id(), error).await
    }

    pub(crate) async fn call<Q: prost::Message, R: prost::Message + Default>(
        &self,
        path: &str,
        request: &Q,
    ) -> Result<R> {
        match self.client.channel.unary(path, request).await {
            Ok(r) => Ok(r),
            Err(status) => Err(self.explain(status.into()).await),
        }
    }

    /// Asks airlockd for the session's state.
    pub async fn refresh(&mut self) -> Result<&SessionInfo> {
        self.info = get_info(&self.client, self.id()).await?;
        Ok(&self.info)
    }

    /// Snapshots the session to disk and ends its VM: no process, no host memory (refused
    /// while a command runs: [`Error::FailedPrecondition`]).
    pub async fn pause(&mut self) -> Result<&SessionInfo> {
        let s: pb::Session = self
            .call("/airlock.v1.Sessions/Pause", &pb::PauseSessionRequest { id: self.id().to_string() })
            .await?;
        self.info = SessionInfo::from_wire(s);
        Ok(&self.info)
    }

    /// Restores a paused session's VM, every process and file as they were (commands and file
    /// operations resume it too).
    pub async fn resume(&mut self) -> Result<&SessionInfo> {
        let s: pb::Session = self
            .call("/airlock.v1.Sessions/Resume", &pb::ResumeSessionRequest { id: self.id().to_string() })
            .await?;
        self.info = SessionInfo::from_wire(s);
        Ok(&self.info)
    }

    /// `count` new sessions from one snapshot of this one, each with its own copy of the disk,
    /// its own id and hostname. This one is left as it was.
    pub async fn fork(&self, count: u32) -> Result<Vec<Session>> {
        if count < 1 {
            return Err(Error::invalid("fork count is 1 or more"));
        }
        let reply: pb::ForkSessionResponse = self
            .call("/airlock.v1.Sessions/Fork", &pb::ForkSessionRequest { id: self.id().to_string(), count })
            .await?;
        Ok(reply
            .sessions
            .into_iter()
            .map(|s| Session { client: self.client.clone(), info: SessionInfo::from_wire(s) })
            .collect())
    }

    /// Destroys the VM and every file of the session; its record stays ("stopped"), with its
    /// logs and timeline.
    pub async fn remove(&self) -> Result<()> {
        let _: pb::RemoveSessionResponse = self
            .call("/airlock.v1.Sessions/Remove", &pb::RemoveSessionRequest { id: self.id().to_string() })
            .await?;
        Ok(())
    }

    /// A guard that removes the session when dropped.
    pub fn into_guard(self) -> SessionGuard {
        SessionGuard { session: Some(self) }
    }
}

/// A session that is removed when the guard is dropped (`Client::session`, or
/// [`Session::into_guard`]); it derefs to the [`Session`].
///
/// `Drop` cannot be async, and a removal spawned as a task may never run (a runtime that ends
/// with `main` or a test cancels its tasks), so the guard waits for the removal in `drop`:
/// on a multi-threaded tokio runtime through `block_in_place` on this connection; anywhere
/// else (a current-thread runtime, or no runtime) on a thread of its own with a fresh
/// connection to the same address, as the same caller. That blocks the dropping thread for
/// the removal's time (well under a second, most often). Errors are ignored there: call
/// [`remove`](SessionGuard::remove) to see them, which is also the way to remove without
/// blocking.
pub struct SessionGuard {
    session: Option<Session>,
}

impl SessionGuard {
    /// Removes the session now, and says how that went.
    pub async fn remove(mut self) -> Result<()> {
        let session = self.session.take().expect("a guard holds its session until removed or kept");
        session.remove().await
    }

    /// Keeps the session: the guard is disarmed and the session handed back.
    pub fn keep(mut self) -> Session {
        self.session.take().expect("a guard holds its session until removed or kept")
    }
}

impl Deref for SessionGuard {
    type Target = Session;
    fn deref(&self) -> &Session {
        self.session.as_ref().expect("a guard holds its session until removed or kept")
    }
}

impl DerefMut for SessionGuard {
    fn deref_mut(&mut self) -> &mut Session {
        self.session.as_mut().expect("a guard holds its session until removed or kept")
    }
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        let session = match self.session.take() {
            Some(s) => s,
            None => return,
        };
        let deadline = Duration::from_secs(60);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
                tokio::task::block_in_place(|| {
                    handle.block_on(async {
                        let _ = tokio::time::timeout(deadline, session.remove()).await;
                    })
                });
                return;
            }
        }
        // This thread's runtime (if any) cannot run the connection while it waits here: remove
        // over a connection of a runtime of its own.
        let address = (*session.client.address).clone();
        let id = session.id().to_string();
        drop(session);
        let remover = std::thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(r) => r,
                Err(_) => return,
            };
            runtime.block_on(async move {
                let _ = tokio::time::timeout(deadline, async {
                    if let Ok(client) = Client::dial(address).await {
                        let request = pb::RemoveSessionRequest { id };
                        let _: Result<pb::RemoveSessionResponse, _> =
                            client.channel.unary("/airlock.v1.Sessions/Remove", &request).await;
                    }
                })
                .await;
            });
        });
        let _ = remover.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_the_cli_reads_them() {
        assert_eq!(parse_size("512m", "memory").unwrap(), 512 << 20);
        assert_eq!(parse_size("1g", "memory").unwrap(), 1 << 30);
        assert_eq!(parse_size("1GiB", "memory").unwrap(), 1 << 30);
        assert_eq!(parse_size(" 2 KB ", "memory").unwrap(), 2048);
        assert_eq!(parse_size("1.5k", "memory").unwrap(), 1536);
        assert_eq!(parse_size("536870912", "memory").unwrap(), 536870912);
        for bad in ["", "g", "1x", "-1", "1..5m", "one", "1i"] {
            assert!(matches!(parse_size(bad, "memory"), Err(Error::InvalidArgument { .. })), "{:?}", bad);
        }
    }

    #[test]
    fn volumes_read_as_the_cli_reads_them() {
        let v = volume_mounts(&["data:/data".into(), "models:/m:ro".into(), "x:/y:rw".into()]).unwrap();
        assert_eq!(
            v.iter().map(|m| (m.name.as_str(), m.path.as_str(), m.read_only)).collect::<Vec<_>>(),
            [("data", "/data", false), ("models", "/m", true), ("x", "/y", false)]
        );
        for bad in ["data", ":/data", "data:relative"] {
            assert!(volume_mounts(&[bad.to_string()]).is_err(), "{}", bad);
        }
    }

    #[test]
    fn options_become_the_request_airlockd_reads() {
        std::env::set_var("AIRLOCK_RUST_SDK_TEST_SECRET", "s3cret");
        let mut secrets = BTreeMap::new();
        secrets.insert("TOKEN=env:AIRLOCK_RUST_SDK_TEST_SECRET@api.example.com".to_string(), None);
        secrets.insert("OTHER=shared:team-key@example.com".to_string(), None);
        secrets.insert("GIVEN=env:X@example.com".to_string(), Some(b"v".to_vec()));
        let options = SessionOptions {
            memory: "1g".into(),
            idle_timeout: Some(Duration::ZERO),
            allow: vec!["pypi.org".into()],
            secrets,
            ..Default::default()
        };
        let r = options.request().unwrap();
        let limits = r.limits.unwrap();
        assert_eq!(limits.memory_bytes, 1 << 30);
        assert_eq!(limits.idle_timeout_seconds, Some(0));
        assert_eq!(r.allow, ["pypi.org"]);
        let values: Vec<_> = r.secrets.iter().map(|s| (s.spec.as_str(), &s.value[..])).collect();
        assert_eq!(
            values,
            [
                ("GIVEN=env:X@example.com", &b"v"[..]),
                ("OTHER=shared:team-key@example.com", &b""[..]),
                ("TOKEN=env:AIRLOCK_RUST_SDK_TEST_SECRET@api.example.com", &b"s3cret"[..]),
            ]
        );
        let unset = SessionOptions {
            secrets: [("T=env:AIRLOCK_RUST_SDK_UNSET@h".to_string(), None)].into_iter().collect(),
            ..Default::default()
        };
        assert!(matches!(unset.request(), Err(Error::InvalidArgument { .. })));
        assert_eq!(SessionOptions::default().request().unwrap().limits.unwrap().idle_timeout_seconds, None);
    }

    #[test]
    fn unknown_states_are_unknown_not_a_panic() {
        assert_eq!(SessionState::from_wire(2), SessionState::Running);
        assert_eq!(SessionState::from_wire(99), SessionState::Unknown);
        assert_eq!(SessionState::Paused.to_string(), "paused");
    }
}
