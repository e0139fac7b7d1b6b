#include "src/daemon/audit_log.h"

#include "absl/strings/str_cat.h"
#include "src/common/sha256.h"

namespace airlock {
namespace {

constexpr char kAuditColumns[] = "seq, unix_ms, principal, tenant, action, target, outcome, hash";

AuditRecord ReadAudit(Stmt& q) {
  return {.seq = q.Int(0),
          .unix_ms = q.Int(1),
          .principal = q.Text(2),
          .tenant = q.Text(3),
          .action = q.Text(4),
          .target = q.Text(5),
          .outcome = q.Text(6),
          .hash = q.Text(7)};
}

}  // namespace

std::string AuditHash(const std::string& previous, const AuditRecord& r) {
  // Each field with its length first, so that no two records share an encoding.
  std::string bytes = "airlock-audit-v1\n" + previous;
  for (const std::string& field :
       {absl::StrCat(r.unix_ms), r.principal, r.tenant, r.action, r.target, r.outcome}) {
    absl::StrAppend(&bytes, "\n", field.size(), ":", field);
  }
  return Sha256Hex(bytes);
}

absl::Status AuditLog::ChainExisting(SqliteDb::Locked& db) {
  std::vector<AuditRecord> records;
  {
    Stmt q(db, absl::StrCat("SELECT ", kAuditColumns, " FROM audit ORDER BY seq"));
    absl::StatusOr<std::vector<AuditRecord>> all = q.All(ReadAudit);
    if (!all.ok()) return all.status();
    records = *std::move(all);
  }
  std::string previous;
  for (const AuditRecord& r : records) {
    previous = AuditHash(previous, r);
    Stmt u(db, "UPDATE audit SET hash = ? WHERE seq = ?");
    u.Bind(1, previous).Bind(2, r.seq).Step();
    if (!u.ok()) return u.status();
  }
  return db.Exec(kNoUpdateTrigger);
}

absl::Status AuditLog::Append(SqliteDb::Locked& db, const Principal& who, const std::string& tenant,
                              const std::string& action, const std::string& target,
                              const std::string& outcome) {
  return Append(db, {.unix_ms = NowUnixMs(),
                     .principal = who.Name(),
                     .tenant = tenant,
                     .action = action,
                     .target = target,
                     .outcome = outcome});
}

absl::Status AuditLog::Append(SqliteDb::Locked& db, AuditRecord r) {
  // Under the connection's lock: nothing comes between reading the last hash and the insert.
  Stmt last(db, "SELECT hash FROM audit ORDER BY seq DESC LIMIT 1");
  std::string previous = last.Step() ? last.Text(0) : "";
  if (!last.ok()) return last.status();
  r.hash = AuditHash(previous, r);
  Stmt q(db,
         "INSERT INTO audit(unix_ms, principal, tenant, action, target, outcome, hash) "
         "VALUES(?,?,?,?,?,?,?)");
  q.Bind(1, r.unix_ms).Bind(2, r.principal).Bind(3, r.tenant).Bind(4, r.action);
  q.Bind(5, r.target).Bind(6, r.outcome).Bind(7, r.hash).Step();
  return q.status();
}

absl::Status AuditLog::Audit(const Principal& who, const std::string& tenant,
                             const std::string& action, const std::string& target,
                             const std::string& outcome) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status s = tx.Begun(); !s.ok()) return s;
  if (absl::Status s = Append(db, who, tenant, action, target, outcome); !s.ok()) return s;
  return tx.Commit();
}

absl::StatusOr<std::vector<AuditRecord>> AuditLog::ForTenant(const std::string& tenant) {
  SqliteDb::Locked db(db_);
  Stmt q(db, absl::StrCat("SELECT ", kAuditColumns, " FROM audit WHERE tenant = ? ORDER BY seq"));
  q.Bind(1, tenant);
  return q.All(ReadAudit);
}

absl::StatusOr<std::vector<AuditRecord>> AuditLog::Of(const std::string& tenant,
                                                      const std::string& id, int64_t limit) {
  SqliteDb::Locked db(db_);
  Stmt q(db, absl::StrCat("SELECT ", kAuditColumns,
                          " FROM audit WHERE target = ? AND tenant = ? ORDER BY seq LIMIT ?"));
  q.Bind(1, id).Bind(2, tenant).Bind(3, limit);
  return q.All(ReadAudit);
}

absl::StatusOr<std::vector<AuditRecord>> AuditLog::Since(int64_t since_ms, size_t limit) {
  SqliteDb::Locked db(db_);
  // The newest `limit`, oldest first.
  Stmt q(db,
         absl::StrCat("SELECT * FROM (SELECT ", kAuditColumns,
                      " FROM audit WHERE unix_ms >= ? ORDER BY seq DESC LIMIT ?) ORDER BY seq"));
  q.Bind(1, since_ms).Bind(2, static_cast<int64_t>(limit));
  return q.All(ReadAudit);
}

absl::StatusOr<std::vector<AuditRecord>> AuditLog::After(int64_t seq, size_t limit) {
  SqliteDb::Locked db(db_);
  Stmt q(db,
         absl::StrCat("SELECT ", kAuditColumns, " FROM audit WHERE seq > ? ORDER BY seq LIMIT ?"));
  q.Bind(1, seq).Bind(2, static_cast<int64_t>(limit));
  return q.All(ReadAudit);
}

absl::StatusOr<int64_t> AuditLog::LastSeq() {
  SqliteDb::Locked db(db_);
  Stmt q(db, "SELECT COALESCE(MAX(seq), 0) FROM audit");
  if (q.Step()) return q.Int(0);
  return q.status();
}

absl::StatusOr<AuditCheck> AuditLog::Verify() {
  SqliteDb::Locked db(db_);
  // A read transaction: one consistent view of the log and its sequence, however long it is.
  Transaction tx(db);
  if (absl::Status s = tx.Begun(); !s.ok()) return s;
  AuditCheck check;
  Stmt q(db, absl::StrCat("SELECT ", kAuditColumns, " FROM audit ORDER BY seq"));
  std::string previous;
  int64_t previous_seq = 0;
  while (q.Step()) {
    AuditRecord r = ReadAudit(q);
    ++check.records;
    check.last_seq = r.seq;
    if (!check.problem.empty()) continue;
    if (r.seq != previous_seq + 1) {
      check.problem =
          absl::StrCat("records ", previous_seq + 1, " to ", r.seq - 1, " are missing (removed)");
      check.first_bad_seq = previous_seq + 1;
    } else if (r.hash != AuditHash(previous, r)) {
      check.problem = absl::StrCat(
          "record ", r.seq,
          " does not follow from the one before it: it was changed, or the records around it "
          "were moved");
      check.first_bad_seq = r.seq;
    }
    previous = r.hash;
    previous_seq = r.seq;
  }
  if (!q.ok()) return q.status();
  // AUTOINCREMENT keeps the highest number ever given out: records removed from the end leave
  // it above the last one.
  Stmt top(db, "SELECT seq FROM sqlite_sequence WHERE name = 'audit'");
  int64_t given = top.Step() ? top.Int(0) : 0;
  if (!top.ok()) return top.status();
  if (check.problem.empty() && given > previous_seq) {
    check.problem = absl::StrCat("records ", previous_seq + 1, " to ", given,
                                 " are missing (removed from the end)");
    check.first_bad_seq = previous_seq + 1;
  }
  check.ok = check.problem.empty();
  return check;
}

}  // namespace airlock
