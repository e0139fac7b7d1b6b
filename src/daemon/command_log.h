// What ran in a session: its commands (execs), their output (bounded per session like a ring,
// and per tenant by its logs quota), and what coding agents in it said and did (from their
// transcripts). The timeline and `airlock logs` read it; starting a command is audited in the
// same transaction, and starts and ends are published to watchers.
#ifndef AIRLOCK_DAEMON_COMMAND_LOG_H_
#define AIRLOCK_DAEMON_COMMAND_LOG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/daemon/records.h"
#include "src/daemon/sqlite_db.h"

namespace airlock {

class SessionEventHub;

class CommandLog {
 public:
  // log_cap_bytes: what one session's output may take before its oldest entries go.
  CommandLog(SqliteDb& db, uint64_t log_cap_bytes) : db_(db), log_cap_bytes_(log_cap_bytes) {}
  // What a tenant's sessions may store in all (its logs quota); unset: no cap beyond each
  // session's own. Call before the store is shared.
  void set_tenant_log_cap(std::function<uint64_t(const std::string&)> cap) {
    tenant_log_cap_ = std::move(cap);
  }
  void set_events(SessionEventHub* events) { events_ = events; }

  // Records the start of a command (e: argv, user, cwd, tty), audited; returns its exec id.
  [[nodiscard]] absl::StatusOr<int64_t> Start(const Principal& who, const SessionRecord& s,
                                              const ExecRecord& e);
  // Records its end, with the output it left unstored (its exit line): one transaction, one
  // fsync, before the end is acknowledged.
  [[nodiscard]] absl::Status End(const SessionRecord& s, int64_t exec_id, int exit_code,
                                 const std::string& message,
                                 const std::vector<LogRecord>& last_output = {});
  // A session's commands, oldest first (at most kMaxTimelineRows).
  [[nodiscard]] absl::StatusOr<std::vector<ExecRecord>> Read(const std::string& tenant,
                                                             const std::string& id);
  // Each command's stored output by exec id, keeping its first keep_bytes.
  [[nodiscard]] absl::StatusOr<std::map<int64_t, ExecOutput>> Outputs(const std::string& tenant,
                                                                      const std::string& id,
                                                                      size_t keep_bytes);

  // Appends output; the oldest entries of the session are dropped beyond the log cap, and the
  // oldest of the tenant's beyond its cap.
  [[nodiscard]] absl::Status AppendOutput(const SessionRecord& s,
                                          const std::vector<LogRecord>& logs);
  // Entries after after_seq (and at or after since_ms); with tail > 0 only the last `tail`.
  [[nodiscard]] absl::StatusOr<std::vector<LogRecord>> ReadOutput(const std::string& tenant,
                                                                  const std::string& id,
                                                                  int64_t after_seq,
                                                                  int64_t since_ms, uint32_t tail);
  // Output stored for a tenant's sessions in all, removed ones included.
  [[nodiscard]] absl::StatusOr<uint64_t> OutputBytes(const std::string& tenant);

  // Events from agents' transcripts; at most kMaxAgentEventsPerSession, oldest dropped.
  [[nodiscard]] absl::Status AppendAgentEvents(const SessionRecord& s,
                                               const std::vector<AgentEvent>& events);
  [[nodiscard]] absl::StatusOr<std::vector<AgentEvent>> ReadAgentEvents(const std::string& tenant,
                                                                        const std::string& id);

  static constexpr int64_t kMaxAgentEventsPerSession = 20000;
  // Rows of each kind one timeline reads at most.
  static constexpr int64_t kMaxTimelineRows = 50000;

 private:
  // AppendOutput's work, inside the caller's transaction.
  absl::Status AddOutput(SqliteDb::Locked& db, const SessionRecord& s,
                         const std::vector<LogRecord>& logs);

  SqliteDb& db_;
  uint64_t log_cap_bytes_;
  std::function<uint64_t(const std::string&)> tenant_log_cap_;
  SessionEventHub* events_ = nullptr;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_COMMAND_LOG_H_
