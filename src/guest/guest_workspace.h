// The session's workspace inside the guest: a project captured on the host arrives as a
// read-only ext4 disk (serial airlock-ws) and is mounted as the lower layer of an overlay at
// /workspace whose upper layer lives on the session's writable disk, so that everything the
// session changes is in one place and the base is never written.
//
// Layout: the base at /run/airlock/workspace/base (read-only), the session's changes at
// sessions-disk:/workspace/upper, visible read-only at /run/airlock/workspace/upper for the
// diff helper (the agent's own binary run as a command: `/proc/1/exe workspace-diff`).
#ifndef AIRLOCK_GUEST_GUEST_WORKSPACE_H_
#define AIRLOCK_GUEST_GUEST_WORKSPACE_H_

#include <string>

namespace airlock::guest {

// Serial number of the workspace disk (see src/vm/qemu_driver.cc). Every VM has one: an empty
// disk when the session has no workspace, so that a template serves both kinds.
inline constexpr char kWorkspaceDiskSerial[] = "airlock-ws";

// PID 1, when kSync asks: mounts the workspace unless it is mounted already (a restored or
// forked guest keeps its mounts). session_root is a descriptor of the session disk's root.
// Returns "" or what failed.
std::string MountWorkspace(int session_root);

// `/proc/1/exe workspace-diff`: writes a WorkspaceChange record (src/common/workspace_change.h)
// for every file or symlink that differs between the base and the session, sorted by path,
// skipping the top-level .git, to stdout. Returns the process's exit status.
int WorkspaceDiffMain();

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_GUEST_WORKSPACE_H_
