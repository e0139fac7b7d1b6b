//! A session's workspace: the project it was made with (`airlock session create --workspace
//! DIR`, or `airlock agent`), which lives in the guest at /workspace over a read-only base, and
//! what the session did to it, as a diff or as a git bundle of its commits. Nothing here writes
//! to the host's project: applying the work is the caller's (or `airlock promote`'s) to do.

use std::time::SystemTime;

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::error::{Code, Error, Result};
use crate::observe::collect;
use crate::pb;
use crate::session::{time_ms, Session};

/// Where a session's workspace came from: the project as it was captured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkspaceBase {
    /// The project directory on the host it was captured on.
    pub path: String,
    /// Its HEAD commit then (git projects; "" otherwise).
    pub head: String,
    /// Its branch then ("main"; "" when detached).
    pub branch: String,
    /// "sha256:..." of its manifest.
    pub tree_digest: String,
    pub files: u64,
    /// Bytes of file content.
    pub bytes: u64,
}

impl WorkspaceBase {
    pub(crate) fn from_wire(b: pb::WorkspaceBase) -> WorkspaceBase {
        WorkspaceBase {
            path: b.path,
            head: b.head,
            branch: b.branch,
            tree_digest: b.tree_digest,
            files: b.files,
            bytes: b.bytes,
        }
    }
}

/// A file or symlink of a workspace's base.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceEntry {
    /// Relative to the project: "src/main.c" (bytes: a Unix path need not be UTF-8).
    pub path: Bytes,
    /// `st_mode`: the type (regular file or symlink) and the permission bits.
    pub mode: u32,
    pub size: u64,
    /// Regular files: the content's SHA-256, in hex.
    pub sha256: String,
    /// Symlinks: where it points.
    pub target: Bytes,
}

/// A session's workspace as airlockd keeps it ([`Workspace::info`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceInfo {
    pub session_id: String,
    pub base: WorkspaceBase,
    /// The base's manifest, sorted by path (only when asked for).
    pub entries: Vec<WorkspaceEntry>,
    /// When `airlock sync` last advanced the base; `None`: never.
    pub synced: Option<SystemTime>,
    /// Paths a sync wrote into the session.
    pub synced_paths: Vec<Bytes>,
}

/// What happened to a path ([`WorkspaceChange::kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
    /// A kind newer than this SDK.
    Unknown,
}

impl ChangeKind {
    /// "added", "modified", "deleted" (or "unknown").
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
            ChangeKind::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One path the session changed in /workspace against its base ([`Workspace::diff`]).
/// Everything in it comes from the guest: show it as text, never run it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceChange {
    pub kind: ChangeKind,
    /// Relative to /workspace.
    pub path: Bytes,
    /// `st_mode` in the base and in the session; `None` where the path is absent.
    pub old_mode: Option<u32>,
    pub new_mode: Option<u32>,
    pub old_size: u64,
    pub new_size: u64,
    /// Symlinks: where each side points.
    pub old_target: Bytes,
    pub new_target: Bytes,
    /// A side holds a NUL byte: no content.
    pub binary: bool,
    /// A side is over 1 MiB: no content.
    pub too_large: bool,
    /// The diff's budget for content ran out: no content.
    pub omitted: bool,
    /// Each side's content, when airlockd sent it.
    pub old_content: Option<Bytes>,
    pub new_content: Option<Bytes>,
}

impl WorkspaceChange {
    fn from_wire(c: pb::WorkspaceChange) -> WorkspaceChange {
        use pb::workspace_change::Kind;
        let mode = |m: u32| if m == 0 { None } else { Some(m) };
        WorkspaceChange {
            kind: match Kind::from_i32(c.kind) {
                Some(Kind::Added) => ChangeKind::Added,
                Some(Kind::Modified) => ChangeKind::Modified,
                Some(Kind::Deleted) => ChangeKind::Deleted,
                None => ChangeKind::Unknown,
            },
            path: c.path,
            old_mode: mode(c.old_mode),
            new_mode: mode(c.new_mode),
            old_size: c.old_size,
            new_size: c.new_size,
            old_target: c.old_target,
            new_target: c.new_target,
            binary: c.binary,
            too_large: c.too_large,
            omitted: c.omitted,
            old_content: if c.has_old_content { Some(c.old_content) } else { None },
            new_content: if c.has_new_content { Some(c.new_content) } else { None },
        }
    }
}

/// What [`Workspace::bundle`] makes.
#[derive(Clone, Debug, Default)]
pub struct BundleOptions {
    /// Also commit what is not committed yet (tracked changes, and untracked files that are
    /// not ignored) on top of the session's HEAD, in the bundle only: the session's branch
    /// stays as it is.
    pub include_uncommitted: bool,
    /// Only the [`BundleInfo`]: no bundle is made (and the uncommitted work comes as a diff).
    pub dry_run: bool,
    /// The branch the caller will make of it, for the audit record.
    pub branch: String,
}

