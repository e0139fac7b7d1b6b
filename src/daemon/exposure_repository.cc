#include "src/daemon/exposure_repository.h"

#include <sys/random.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "src/daemon/audit_log.h"

namespace airlock {
namespace {

Exposure ReadExposure(Stmt& q) {
  return {.tenant = q.Text(0),
          .session_id = q.Text(1),
          .port = static_cast<uint16_t>(q.Int(2)),
          .is_public = q.Int(3) != 0,
          .token = q.Text(4),
          .created_ms = q.Int(5)};
}

constexpr char kColumns[] = "tenant, session_id, port, public, token, created_ms";

}  // namespace

absl::StatusOr<std::string> NewExposureToken() {
  char random[24];
  if (getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) {
    return absl::InternalError("getrandom failed: no token for the exposure");
  }
  return absl::WebSafeBase64Escape(absl::string_view(random, sizeof random));
}

absl::StatusOr<Exposure> ExposureRepository::Put(const Principal& who, const std::string& tenant,
                                                 const std::string& session_id, uint16_t port,
                                                 bool is_public) {
  Exposure e{.tenant = tenant,
             .session_id = session_id,
             .port = port,
             .is_public = is_public,
             .created_ms = NowUnixMs()};
  if (!is_public) {
    absl::StatusOr<std::string> token = NewExposureToken();
    if (!token.ok()) return token.status();
    e.token = *std::move(token);
  }
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt q(db, absl::StrCat("INSERT OR REPLACE INTO exposures(", kColumns, ") VALUES(?,?,?,?,?,?)"));
  q.Bind(1, tenant).Bind(2, session_id).Bind(3, static_cast<int64_t>(port));
  q.Bind(4, is_public ? 1 : 0).Bind(5, e.token).Bind(6, e.created_ms).Step();
  if (!q.ok()) return q.status();
  if (absl::Status st =
          AuditLog::Append(db, who, tenant, "session.expose", session_id,
                           absl::StrCat("port ", port, is_public ? ", public" : ", with a token"));
      !st.ok()) {
    return st;
  }
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  return e;
}

absl::Status ExposureRepository::Remove(const Principal& who, const std::string& tenant,
                                        const std::string& session_id, uint16_t port) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt q(db, "DELETE FROM exposures WHERE tenant = ? AND session_id = ? AND port = ?");
  q.Bind(1, tenant).Bind(2, session_id).Bind(3, static_cast<int64_t>(port)).Step();
  if (!q.ok()) return q.status();
  if (db.changes() == 0) {
    return absl::NotFoundError(absl::StrCat("port ", port, " of session ", session_id,
                                            " is not exposed (`airlock expose ls ", session_id,
                                            "` lists what is)"));
  }
  if (absl::Status st = AuditLog::Append(db, who, tenant, "session.unexpose", session_id,
                                         absl::StrCat("port ", port));
      !st.ok()) {
    return st;
  }
  return tx.Commit();
}

absl::StatusOr<std::vector<Exposure>> ExposureRepository::List(const std::string& tenant,
                                                               const std::string& session_id) {
  SqliteDb::Locked db(db_);
  Stmt q(db, absl::StrCat("SELECT ", kColumns,
                          " FROM exposures WHERE tenant = ? AND session_id = ? ORDER BY port"));
  q.Bind(1, tenant).Bind(2, session_id);
  return q.All(ReadExposure);
}

absl::StatusOr<std::optional<Exposure>> ExposureRepository::Find(const std::string& session_id,
                                                                 uint16_t port) {
  SqliteDb::Locked db(db_);
  Stmt q(db,
         absl::StrCat("SELECT ", kColumns, " FROM exposures WHERE session_id = ? AND port = ?"));
  q.Bind(1, session_id).Bind(2, static_cast<int64_t>(port));
  absl::StatusOr<std::vector<Exposure>> rows = q.All(ReadExposure);
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::nullopt;
  return rows->front();
}

absl::Status ExposureRepository::RemoveAll(SqliteDb::Locked& db, const std::string& session_id) {
  Stmt q(db, "DELETE FROM exposures WHERE session_id = ?");
  q.Bind(1, session_id).Step();
  return q.status();
}

}  // namespace airlock
