// A session's activity record as the host keeps it: what the guest's PID 1 saw its programs do
// (src/guest/activity_recorder.h), stored as it arrives so that it outlives the VM, the guest's
// own files and the session's removal (it goes when the session's record is deleted).
// Bounded per session, in records and in bytes: the first kFirstActivityKept records stay (what
// was done first is the evidence) besides the newest; the ones between go, and are counted.
#ifndef AIRLOCK_DAEMON_ACTIVITY_LOG_H_
#define AIRLOCK_DAEMON_ACTIVITY_LOG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/common/channel_messages.h"
#include "src/daemon/records.h"
#include "src/daemon/sqlite_db.h"

namespace airlock {

struct ActivityEvent {
  int64_t seq = 0;
  ActivityRecord record;  // unix_ms: when it happened, as the host could check it
};

class ActivityLog {
 public:
  explicit ActivityLog(SqliteDb& db) : db_(db) {}

  [[nodiscard]] absl::Status Append(const SessionRecord& s,
                                    const std::vector<ActivityRecord>& records);
  // The session's records, oldest first: the first kFirstActivityKept and then the newest, at
  // most `limit` records and about max_bytes (RowBytes) in all.
  [[nodiscard]] absl::StatusOr<std::vector<ActivityEvent>> Read(const std::string& tenant,
                                                                const std::string& id,
                                                                int64_t limit, int64_t max_bytes);
  struct Usage {
    int64_t rows = 0;
    int64_t bytes = 0;
    int64_t dropped = 0;  // records the caps dropped
  };
  [[nodiscard]] absl::StatusOr<Usage> UsageOf(const std::string& tenant, const std::string& id);

  // What a record counts against its session's cap.
  static int64_t RowBytes(const ActivityRecord& r);

  // A session keeps at most this many records and bytes (past either by a tenth, the oldest
  // after the first kFirstActivityKept, or the first quarter of the bytes, go, down to both).
  static constexpr int64_t kMaxActivityPerSession = 100000;
  static constexpr int64_t kMaxActivityBytesPerSession = 32 << 20;
  static constexpr int64_t kFirstActivityKept = 10000;

 private:
  // Drops the oldest records after the first ones until `rows` and `bytes` are gone.
  absl::Status Trim(SqliteDb::Locked& db, const SessionRecord& s, int64_t rows, int64_t bytes);

  SqliteDb& db_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_ACTIVITY_LOG_H_
