package airlock

import (
	"bytes"
	"context"
	"io"
	"time"

	"airlock.dev/sdk/airlockv1"
)

// Workspace is the project a session was made with: `airlock session create --workspace DIR`
// (or `airlock agent`) captures a directory of the host, and the session sees it at /workspace
// over a read-only base. What the session did comes back as a diff or as a git bundle, never by
// writing to the host's project. The SDK does not capture projects itself: make the session with
// the CLI and work on it here by its id (Sessions.Get). A session without a workspace answers
// ErrNotFound or ErrFailedPrecondition.
type Workspace struct{ s *Session }

// WorkspaceBase is where a session's workspace came from.
type WorkspaceBase struct {
	Path       string // the project directory on the client's host
	Head       string // its HEAD commit (git projects), else ""
	Branch     string // its current branch then ("main"); "" when detached
	TreeDigest string // "sha256:..." of its manifest
	Files      uint64
	Bytes      uint64 // of file content
}

// WorkspaceEntry is a file or symlink of a workspace's base. Paths and targets are the bytes
// the project has, which need not be UTF-8.
type WorkspaceEntry struct {
	Path   string // relative: "src/main.c"
	Mode   uint32 // st_mode: the type (regular file or symlink) and the permission bits
	Size   uint64
	SHA256 string // regular files: hex
	Target string // symlinks
}

// WorkspaceInfo is a session's workspace: its base and, when asked for, the base's manifest.
type WorkspaceInfo struct {
	Base    WorkspaceBase
	Entries []WorkspaceEntry // with Info's entries
	Synced  time.Time        // when `airlock sync` last advanced the base; zero: never
	// The paths sync wrote into the session (their base is their entry).
	SyncedPaths []string
}

func baseOf(b *airlockv1.WorkspaceBase) WorkspaceBase {
	if b == nil {
		return WorkspaceBase{}
	}
	return WorkspaceBase{Path: b.Path, Head: b.Head, Branch: b.Branch, TreeDigest: b.TreeDigest,
		Files: b.Files, Bytes: b.Bytes}
}

// Info returns where the session's workspace came from, and with entries its base's manifest.
func (w *Workspace) Info(ctx context.Context, entries bool) (WorkspaceInfo, error) {
	r, err := w.s.c.work.Get(ctx, &airlockv1.GetWorkspaceRequest{SessionId: w.s.ID(), Entries: entries})
	if err != nil {
		return WorkspaceInfo{}, w.s.explain(ctx, err)
	}
	out := WorkspaceInfo{Base: baseOf(r.Base), Synced: unixMs(r.SyncedUnixMs)}
	for _, e := range r.Entries {
		out.Entries = append(out.Entries, WorkspaceEntry{Path: string(e.Path), Mode: e.Mode,
			Size: e.Size, SHA256: e.Sha256, Target: string(e.Target)})
	}
	for _, p := range r.Synced {
		out.SyncedPaths = append(out.SyncedPaths, string(p))
	}
	return out, nil
}

// WorkspaceChange is what the session did to one path of /workspace against its base. Modes
// are st_mode (0: absent on that side); targets are symlinks'. A side's content is there
// (non-nil, perhaps empty) unless it is binary, too large (over 1 MiB), omitted (the diff's
// budget for content ran out) or absent. Everything here came from the guest: treat it as
// untrusted text.
type WorkspaceChange struct {
	Kind                      string // "added", "modified" or "deleted"
	Path                      string // relative: "src/main.c"
	OldMode, NewMode          uint32
	OldSize, NewSize          uint64
	OldTarget, NewTarget      string
	Binary, TooLarge, Omitted bool
	OldContent, NewContent    []byte
}

var changeKinds = map[airlockv1.WorkspaceChange_Kind]string{
	airlockv1.WorkspaceChange_KIND_ADDED:    "added",
	airlockv1.WorkspaceChange_KIND_MODIFIED: "modified",
	airlockv1.WorkspaceChange_KIND_DELETED:  "deleted",
}

// content keeps a side that was shown apart from one that was not, even when it is empty.
func content(has bool, data []byte) []byte {
	if !has {
		return nil
	}
	if data == nil {
		return []byte{}
	}
	return data
}

