// A session's timeline: everything it did, in time order, from what airlockd already keeps —
// the audit records naming it (lifecycle, file operations, policy and workspace changes), its
// commands with their output, the egress proxy's decisions, agents' transcript events, and the
// guest's activity record (processes and files, each with the command it descends from).
// Nothing here is stored twice; the timeline is assembled when asked for.
#ifndef AIRLOCK_DAEMON_TIMELINE_H_
#define AIRLOCK_DAEMON_TIMELINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/airlock/v1/airlock.pb.h"
#include "src/daemon/state_store.h"

namespace airlock {

// Output kept per command when the request names no amount, and the most it may name.
inline constexpr size_t kTimelineOutputBytes = 64 << 10;
inline constexpr size_t kTimelineMaxOutputBytes = 1 << 20;
// Activity records in one timeline: the session's first ones and its newest, at most this many
// and about this many bytes.
inline constexpr int64_t kTimelineActivityRows = 50000;
inline constexpr int64_t kTimelineActivityBytes = 16 << 20;
// Agent texts (messages, tool inputs and results) are cut here when they are stored.
inline constexpr size_t kAgentTextBytes = 16 << 10;

// The timeline of a session of `tenant` (NOT_FOUND if it has none). output_bytes: of each
// command's output, how much to include (0: kTimelineOutputBytes).
[[nodiscard]] absl::StatusOr<std::vector<v1::TimelineEvent>> BuildTimeline(
    StateStore& store, const std::string& tenant, const std::string& id, size_t output_bytes);

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_TIMELINE_H_
