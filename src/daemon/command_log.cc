#include "src/daemon/command_log.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/daemon/audit_log.h"
#include "src/daemon/session_events.h"

namespace airlock {

absl::StatusOr<int64_t> CommandLog::Start(const Principal& who, const SessionRecord& s,
                                          const ExecRecord& e) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  std::string command = absl::StrJoin(e.argv, " ");
  std::string args;
  for (const std::string& a : e.argv) args.append(a).push_back('\0');
  Stmt q(db,
         "INSERT INTO execs(session_id, tenant, argv, started_ms, args, user, cwd, tty) "
         "VALUES(?,?,?,?,?,?,?,?)");
  q.Bind(1, s.id).Bind(2, s.tenant).Bind(3, command).Bind(4, NowUnixMs()).BindBlob(5, args);
  q.Bind(6, e.user).Bind(7, e.cwd).Bind(8, e.tty ? 1 : 0).Step();
  if (!q.ok()) return q.status();
  int64_t exec_id = db.last_insert_rowid();
  Stmt touch(db, "UPDATE sessions SET last_used_ms = ? WHERE id = ?");
  touch.Bind(1, NowUnixMs()).Bind(2, s.id).Step();
  if (!touch.ok()) return touch.status();
  if (absl::Status st =
          AuditLog::Append(db, who, s.tenant, "session.exec", s.id,
                           absl::StrCat("exec ", exec_id, ": ", command.substr(0, 200)));
      !st.ok()) {
    return st;
  }
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  if (events_) {
    events_->Publish({.kind = SessionEvent::Kind::kExecStart,
                      .tenant = s.tenant,
                      .session_id = s.id,
                      .unix_ms = NowUnixMs(),
                      .exec_id = exec_id,
                      .argv = e.argv});
  }
  return exec_id;
}

