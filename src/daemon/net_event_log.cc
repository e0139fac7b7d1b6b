#include "src/daemon/net_event_log.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/daemon/session_events.h"

namespace airlock {

absl::Status NetEventLog::Append(const SessionRecord& s, const std::vector<net::NetEvent>& events) {
  if (events.empty()) return absl::OkStatus();
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  for (const net::NetEvent& e : events) {
    if (!e.allowed) {
      Stmt again(db,
                 "UPDATE net_events SET repeats = repeats + 1, last_ms = ? WHERE session_id = ? "
                 "AND allowed = 0 AND name = ? AND port = ? AND kind = ? AND address = ? AND "
                 "reason = ?");
      again.Bind(1, e.unix_ms).Bind(2, s.id).Bind(3, e.name).Bind(4, static_cast<int64_t>(e.port));
      again.Bind(5, e.kind).Bind(6, e.address).Bind(7, e.reason).Step();
      if (!again.ok()) return again.status();
      if (db.changes() > 0) continue;
    }
    Stmt q(db,
           "INSERT INTO net_events(session_id, tenant, unix_ms, kind, name, address, port, "
           "allowed, rule, reason, bytes_out, bytes_in) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)");
    q.Bind(1, s.id).Bind(2, s.tenant).Bind(3, e.unix_ms).Bind(4, e.kind).Bind(5, e.name);
    q.Bind(6, e.address).Bind(7, static_cast<int64_t>(e.port)).Bind(8, e.allowed ? 1 : 0);
    q.Bind(9, e.rule).Bind(10, e.reason).Bind(11, static_cast<int64_t>(e.bytes_out));
    q.Bind(12, static_cast<int64_t>(e.bytes_in)).Step();
    if (!q.ok()) return q.status();
  }
  // Bounded per session, denials and allowed connections each on their own: a guest's flood of
  // cheap denied names never pushes out its allowed connections, and of each kind the first
  // kFirstNetEventsKept stay (what it tried first is the evidence) besides the newest; the
  // ones between go. A denial seen before is only counted, on its first row.
  for (int allowed : {0, 1}) {
    Stmt trim(db,
              "DELETE FROM net_events WHERE session_id = ?1 AND allowed = ?2 "
              "AND seq > COALESCE((SELECT seq FROM net_events WHERE session_id = ?1 AND "
              "allowed = ?2 ORDER BY seq LIMIT 1 OFFSET ?3), 9223372036854775807) "
              "AND seq <= COALESCE((SELECT seq FROM net_events WHERE session_id = ?1 AND "
              "allowed = ?2 ORDER BY seq DESC LIMIT 1 OFFSET ?4), -1)");
    trim.Bind(1, s.id)
        .Bind(2, static_cast<int64_t>(allowed))
        .Bind(3, kFirstNetEventsKept - 1)
        .Bind(4, kMaxNetEventsPerSession / 2 - kFirstNetEventsKept)
        .Step();
    if (!trim.ok()) return trim.status();
  }
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  for (const net::NetEvent& e : events) {
    if (e.allowed || !events_) continue;
    events_->Publish({.kind = SessionEvent::Kind::kDenied,
                      .tenant = s.tenant,
                      .session_id = s.id,
                      .unix_ms = e.unix_ms,
                      .reason = e.reason,
                      .destination = e.port == 0 ? (e.name.empty() ? e.address : e.name)
                                                 : absl::StrCat(e.name.empty() ? e.address : e.name,
                                                                ":", e.port)});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<net::NetEvent>> NetEventLog::Read(const std::string& tenant,
                                                             const std::string& id,
                                                             int64_t after_seq, uint32_t tail) {
  SqliteDb::Locked db(db_);
  std::string sql =
      "SELECT seq, unix_ms, kind, name, address, port, allowed, rule, reason, bytes_out, "
      "bytes_in, repeats, last_ms FROM net_events WHERE session_id = ? AND tenant = ? AND seq > ?";
  sql += tail > 0 ? " ORDER BY seq DESC LIMIT ?" : " ORDER BY seq LIMIT 4096";
  Stmt q(db, sql);
  q.Bind(1, id).Bind(2, tenant).Bind(3, after_seq);
  if (tail > 0) q.Bind(4, tail);
  absl::StatusOr<std::vector<net::NetEvent>> out = q.All([](Stmt& q) {
    net::NetEvent e;
    e.seq = q.Int(0);
    e.unix_ms = q.Int(1);
    e.kind = q.Text(2);
    e.name = q.Text(3);
    e.address = q.Text(4);
    e.port = static_cast<uint32_t>(q.Int(5));
    e.allowed = q.Int(6) != 0;
    e.rule = q.Text(7);
    e.reason = q.Text(8);
    e.bytes_out = static_cast<uint64_t>(q.Int(9));
    e.bytes_in = static_cast<uint64_t>(q.Int(10));
    e.repeats = static_cast<uint64_t>(q.Int(11));
    e.last_ms = q.Int(12);
    return e;
  });
  if (out.ok() && tail > 0) std::reverse(out->begin(), out->end());
  return out;
}

absl::StatusOr<std::map<std::string, int64_t>> NetEventLog::LastSecretUses(
    const std::string& tenant, const std::string& id) {
  SqliteDb::Locked db(db_);
  Stmt q(db,
         "SELECT rule, MAX(unix_ms) FROM net_events WHERE session_id = ? AND tenant = ? AND "
         "kind = 'secret' AND allowed = 1 GROUP BY rule");
  q.Bind(1, id).Bind(2, tenant);
  std::map<std::string, int64_t> out;
  while (q.Step()) out[q.Text(0)] = q.Int(1);
  if (!q.ok()) return q.status();
  return out;
}

}  // namespace airlock