/// The commits a bundle holds. `log`, `uncommitted_stat` and `uncommitted_diff` are the
/// guest's output: show them as text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BundleInfo {
    /// The commit the session started from.
    pub base_commit: String,
    /// The bundle's tip.
    pub head_commit: String,
    /// The session's branch ("main"; "HEAD" when detached).
    pub branch: String,
    /// The one ref the bundle holds.
    pub ref_name: String,
    /// New commits since the base, uncommitted work included.
    pub commits: u32,
    /// `git log --stat` of those commits.
    pub log: String,
    /// `git diff --stat` of the work not committed.
    pub uncommitted_stat: String,
    /// With `dry_run`: that work as a diff.
    pub uncommitted_diff: String,
}

/// A session's new commits as a git bundle (`git fetch BUNDLE REF` takes them into a clone
/// of the project).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bundle {
    pub info: BundleInfo,
    /// The bundle itself ("# v2 git bundle" ...); empty for a dry run.
    pub data: Vec<u8>,
}

/// A session's workspace ([`Session::workspace`]). A session made without one answers
/// [`Error::FailedPrecondition`].
pub struct Workspace<'a> {
    session: &'a Session,
}

impl Session {
    /// The session's workspace: its base, what the session changed there, its commits.
    pub fn workspace(&self) -> Workspace<'_> {
        Workspace { session: self }
    }
}

impl Workspace<'_> {
    /// Where the workspace came from, and with `entries` the base's manifest too.
    pub async fn info(&self, entries: bool) -> Result<WorkspaceInfo> {
        let request = pb::GetWorkspaceRequest { session_id: self.session.id().to_string(), entries };
        let info: pb::WorkspaceInfo = self.session.call("/airlock.v1.Workspaces/Get", &request).await?;
        Ok(WorkspaceInfo {
            session_id: info.session_id,
            base: WorkspaceBase::from_wire(info.base.unwrap_or_default()),
            entries: info
                .entries
                .into_iter()
                .map(|e| WorkspaceEntry {
                    path: e.path,
                    mode: e.mode,
                    size: e.size,
                    sha256: e.sha256,
                    target: e.target,
                })
                .collect(),
            synced: if info.synced_unix_ms == 0 { None } else { Some(time_ms(info.synced_unix_ms)) },
            synced_paths: info.synced,
        })
    }

    /// What the session changed in /workspace against its base, path by path (sorted); the
    /// guest's .git is not part of it.
    pub async fn diff(&self) -> Result<Vec<WorkspaceChange>> {
        let request = pb::WorkspaceDiffRequest { session_id: self.session.id().to_string() };
        let responses =
            match self.session.client.channel.server_streaming("/airlock.v1.Workspaces/Diff", &request).await
            {
                Ok(r) => r,
                Err(status) => return Err(self.session.explain(status.into()).await),
            };
        collect(self.session, responses, WorkspaceChange::from_wire).await
    }

    /// The session's new commits since its base as a git bundle, held in memory; see
    /// [`bundle_to`](Workspace::bundle_to) for large ones.
    pub async fn bundle(&self, options: &BundleOptions) -> Result<Bundle> {
        let mut data = Vec::new();
        let info = self.bundle_to(options, &mut data).await?;
        Ok(Bundle { info, data })
    }

    /// [`bundle`](Workspace::bundle), with the bundle written to `writer` as airlockd sends it;
    /// returns what it holds. An error of the writer cancels it ([`Error::Io`]).
    pub async fn bundle_to<W>(&self, options: &BundleOptions, mut writer: W) -> Result<BundleInfo>
    where
        W: AsyncWrite + Unpin,
    {
        let request = pb::WorkspaceBundleRequest {
            session_id: self.session.id().to_string(),
            include_uncommitted: options.include_uncommitted,
            dry_run: options.dry_run,
            branch: options.branch.clone(),
        };
        let mut responses = match self
            .session
            .client
            .channel
            .server_streaming::<_, pb::WorkspaceBundleChunk>("/airlock.v1.Workspaces/Bundle", &request)
            .await
        {
            Ok(r) => r,
            Err(status) => return Err(self.session.explain(status.into()).await),
        };
        let mut info = None;
        loop {
            let chunk = match responses.message().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(status) => return Err(self.session.explain(status.into()).await),
            };
            if let Some(i) = chunk.info {
                info = Some(BundleInfo {
                    base_commit: i.base_commit,
                    head_commit: i.head_commit,
                    branch: i.branch,
                    ref_name: i.r#ref,
                    commits: i.commits,
                    log: i.log,
                    uncommitted_stat: i.uncommitted_stat,
                    uncommitted_diff: i.uncommitted_diff,
                });
            }
            if !chunk.data.is_empty() {
                // Dropping the responses on an error here cancels the call.
                writer.write_all(&chunk.data).await.map_err(Error::Io)?;
            }
        }
        writer.flush().await.map_err(Error::Io)?;
        info.ok_or_else(|| Error::Other {
            code: Code::Internal,
            message: "airlockd ended the bundle without saying what it holds".to_string(),
        })
    }
}