absl::Status CommandLog::End(const SessionRecord& s, int64_t exec_id, int exit_code,
                             const std::string& message,
                             const std::vector<LogRecord>& last_output) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  if (absl::Status st = AddOutput(db, s, last_output); !st.ok()) return st;
  Stmt q(db,
         "UPDATE execs SET ended_ms = ?, exit_code = ?, message = ? WHERE id = ? AND tenant = ?");
  q.Bind(1, NowUnixMs()).Bind(2, exit_code).Bind(3, message).Bind(4, exec_id).Bind(5, s.tenant);
  q.Step();
  if (!q.ok()) return q.status();
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  if (events_) {
    events_->Publish({.kind = SessionEvent::Kind::kExecExit,
                      .tenant = s.tenant,
                      .session_id = s.id,
                      .unix_ms = NowUnixMs(),
                      .exec_id = exec_id,
                      .exit_code = exit_code,
                      .message = message});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ExecRecord>> CommandLog::Read(const std::string& tenant,
                                                         const std::string& id) {
  SqliteDb::Locked db(db_);
  Stmt q(db,
         "SELECT id, argv, args, user, cwd, tty, started_ms, IFNULL(ended_ms, -1), "
         "IFNULL(exit_code, 0), IFNULL(message, '') FROM execs WHERE session_id = ? AND "
         "tenant = ? ORDER BY id LIMIT ?");
  q.Bind(1, id).Bind(2, tenant).Bind(3, kMaxTimelineRows);
  return q.All([](Stmt& q) {
    ExecRecord e;
    e.id = q.Int(0);
    std::string args = q.Text(2);
    if (args.empty()) {
      e.argv = {q.Text(1)};  // recorded before version 7: the words joined by spaces
    } else {
      e.argv = absl::StrSplit(args, '\0');
      e.argv.pop_back();  // after the last terminator
    }
    e.user = q.Text(3);
    e.cwd = q.Text(4);
    e.tty = q.Int(5) != 0;
    e.started_ms = q.Int(6);
    e.ended_ms = q.Int(7);
    e.exit_code = static_cast<int>(q.Int(8));
    e.message = q.Text(9);
    return e;
  });
}

absl::StatusOr<std::map<int64_t, ExecOutput>> CommandLog::Outputs(const std::string& tenant,
                                                                  const std::string& id,
                                                                  size_t keep_bytes) {
  SqliteDb::Locked db(db_);
  Stmt q(db,
         "SELECT exec_id, data FROM output WHERE session_id = ? AND tenant = ? AND stream IN "
         "(1, 2) ORDER BY seq");
  q.Bind(1, id).Bind(2, tenant);
  std::map<int64_t, ExecOutput> out;
  while (q.Step()) {
    ExecOutput& o = out[q.Int(0)];
    std::string data = q.Text(1);
    o.total += data.size();
    if (o.kept.size() < keep_bytes) o.kept.append(data, 0, keep_bytes - o.kept.size());
  }
  if (!q.ok()) return q.status();
  return out;
}

absl::Status CommandLog::AppendOutput(const SessionRecord& s, const std::vector<LogRecord>& logs) {
  if (logs.empty()) return absl::OkStatus();
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  if (absl::Status st = AddOutput(db, s, logs); !st.ok()) return st;
  return tx.Commit();
}

absl::Status CommandLog::AddOutput(SqliteDb::Locked& db, const SessionRecord& s,
                                   const std::vector<LogRecord>& logs) {
  if (logs.empty()) return absl::OkStatus();
  int64_t added = 0;
  for (const LogRecord& log : logs) {
    Stmt q(db,
           "INSERT INTO output(session_id, tenant, exec_id, unix_ms, stream, data) "
           "VALUES(?,?,?,?,?,?)");
    q.Bind(1, s.id).Bind(2, s.tenant).Bind(3, log.exec_id).Bind(4, log.unix_ms);
    q.Bind(5, static_cast<int64_t>(log.stream)).BindBlob(6, log.data).Step();
    if (!q.ok()) return q.status();
    added += static_cast<int64_t>(log.data.size());
  }
  Stmt total(db, "UPDATE sessions SET log_bytes = log_bytes + ? WHERE id = ? RETURNING log_bytes");
  total.Bind(1, added).Bind(2, s.id);
  int64_t bytes = total.Step() ? total.Int(0) : 0;
  while (total.Step()) {
  }
  if (!total.ok()) return total.status();
  // Ring: drop the oldest entries until the session is back under its cap.
  while (bytes > static_cast<int64_t>(log_cap_bytes_)) {
    Stmt oldest(db,
                "SELECT seq, length(data) FROM output WHERE session_id = ? ORDER BY seq LIMIT 64");
    oldest.Bind(1, s.id);
    int64_t freed = 0, last_seq = -1;
    while (oldest.Step() && bytes - freed > static_cast<int64_t>(log_cap_bytes_)) {
      last_seq = oldest.Int(0);
      freed += oldest.Int(1);
    }
    if (last_seq < 0) break;
    Stmt drop(db, "DELETE FROM output WHERE session_id = ? AND seq <= ?");
    drop.Bind(1, s.id).Bind(2, last_seq).Step();
    Stmt shrink(db, "UPDATE sessions SET log_bytes = log_bytes - ? WHERE id = ?");
    shrink.Bind(1, freed).Bind(2, s.id).Step();
    if (!drop.ok() || !shrink.ok()) return drop.ok() ? shrink.status() : drop.status();
    bytes -= freed;
  }
  // And the tenant's whole output under its logs quota: the oldest entries of any of its
  // sessions go first (removed sessions' records keep their output until then).
  uint64_t tenant_cap = tenant_log_cap_ ? tenant_log_cap_(s.tenant) : UINT64_MAX;
  Stmt sum(db, "SELECT COALESCE(SUM(log_bytes), 0) FROM sessions WHERE tenant = ?");
  sum.Bind(1, s.tenant);
  int64_t tenant_bytes = sum.Step() ? sum.Int(0) : 0;
  if (!sum.ok()) return sum.status();
  while (static_cast<uint64_t>(tenant_bytes) > tenant_cap) {
    Stmt oldest(db,
                "SELECT seq, session_id, length(data) FROM output WHERE tenant = ? ORDER BY seq "
                "LIMIT 64");
    oldest.Bind(1, s.tenant);
    std::vector<std::tuple<int64_t, std::string, int64_t>> victims;
    int64_t freed = 0;
    while (oldest.Step() && static_cast<uint64_t>(tenant_bytes - freed) > tenant_cap) {
      victims.emplace_back(oldest.Int(0), oldest.Text(1), oldest.Int(2));
      freed += oldest.Int(2);
    }
    if (victims.empty()) break;
    for (const auto& [seq, session, length] : victims) {
      Stmt drop(db, "DELETE FROM output WHERE seq = ?");
      drop.Bind(1, seq).Step();
      Stmt shrink(db, "UPDATE sessions SET log_bytes = log_bytes - ? WHERE id = ?");
      shrink.Bind(1, length).Bind(2, session).Step();
      if (!drop.ok() || !shrink.ok()) return drop.ok() ? shrink.status() : drop.status();
    }
    tenant_bytes -= freed;
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> CommandLog::OutputBytes(const std::string& tenant) {
  SqliteDb::Locked db(db_);
  Stmt sum(db, "SELECT COALESCE(SUM(log_bytes), 0) FROM sessions WHERE tenant = ?");
  sum.Bind(1, tenant);
  int64_t bytes = sum.Step() ? sum.Int(0) : 0;
  if (!sum.ok()) return sum.status();
  return static_cast<uint64_t>(bytes);
}

absl::StatusOr<std::vector<LogRecord>> CommandLog::ReadOutput(const std::string& tenant,
                                                              const std::string& id,
                                                              int64_t after_seq, int64_t since_ms,
                                                              uint32_t tail) {
  SqliteDb::Locked db(db_);
  std::string sql =
      "SELECT seq, unix_ms, exec_id, stream, data FROM output WHERE session_id = ? AND tenant = ? "
      "AND seq > ? AND unix_ms >= ?";
  sql += tail > 0 ? " ORDER BY seq DESC LIMIT ?" : " ORDER BY seq LIMIT 4096";
  Stmt q(db, sql);
  q.Bind(1, id).Bind(2, tenant).Bind(3, after_seq).Bind(4, since_ms);
  if (tail > 0) q.Bind(5, tail);
  absl::StatusOr<std::vector<LogRecord>> out = q.All([](Stmt& q) {
    LogRecord r;
    r.seq = q.Int(0);
    r.unix_ms = q.Int(1);
    r.exec_id = q.Int(2);
    r.stream = static_cast<LogStream>(q.Int(3));
    r.data = q.Text(4);
    return r;
  });
  if (out.ok() && tail > 0) std::reverse(out->begin(), out->end());
  return out;
}

absl::Status CommandLog::AppendAgentEvents(const SessionRecord& s,
                                           const std::vector<AgentEvent>& events) {
  if (events.empty()) return absl::OkStatus();
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  for (const AgentEvent& e : events) {
    Stmt q(db,
           "INSERT INTO agent_events(session_id, tenant, unix_ms, kind, agent, exec_id, tool_id, "
           "tool, text) VALUES(?,?,?,?,?,?,?,?,?)");
    q.Bind(1, s.id).Bind(2, s.tenant).Bind(3, e.unix_ms).Bind(4, e.kind).Bind(5, e.agent);
    q.Bind(6, e.exec_id).Bind(7, e.tool_id).Bind(8, e.tool).BindBlob(9, e.text).Step();
    if (!q.ok()) return q.status();
  }
  Stmt trim(db,
            "DELETE FROM agent_events WHERE session_id = ? AND seq <= (SELECT seq FROM "
            "agent_events WHERE session_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)");
  trim.Bind(1, s.id).Bind(2, s.id).Bind(3, kMaxAgentEventsPerSession).Step();
  if (!trim.ok()) return trim.status();
  return tx.Commit();
}

absl::StatusOr<std::vector<AgentEvent>> CommandLog::ReadAgentEvents(const std::string& tenant,
                                                                    const std::string& id) {
  SqliteDb::Locked db(db_);
  Stmt q(db,
         "SELECT seq, unix_ms, kind, agent, exec_id, tool_id, tool, text FROM agent_events "
         "WHERE session_id = ? AND tenant = ? ORDER BY seq LIMIT ?");
  q.Bind(1, id).Bind(2, tenant).Bind(3, kMaxTimelineRows);
  return q.All([](Stmt& q) {
    return AgentEvent{q.Int(0), q.Int(1),  q.Text(2), q.Text(3),
                      q.Int(4), q.Text(5), q.Text(6), q.Text(7)};
  });
}

}  // namespace airlock
