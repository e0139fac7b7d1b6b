// The egress proxy's decisions for each session (net_events): denied and allowed ones kept
// apart, at most half of kMaxNetEventsPerSession each, the first kFirstNetEventsKept of each and
// the newest; a denial seen again only counted. Denials are published to watchers.
#ifndef AIRLOCK_DAEMON_NET_EVENT_LOG_H_
#define AIRLOCK_DAEMON_NET_EVENT_LOG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/daemon/records.h"
#include "src/daemon/sqlite_db.h"
#include "src/net/net_event.h"

namespace airlock {

class SessionEventHub;

class NetEventLog {
 public:
  explicit NetEventLog(SqliteDb& db) : db_(db) {}
  void set_events(SessionEventHub* events) { events_ = events; }

  [[nodiscard]] absl::Status Append(const SessionRecord& s,
                                    const std::vector<net::NetEvent>& events);
  // Events after after_seq; with tail > 0 only the last `tail`.
  [[nodiscard]] absl::StatusOr<std::vector<net::NetEvent>> Read(const std::string& tenant,
                                                                const std::string& id,
                                                                int64_t after_seq, uint32_t tail);
  // When each secret of a session was last sent, by name.
  [[nodiscard]] absl::StatusOr<std::map<std::string, int64_t>> LastSecretUses(
      const std::string& tenant, const std::string& id);

  static constexpr int64_t kMaxNetEventsPerSession = 10000;
  static constexpr int64_t kFirstNetEventsKept = 1000;

 private:
  SqliteDb& db_;
  SessionEventHub* events_ = nullptr;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_NET_EVENT_LOG_H_
