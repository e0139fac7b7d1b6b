#include "src/daemon/activity_log.h"

#include <algorithm>
#include <utility>

namespace airlock {
namespace {

// argv as stored: each argument followed by a NUL.
std::string JoinArgv(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    out += a;
    out.push_back('\0');
  }
  return out;
}

std::vector<std::string> SplitArgv(const std::string& stored) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < stored.size()) {
    size_t end = stored.find('\0', start);
    if (end == std::string::npos) end = stored.size();
    out.push_back(stored.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

constexpr char kColumns[] =
    "SELECT seq, unix_ms, kind, exec_id, pid, parent, code, process, path, target, argv, size "
    "FROM activity WHERE session_id = ? AND tenant = ?";

ActivityEvent Row(Stmt& q, int64_t* size) {
  ActivityEvent e;
  e.seq = q.Int(0);
  e.record.unix_ms = q.Int(1);
  e.record.kind = static_cast<ActivityKind>(std::clamp<int64_t>(q.Int(2), 0, kMaxActivityKind));
  e.record.exec_id = static_cast<uint64_t>(q.Int(3));
  e.record.pid = static_cast<uint32_t>(q.Int(4));
  e.record.parent = static_cast<uint32_t>(q.Int(5));
  e.record.code = static_cast<int32_t>(q.Int(6));
  e.record.process = q.Text(7);
  e.record.path = q.Text(8);
  e.record.target = q.Text(9);
  e.record.argv = SplitArgv(q.Text(10));
  *size = q.Int(11);
  return e;
}

}  // namespace

int64_t ActivityLog::RowBytes(const ActivityRecord& r) {
  int64_t bytes = 64;  // the fixed fields and the row's own keeping
  for (const std::string* s : {&r.process, &r.path, &r.target}) bytes += s->size();
  for (const std::string& a : r.argv) bytes += a.size() + 1;
  return bytes;
}

absl::Status ActivityLog::Append(const SessionRecord& s,
                                 const std::vector<ActivityRecord>& records) {
  if (records.empty()) return absl::OkStatus();
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  int64_t bytes = 0;
  for (const ActivityRecord& r : records) {
    Stmt q(db,
           "INSERT INTO activity(session_id, tenant, unix_ms, kind, exec_id, pid, parent, code, "
           "process, path, target, argv, size) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)");
    q.Bind(1, s.id).Bind(2, s.tenant).Bind(3, r.unix_ms);
    q.Bind(4, static_cast<int64_t>(r.kind)).Bind(5, static_cast<int64_t>(r.exec_id));
    q.Bind(6, static_cast<int64_t>(r.pid)).Bind(7, static_cast<int64_t>(r.parent));
    q.Bind(8, static_cast<int64_t>(r.code)).BindBlob(9, r.process).BindBlob(10, r.path);
    q.BindBlob(11, r.target).BindBlob(12, JoinArgv(r.argv)).Bind(13, RowBytes(r)).Step();
    if (!q.ok()) return q.status();
    bytes += RowBytes(r);
  }
  Stmt usage(db,
             "INSERT INTO activity_usage(session_id, tenant, rows, bytes, dropped) "
             "VALUES(?1, ?2, ?3, ?4, 0) ON CONFLICT(session_id) DO UPDATE SET "
             "rows = rows + ?3, bytes = bytes + ?4 RETURNING rows, bytes");
  usage.Bind(1, s.id).Bind(2, s.tenant).Bind(3, static_cast<int64_t>(records.size()));
  usage.Bind(4, bytes);
  if (!usage.Step()) return usage.ok() ? absl::InternalError("no activity usage") : usage.status();
  int64_t rows = usage.Int(0), held = usage.Int(1);
  while (usage.Step()) {
  }
  // Past a cap by a tenth (so that trimming, which walks the session's rows, is rare): the
  // oldest records after the first kFirstActivityKept go, down to the caps.
  if (rows > kMaxActivityPerSession + kMaxActivityPerSession / 10 ||
      held > kMaxActivityBytesPerSession + kMaxActivityBytesPerSession / 10) {
    if (absl::Status st = Trim(db, s, std::max<int64_t>(0, rows - kMaxActivityPerSession),
                               std::max<int64_t>(0, held - kMaxActivityBytesPerSession));
        !st.ok()) {
      return st;
    }
  }
  return tx.Commit();
}

absl::Status ActivityLog::Trim(SqliteDb::Locked& db, const SessionRecord& s, int64_t rows,
                               int64_t bytes) {
  // The last of the first records kept: kFirstActivityKept of them, or a quarter of the bytes.
  Stmt first(db,
             "SELECT seq FROM (SELECT seq, COUNT(*) OVER w AS n, SUM(size) OVER w AS c FROM "
             "activity WHERE session_id = ?1 WINDOW w AS (ORDER BY seq)) WHERE n >= ?2 OR "
             "c >= ?3 ORDER BY seq LIMIT 1");
  first.Bind(1, s.id).Bind(2, kFirstActivityKept).Bind(3, kMaxActivityBytesPerSession / 4);
  int64_t kept = first.Step() ? first.Int(0) : -1;
  if (!first.ok()) return first.status();
  while (first.Step()) {
  }
  if (kept < 0) return absl::OkStatus();  // only first records: nothing may go
  // The first row after them at which enough rows and bytes would be gone.
  Stmt cut(db,
           "SELECT seq, n, c FROM (SELECT seq, COUNT(*) OVER w AS n, SUM(size) OVER w AS c "
           "FROM activity WHERE session_id = ?1 AND seq > ?2 WINDOW w AS (ORDER BY seq)) "
           "WHERE (n >= ?3 AND c >= ?4) OR seq = (SELECT MAX(seq) FROM activity WHERE "
           "session_id = ?1) ORDER BY seq LIMIT 1");
  cut.Bind(1, s.id).Bind(2, kept).Bind(3, rows).Bind(4, bytes);
  if (!cut.Step()) return cut.status();
  int64_t last = cut.Int(0), count = cut.Int(1), freed = cut.Int(2);
  while (cut.Step()) {
  }
  Stmt trim(db, "DELETE FROM activity WHERE session_id = ? AND seq > ? AND seq <= ?");
  trim.Bind(1, s.id).Bind(2, kept).Bind(3, last).Step();
  if (!trim.ok()) return trim.status();
  Stmt usage(db,
             "UPDATE activity_usage SET rows = rows - ?2, bytes = bytes - ?3, "
             "dropped = dropped + ?2 WHERE session_id = ?1");
  usage.Bind(1, s.id).Bind(2, count).Bind(3, freed).Step();
  return usage.status();
}

absl::StatusOr<std::vector<ActivityEvent>> ActivityLog::Read(const std::string& tenant,
                                                             const std::string& id, int64_t limit,
                                                             int64_t max_bytes) {
  SqliteDb::Locked db(db_);
  // The first records, with at most half the bytes; then the newest, with the rest.
  int64_t first_count = std::min(limit, kFirstActivityKept), bytes = 0, size = 0;
  std::vector<ActivityEvent> out;
  Stmt first(db, std::string(kColumns) + " ORDER BY seq LIMIT ?");
  first.Bind(1, id).Bind(2, tenant).Bind(3, first_count);
  bool full = false;  // the first records took their half of the bytes
  while (first.Step()) {
    out.push_back(Row(first, &size));
    if ((bytes += size) > max_bytes / 2) {
      full = true;
      break;
    }
  }
  if (!first.ok()) return first.status();
  while (first.Step()) {
  }
  if (out.empty() || (!full && static_cast<int64_t>(out.size()) < first_count) ||
      limit <= static_cast<int64_t>(out.size())) {
    return out;
  }
  int64_t after = out.back().seq;
  std::vector<ActivityEvent> newest;
  Stmt last(db, std::string(kColumns) + " AND seq > ? ORDER BY seq DESC LIMIT ?");
  last.Bind(1, id).Bind(2, tenant).Bind(3, after).Bind(4, limit - static_cast<int64_t>(out.size()));
  while (last.Step()) {
    newest.push_back(Row(last, &size));
    if ((bytes += size) > max_bytes) break;
  }
  if (!last.ok()) return last.status();
  out.insert(out.end(), newest.rbegin(), newest.rend());
  return out;
}

absl::StatusOr<ActivityLog::Usage> ActivityLog::UsageOf(const std::string& tenant,
                                                        const std::string& id) {
  SqliteDb::Locked db(db_);
  Stmt q(db, "SELECT rows, bytes, dropped FROM activity_usage WHERE session_id = ? AND tenant = ?");
  q.Bind(1, id).Bind(2, tenant);
  Usage u;
  if (q.Step()) u = {.rows = q.Int(0), .bytes = q.Int(1), .dropped = q.Int(2)};
  if (!q.ok()) return q.status();
  while (q.Step()) {
  }
  return u;
}

}  // namespace airlock
