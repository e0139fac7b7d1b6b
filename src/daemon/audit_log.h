// The audit log's table: append-only (triggers refuse UPDATE and DELETE) and a hash chain
// (AuditHash), so what was done to the database alone is found by Verify. A state change and
// its audit record commit in one transaction: the other repositories call Append inside theirs.
#ifndef AIRLOCK_DAEMON_AUDIT_LOG_H_
#define AIRLOCK_DAEMON_AUDIT_LOG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/daemon/records.h"
#include "src/daemon/sqlite_db.h"

namespace airlock {

// SHA-256 (hex) of "airlock-audit-v1", the previous hash ("" for the first record) and each
// field with its length before it.
std::string AuditHash(const std::string& previous, const AuditRecord& record);

class AuditLog {
 public:
  explicit AuditLog(SqliteDb& db) : db_(db) {}

  // Appends a record in a transaction of its own.
  [[nodiscard]] absl::Status Audit(const Principal& who, const std::string& tenant,
                                   const std::string& action, const std::string& target,
                                   const std::string& outcome);
  // Appends within the caller's transaction (who's name, now).
  [[nodiscard]] static absl::Status Append(SqliteDb::Locked& db, const Principal& who,
                                           const std::string& tenant, const std::string& action,
                                           const std::string& target, const std::string& outcome);
  // Chains r after the last record (its seq and hash are filled in), within the caller's
  // transaction.
  [[nodiscard]] static absl::Status Append(SqliteDb::Locked& db, AuditRecord r);

  // A tenant's records, oldest first.
  [[nodiscard]] absl::StatusOr<std::vector<AuditRecord>> ForTenant(const std::string& tenant);
  // The records whose target is the session, oldest first (at most `limit`).
  [[nodiscard]] absl::StatusOr<std::vector<AuditRecord>> Of(const std::string& tenant,
                                                            const std::string& id, int64_t limit);
  // Every tenant's records from since_ms on: the newest `limit`, oldest first (the operator's
  // `airlock audit`).
  [[nodiscard]] absl::StatusOr<std::vector<AuditRecord>> Since(int64_t since_ms, size_t limit);
  // Records after `seq`, oldest first, at most `limit` (the OTLP log export follows the log).
  [[nodiscard]] absl::StatusOr<std::vector<AuditRecord>> After(int64_t seq, size_t limit);
  [[nodiscard]] absl::StatusOr<int64_t> LastSeq();
  // Walks the whole chain: every record's hash against its content and the one before it, no
  // number missing, none removed from the end (SQLite's AUTOINCREMENT counter). Detects what was
  // done to the database alone; someone who rewrites every hash after a change (with this
  // program's code) is not detected by it.
  [[nodiscard]] absl::StatusOr<AuditCheck> Verify();

  // The schema's migration to the hash chain: hashes for the records written before there were
  // any, then the trigger that keeps them from being updated again.
  [[nodiscard]] static absl::Status ChainExisting(SqliteDb::Locked& db);
  // The trigger that refuses updates of records (dropped for ChainExisting only).
  static constexpr char kNoUpdateTrigger[] = R"sql(
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
)sql";

 private:
  SqliteDb& db_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_AUDIT_LOG_H_
