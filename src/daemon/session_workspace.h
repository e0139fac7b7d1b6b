// What airlockd does inside a session for its workspace (src/guest/guest_workspace.h): list the
// changes against the base, bundle the session's commits, and apply host changes (sync). The
// gRPC service (workspace_service.cc) and tests call these; they run commands in the guest with
// argv arrays and treat everything that comes back as hostile input.
#ifndef AIRLOCK_DAEMON_SESSION_WORKSPACE_H_
#define AIRLOCK_DAEMON_SESSION_WORKSPACE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/airlock/v1/airlock.pb.h"
#include "src/daemon/records.h"
#include "src/vm/guest_channel.h"

namespace airlock {

// Largest bundle a promote brings back.
inline constexpr uint64_t kMaxBundleBytes = 1ull << 30;

struct GuestRun {
  int exit_code = 0;    // 128+N for a signal; -1 if it could not start
  std::string output;   // stdout, unless a sink took it; at most the cap given
  std::string errors;   // stderr, at most 64 KiB
  std::string message;  // why it could not start
};

// Runs a command in the guest as root and waits for it. stdout goes to `sink` when given (its
// error ends the command), else is collected up to max_output (more is an error).
[[nodiscard]] absl::StatusOr<GuestRun> RunInGuest(
    GuestChannel& channel, const std::vector<std::string>& argv,
    const std::vector<std::string>& env, size_t max_output, absl::Duration timeout,
    const std::function<absl::Status(std::string_view)>& sink = nullptr);

// The changes the session made to /workspace against its base, sorted by path, each checked
// (WorkspaceChangeParser). Paths a sync wrote compare against what it wrote.
[[nodiscard]] absl::Status ListWorkspaceChanges(
    GuestChannel& channel, const v1::WorkspaceInfo& base,
    const std::function<absl::Status(v1::WorkspaceChange)>& emit);

// What a promote would bring back, worked out in the guest: the session's commits since its base
// (and, with include_uncommitted, its uncommitted work as one more commit, made without moving
// the session's branch), their log, and the uncommitted work's stat (and diff with dry_run).
// Unless dry_run, the tip is left at refs/airlock/promote for StreamBundle. FAILED_PRECONDITION
// when there is nothing to promote or the project was not a git repository.
[[nodiscard]] absl::StatusOr<v1::WorkspaceBundleInfo> PrepareBundle(GuestChannel& channel,
                                                                    const SessionRecord& session,
                                                                    bool include_uncommitted,
                                                                    bool dry_run);
// `git bundle create` of what PrepareBundle left, to sink, at most max_bytes; returns the
// bundle's "sha256:..." digest.
[[nodiscard]] absl::StatusOr<std::string> StreamBundle(
    GuestChannel& channel, const SessionRecord& session, const v1::WorkspaceBundleInfo& info,
    const std::function<absl::Status(std::string_view)>& sink,
    uint64_t max_bytes = kMaxBundleBytes);

// Applies a host change to the session's /workspace: a file (content as given), a symlink, or a
// removal, replacing whatever the session has at that path.
struct SyncWrite {
  v1::WorkspaceEntry entry;
  bool removed = false;
  std::string content;
};
[[nodiscard]] absl::Status ApplySyncWrites(GuestChannel& channel,
                                           const std::vector<SyncWrite>& writes);

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_SESSION_WORKSPACE_H_
