//! What a session may reach and what it did: its network rules, logs, metrics, timeline, and
//! the events of [`Client::watch`].

use std::time::{Duration, SystemTime};

use bytes::Bytes;

use crate::client::Client;
use crate::error::{Code, Error, Result};
use crate::grpc::Responses;
use crate::pb;
use crate::session::{time_ms, Session, SessionState};

/// One rule of a session's egress policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkRule {
    /// Canonical: "pypi.org", "*.example.com:8443", "10.20.0.0/16:5432".
    pub rule: String,
    /// Where it came from: "create", "run", "preset:pypi", "allow", "deny".
    pub source: String,
    /// It denies what the session's allows would let through.
    pub deny: bool,
    /// When it expires; `None`: never.
    pub expires: Option<SystemTime>,
}

/// Rules to add and remove in one step ([`Network::change`]).
#[derive(Clone, Debug, Default)]
pub struct NetworkChange {
    pub allow: Vec<String>,
    pub presets: Vec<String>,
    pub deny: Vec<String>,
    /// Rules (allow or deny) to drop, as [`Network::rules`] lists them.
    pub remove: Vec<String>,
    /// The rules added expire after this; `None`: never.
    pub ttl: Option<Duration>,
}

fn rules(policy: pb::NetworkPolicy) -> Vec<NetworkRule> {
    policy
        .rules
        .into_iter()
        .map(|r| NetworkRule {
            rule: r.rule,
            source: r.source,
            deny: r.deny,
            expires: if r.expires_unix_ms == 0 { None } else { Some(time_ms(r.expires_unix_ms)) },
        })
        .collect()
}

/// A session's egress policy ([`Session::network`]): nothing is reachable until allowed.
pub struct Network<'a> {
    session: &'a Session,
}

impl Network<'_> {
    /// The policy's rules.
    pub async fn rules(&self) -> Result<Vec<NetworkRule>> {
        let request = pb::GetNetworkRequest { session_id: self.session.id().to_string() };
        Ok(rules(self.session.call("/airlock.v1.Network/Get", &request).await?))
    }

    /// Adds and removes rules in one step; it applies at once to the running session
    /// (connections no longer allowed are reset).
    pub async fn change(&self, change: &NetworkChange) -> Result<Vec<NetworkRule>> {
        let request = pb::ChangeNetworkRequest {
            session_id: self.session.id().to_string(),
            allow: change.allow.clone(),
            allow_preset: change.presets.clone(),
            deny: change.deny.clone(),
            remove: change.remove.clone(),
            ttl_seconds: change.ttl.map_or(0.0, |t| t.as_secs_f64()),
        };
        Ok(rules(self.session.call("/airlock.v1.Network/Change", &request).await?))
    }
}

/// Which output a [`LogEntry`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogStream {
    Stdout,
    Stderr,
    /// What Airlock did: a command started or ended, the session failed.
    Event,
    Unknown,
}

/// A piece of a command's stored output, or an event of Airlock's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    pub time: SystemTime,
    pub exec_id: u64,
    pub stream: LogStream,
    pub data: Bytes,
}

/// A sample of a guest's metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct Metrics {
    pub time: SystemTime,
    /// Of all vCPUs together, over the last interval.
    pub cpu_percent: f64,
    pub memory_used: u64,
    pub memory_total: u64,
    pub processes: u64,
    pub disk_used: u64,
    pub disk_total: u64,
    /// Egress since the VM started (or was last resumed): bytes of connections that ended.
    pub net_bytes_out: u64,
    pub net_bytes_in: u64,
    pub net_connections: u64,
    /// DNS answers and connections refused.
    pub net_denied: u64,
}

/// One thing that happened in a session ([`Session::timeline`]). Every string from the guest
/// (output, transcripts, file names) is hostile: show it as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelineEvent {
    pub seq: u64,
    pub time: SystemTime,
    /// session.create, session.pause, exec, file.write, network.allow, net.connect, ...
    pub kind: String,
    /// One line for a person.
    pub summary: String,
    /// Who asked (uid:0, cert:NAME, airlockd), or the agent's name.
    pub actor: String,
    /// A denial, a failure, a non-zero exit.
    pub failed: bool,
    /// kind "exec" (and agent.*): the command.
    pub exec_id: u64,
    pub argv: Vec<Bytes>,
    pub user: String,
    pub cwd: String,
    pub tty: bool,
    /// `None`: still running (or airlockd lost it).
    pub duration: Option<Duration>,
    pub exit_code: i32,
    /// Its output, stdout and stderr interleaved as they came, from its start (cut short).
    pub output: Bytes,
    pub output_total: u64,
    /// agent.*: the tool call's id, the tool, and the text.
    pub tool_id: String,
    pub tool: String,
    pub text: Bytes,
}

impl TimelineEvent {
    fn from_wire(e: pb::TimelineEvent) -> TimelineEvent {
        TimelineEvent {
            seq: e.seq,
            time: time_ms(e.unix_ms),
            kind: e.kind,
            summary: e.summary,
            actor: e.actor,
            failed: e.failed,
            exec_id: e.exec_id,
            argv: e.argv,
            user: e.user,
            cwd: e.cwd,
            tty: e.tty,
            duration: if e.duration_ms < 0 {
                None
            } else {
                Some(Duration::from_millis(e.duration_ms as u64))
            },
            exit_code: e.exit_code,
            output: e.output,
            output_total: e.output_total,
            tool_id: e.tool_id,
            tool: e.tool,
            text: e.text,
        }
    }
}

