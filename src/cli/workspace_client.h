// The client side of workspaces: capturing a project and uploading it, rendering a session's
// changes, promoting its commits into the project, and syncing host changes into it. Everything
// that touches the user's project runs here, in the CLI's process, with the user's own rights;
// airlockd only ever sees the captured image and bundles of the session's own work.
#ifndef AIRLOCK_CLI_WORKSPACE_CLIENT_H_
#define AIRLOCK_CLI_WORKSPACE_CLIENT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/airlock/v1/airlock.pb.h"
#include "src/cli/daemon_client.h"

namespace airlock {

// Captures dir (see src/workspace/workspace_capture.h) and streams it to airlockd; returns the
// token that CreateSessionRequest.workspace / ExecStart.workspace name.
[[nodiscard]] absl::StatusOr<std::string> UploadWorkspace(DaemonClient& client,
                                                          const std::string& dir,
                                                          uint64_t max_bytes);

// The changes session `id` made to /workspace, sorted by path.
[[nodiscard]] absl::StatusOr<std::vector<v1::WorkspaceChange>> FetchWorkspaceChanges(
    DaemonClient& client, const std::string& id);

// The changes as a unified diff (like `git diff`), or with stat as `git diff --stat` prints it.
// Binary and large files are summarized. With sanitize (output to a terminal) control
// characters the guest put in names and text are shown as '?'.
std::string RenderWorkspaceDiff(const std::vector<v1::WorkspaceChange>& changes, bool stat,
                                bool sanitize);

// Whether a session's project directory on this host may be read or written for this caller
// (`airlock mcp`'s workspace roots); an error refuses the promote or sync.
using ProjectCheck = std::function<absl::Status(const std::string& project)>;

struct PromoteOptions {
  std::string branch;  // NAME of airlock/<id>/NAME; empty: the session's branch
  bool include_uncommitted = false;
  bool dry_run = false;
  bool sanitize = false;       // output to a terminal
  ProjectCheck check_project;  // null: any project
};

// Brings session `id`'s commits into its project as branch airlock/<id>/<name>, never touching
// the project's working tree, index or current branch; returns what to tell the user.
[[nodiscard]] absl::StatusOr<std::string> PromoteWorkspace(DaemonClient& client,
                                                           const std::string& id,
                                                           const PromoteOptions& options);

// Copies host changes since the base into session `id` where it has not changed the path
// itself; returns the report (copied, conflicts).
[[nodiscard]] absl::StatusOr<std::string> SyncWorkspace(
    DaemonClient& client, const std::string& id, bool dry_run, uint64_t max_bytes,
    const ProjectCheck& check_project = nullptr);

}  // namespace airlock

#endif  // AIRLOCK_CLI_WORKSPACE_CLIENT_H_