// Diff returns what the session changed in /workspace against its base, path by path, sorted
// (`airlock diff`).
func (w *Workspace) Diff(ctx context.Context) ([]WorkspaceChange, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := w.s.c.work.Diff(ctx, &airlockv1.WorkspaceDiffRequest{SessionId: w.s.ID()})
	if err != nil {
		return nil, w.s.explain(ctx, err)
	}
	var out []WorkspaceChange
	for {
		c, err := stream.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, w.s.explain(ctx, err)
		}
		kind, ok := changeKinds[c.Kind]
		if !ok {
			kind = "unknown"
		}
		out = append(out, WorkspaceChange{Kind: kind, Path: string(c.Path), OldMode: c.OldMode,
			NewMode: c.NewMode, OldSize: c.OldSize, NewSize: c.NewSize,
			OldTarget: string(c.OldTarget), NewTarget: string(c.NewTarget), Binary: c.Binary,
			TooLarge: c.TooLarge, Omitted: c.Omitted,
			OldContent: content(c.HasOldContent, c.OldContent),
			NewContent: content(c.HasNewContent, c.NewContent)})
	}
}

// BundleOptions are a bundle's settings; nil is all defaults.
type BundleOptions struct {
	// Commit what is not committed yet (tracked changes and untracked files that are not
	// ignored) on top of the session's HEAD, in the bundle only (the session's branch stays).
	IncludeUncommitted bool
	DryRun             bool   // only the BundleInfo: the commits and the uncommitted work
	Branch             string // the branch you will make of it, for the audit record
}

// BundleInfo describes a session's new commits since its workspace's base. The log, stat and
// diff come from the guest: treat them as untrusted text.
type BundleInfo struct {
	BaseCommit      string // the commit the session started from
	HeadCommit      string // the bundle's tip
	Branch          string // the session's current branch ("main"; "HEAD" when detached)
	Ref             string // the one ref the bundle holds
	Commits         int    // new commits since the base, uncommitted work included
	Log             string // `git log --stat` of those commits
	UncommittedStat string // `git diff --stat` of the work not committed
	UncommittedDiff string // with DryRun: that work as a diff
}

// WorkspaceBundle is a session's new commits as a git bundle (Workspace.Bundle).
type WorkspaceBundle struct {
	Info BundleInfo
	Data []byte // the bundle (`git fetch` it, after `git bundle verify`); nil with DryRun
}

// Bundle returns the session's new commits since its base as a git bundle, made by git in the
// guest (`airlock promote` fetches it into a review branch after host git has verified it).
func (w *Workspace) Bundle(ctx context.Context, o *BundleOptions) (*WorkspaceBundle, error) {
	var data bytes.Buffer
	info, _, err := w.BundleTo(ctx, &data, o)
	if err != nil {
		return nil, err
	}
	out := &WorkspaceBundle{Info: info}
	if o == nil || !o.DryRun {
		out.Data = data.Bytes()
	}
	return out, nil
}

// BundleTo is Bundle for bundles too large to hold: it copies the bundle to dst as the guest
// makes it and returns its info and the bytes copied. An error of dst cancels the call and is
// returned.
func (w *Workspace) BundleTo(ctx context.Context, dst io.Writer, o *BundleOptions) (BundleInfo, int64, error) {
	if o == nil {
		o = &BundleOptions{}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := w.s.c.work.Bundle(ctx, &airlockv1.WorkspaceBundleRequest{SessionId: w.s.ID(),
		IncludeUncommitted: o.IncludeUncommitted, DryRun: o.DryRun, Branch: o.Branch})
	if err != nil {
		return BundleInfo{}, 0, w.s.explain(ctx, err)
	}
	first, err := stream.Recv()
	if err == io.EOF || (err == nil && first.Info == nil) {
		return BundleInfo{}, 0, &Error{Kind: ErrUnavailable,
			Message: "airlockd answered without describing the bundle"}
	}
	if err != nil {
		return BundleInfo{}, 0, w.s.explain(ctx, err)
	}
	i := first.Info
	info := BundleInfo{BaseCommit: i.BaseCommit, HeadCommit: i.HeadCommit, Branch: i.Branch,
		Ref: i.Ref, Commits: int(i.Commits), Log: i.Log, UncommittedStat: i.UncommittedStat,
		UncommittedDiff: i.UncommittedDiff}
	var total int64
	for chunk := first; ; {
		n, werr := dst.Write(chunk.Data)
		total += int64(n)
		if werr != nil {
			return info, total, werr
		}
		chunk, err = stream.Recv()
		if err == io.EOF {
			return info, total, nil
		}
		if err != nil {
			return info, total, w.s.explain(ctx, err)
		}
	}
}
