//! Airlock's Rust SDK: sessions in microVMs for code you do not trust. Create one, run
//! commands in it (output as it comes, stdin, signals, timeouts), read and write its files,
//! pause it to disk, fork it, and remove it. Async, on tokio.
//!
//! ```no_run
//! use airlock::{Client, ExecEvent, ExecOptions, SessionOptions};
//!
//! # async fn example() -> airlock::Result<()> {
//! let client = Client::connect("").await?; // $AIRLOCK_SOCKET, else /run/airlock/airlockd.sock
//! let options = SessionOptions { memory: "1g".into(), allow: vec!["pypi.org".into()], ..Default::default() };
//! let mut s = client.session(&options).await?; // removed when dropped
//! let r = s.exec(["python3", "-c", "print(6*7)"], &ExecOptions::default()).await?;
//! assert_eq!((r.exit_code, &r.stdout[..]), (0, &b"42\n"[..]));
//! let mut stream = s.exec_stream(["pytest", "-q"], &ExecOptions::default()).await?;
//! while let Some(event) = stream.recv().await? {
//!     if let ExecEvent::Stdout(data) = event { print!("{}", String::from_utf8_lossy(&data)); }
//! }
//! s.files().write("/tmp/x.py", &b"print(1)"[..], 0o644).await?;
//! s.pause().await?; // to disk: no VM, no host memory
//! let kids = s.fork(3).await?; // three copies, each with its own disk
//! # for k in kids { k.remove().await?; }
//! s.remove().await?;
//! # Ok(()) }
//! ```
//!
//! [`Client::connect`] checks first that airlockd serves this SDK's [`API_LEVEL`]
//! ([`Error::VersionMismatch`] says which to upgrade when it does not). A session made with a
//! project (`airlock session create --workspace DIR`) shows what it changed there and hands
//! back its commits through [`Session::workspace`].
//!
//! Every call is a future: dropping it (`tokio::time::timeout`, `select!`) abandons the call,
//! and dropping a command's [`ExecStream`] ends the command. Errors are [`Error`] values whose
//! variants are the kinds the other SDKs have ([`Error::NotFound`],
//! [`Error::SessionFailed`], ...). No type of the wire protocol appears in this API.

mod access;
mod client;
mod error;
mod exec;
mod files;
mod grpc;
mod observe;
mod resources;
mod session;
mod workspace;

#[allow(clippy::all, dead_code)]
mod pb {
    include!(concat!(env!("OUT_DIR"), "/airlock.v1.rs"));
}

pub use access::{Audit, AuditRecord, AuditVerification, Exposure, Forward, Ports, SecretInfo, Secrets};
pub use client::{Client, Tls, Version, API_LEVEL, DEFAULT_SOCKET};
pub use error::{Code, Error, Result};
pub use exec::{ExecEvent, ExecInput, ExecOptions, ExecResult, ExecStream, Exit};
pub use files::{FileStream, Files};
pub use observe::{
    Event, EventKind, LogEntry, LogStream, Metrics, Network, NetworkChange, NetworkRule, TimelineEvent,
    Watcher,
};
pub use resources::{DockerfileBuild, Image, ImageBuild, Quota, QuotaItem, RemovedImage, Vm, Volume};
pub use session::{
    parse_size, Limits, Session, SessionGuard, SessionInfo, SessionOptions, SessionState, VolumeMount,
};
pub use workspace::{
    Bundle, BundleInfo, BundleOptions, ChangeKind, Workspace, WorkspaceBase, WorkspaceChange, WorkspaceEntry,
    WorkspaceInfo,
};