/// Every message of a stream of `session`'s, each made a public type by `each`.
pub(crate) async fn collect<R: prost::Message + Default, T>(
    session: &Session,
    mut responses: Responses<R>,
    mut each: impl FnMut(R) -> T,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    loop {
        match responses.message().await {
            Ok(Some(m)) => out.push(each(m)),
            Ok(None) => return Ok(out),
            Err(status) => return Err(session.explain(status.into()).await),
        }
    }
}

impl Session {
    /// The session's egress policy.
    pub fn network(&self) -> Network<'_> {
        Network { session: self }
    }

    /// The stored output of the session's commands, oldest first (`tail`: only the last
    /// entries; 0: all).
    pub async fn logs(&self, tail: u32) -> Result<Vec<LogEntry>> {
        let request = pb::LogsRequest { session_id: self.id().to_string(), tail, ..Default::default() };
        let responses = self.client.channel.server_streaming("/airlock.v1.Sessions/Logs", &request).await?;
        collect(self, responses, |e: pb::LogEntry| LogEntry {
            time: time_ms(e.unix_ms),
            exec_id: e.exec_id,
            stream: match pb::log_entry::Stream::from_i32(e.stream) {
                Some(pb::log_entry::Stream::Stdout) => LogStream::Stdout,
                Some(pb::log_entry::Stream::Stderr) => LogStream::Stderr,
                Some(pb::log_entry::Stream::Event) => LogStream::Event,
                _ => LogStream::Unknown,
            },
            data: e.data,
        })
        .await
    }

    /// One sample of the guest's metrics (a paused session is resumed for it).
    pub async fn metrics(&self) -> Result<Metrics> {
        let request =
            pb::MetricsRequest { session_id: self.id().to_string(), once: true, ..Default::default() };
        let responses =
            self.client.channel.server_streaming("/airlock.v1.Sessions/Metrics", &request).await?;
        let samples = collect(self, responses, |m: pb::MetricsSample| Metrics {
            time: time_ms(m.unix_ms),
            cpu_percent: m.cpu_percent,
            memory_used: m.memory_used_bytes,
            memory_total: m.memory_total_bytes,
            processes: m.processes,
            disk_used: m.disk_used_bytes,
            disk_total: m.disk_total_bytes,
            net_bytes_out: m.net_bytes_out,
            net_bytes_in: m.net_bytes_in,
            net_connections: m.net_connections,
            net_denied: m.net_denied,
        })
        .await?;
        samples.into_iter().next().ok_or_else(|| Error::Other {
            code: Code::Internal,
            message: "airlockd sent no metrics".to_string(),
        })
    }

    /// Everything the session did, oldest first: its lifecycle, each command with its output,
    /// file transfers, egress decisions, secret uses, what agents in it did.
    pub async fn timeline(&self) -> Result<Vec<TimelineEvent>> {
        let request = pb::TimelineRequest { session_id: self.id().to_string(), output_bytes: 0 };
        let responses =
            self.client.channel.server_streaming("/airlock.v1.Sessions/Timeline", &request).await?;
        collect(self, responses, TimelineEvent::from_wire).await
    }
}

/// What an [`Event`] says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The session is now in `state`, for `reason`.
    State,
    /// Command `exec_id` started: `argv`.
    ExecStart,
    /// Command `exec_id` ended: `exit_code`, `reason` (Airlock's).
    ExecExit,
    /// The egress proxy refused `destination`; `reason` says why.
    Denied,
    /// The session's record is gone.
    Removed,
    /// A kind newer than this SDK.
    Unknown,
}

/// Something that happened to a session, as it happened ([`Client::watch`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub time: SystemTime,
    pub session_id: String,
    /// With [`EventKind::State`].
    pub state: Option<SessionState>,
    pub reason: String,
    pub exec_id: u64,
    pub argv: Vec<Bytes>,
    pub exit_code: i32,
    /// "name:port", "address:port", or a DNS name.
    pub destination: String,
    /// Events this watcher lost just before this one (it fell more than 1024 behind).
    pub lost: u64,
    /// In a fleet, the other host that has the session ("": airlockd's own host).
    pub host: String,
}

/// A stream of [`Event`]s ([`Client::watch`]); dropping it ends the watch.
pub struct Watcher {
    responses: Responses<pb::SessionEvent>,
}

impl Watcher {
    /// The next event, waiting for it; `None` if airlockd ended the watch.
    pub async fn recv(&mut self) -> Result<Option<Event>> {
        let e = match self.responses.message().await? {
            Some(e) => e,
            None => return Ok(None),
        };
        use pb::session_event::Kind;
        let kind = match Kind::from_i32(e.kind) {
            Some(Kind::State) => EventKind::State,
            Some(Kind::ExecStart) => EventKind::ExecStart,
            Some(Kind::ExecExit) => EventKind::ExecExit,
            Some(Kind::Denied) => EventKind::Denied,
            Some(Kind::Removed) => EventKind::Removed,
            _ => EventKind::Unknown,
        };
        Ok(Some(Event {
            kind,
            time: time_ms(e.unix_ms),
            session_id: e.session_id,
            state: if kind == EventKind::State { Some(SessionState::from_wire(e.state)) } else { None },
            reason: e.reason,
            exec_id: e.exec_id,
            argv: e.argv,
            exit_code: e.exit_code,
            destination: e.destination,
            lost: e.lost,
            host: e.host,
        }))
    }
}

impl Client {
    /// What happens to the caller's sessions (or to one, with `session_id`) from now on, as it
    /// happens: state changes, commands starting and ending, egress denials, removals.
    pub async fn watch(&self, session_id: Option<&str>) -> Result<Watcher> {
        let request =
            pb::WatchRequest { session_id: session_id.unwrap_or("").to_string(), all_tenants: false };
        let responses = self.channel.server_streaming("/airlock.v1.Sessions/Watch", &request).await?;
        Ok(Watcher { responses })
    }
}
