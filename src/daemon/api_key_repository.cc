#include "src/daemon/api_key_repository.h"

#include <sys/random.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/common/hex.h"
#include "src/common/sha256.h"
#include "src/daemon/audit_log.h"

namespace airlock {
namespace {

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

std::string EncodeMap(const std::map<std::string, std::string>& m) {
  return nlohmann::json(m).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::map<std::string, std::string> DecodeMap(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  std::map<std::string, std::string> out;
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ApiKeyRepository::Create(const Principal& who,
                                                     const std::string& name) {
  if (!ValidName(name)) {
    return absl::InvalidArgumentError(
        "an API key's name is 1 to 64 letters, digits, '-', '_' or '.' (e.g. --name ci)");
  }
  unsigned char random[20];
  if (getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) {
    return absl::InternalError("getrandom failed: no key made");
  }
  std::string key = "e2b_" + HexString(random, sizeof random);
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt have(db, "SELECT 1 FROM api_keys WHERE tenant = ? AND name = ?");
  have.Bind(1, who.Tenant()).Bind(2, name);
  if (have.Step()) {
    return absl::AlreadyExistsError(absl::StrCat("you have an API key named ", name,
                                                 " already: remove it first (airlock api-key rm ",
                                                 name, ") or choose another name"));
  }
  if (!have.ok()) return have.status();
  Stmt q(db, "INSERT INTO api_keys(hash, tenant, name, created_ms) VALUES(?,?,?,?)");
  q.Bind(1, Sha256Hex(key)).Bind(2, who.Tenant()).Bind(3, name).Bind(4, NowUnixMs()).Step();
  if (!q.ok()) return q.status();
  if (absl::Status st = AuditLog::Append(db, who, who.Tenant(), "apikey.create", name, "ok");
      !st.ok()) {
    return st;
  }
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  return key;
}

absl::StatusOr<std::vector<ApiKeyInfo>> ApiKeyRepository::List(const std::string& tenant) {
  SqliteDb::Locked db(db_);
  Stmt q(db, "SELECT name, tenant, created_ms FROM api_keys WHERE tenant = ? ORDER BY name");
  q.Bind(1, tenant);
  return q.All([](Stmt& r) {
    return ApiKeyInfo{.name = r.Text(0), .tenant = r.Text(1), .created_ms = r.Int(2)};
  });
}

absl::Status ApiKeyRepository::Remove(const Principal& who, const std::string& name) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt q(db, "DELETE FROM api_keys WHERE tenant = ? AND name = ?");
  q.Bind(1, who.Tenant()).Bind(2, name).Step();
  if (!q.ok()) return q.status();
  if (db.changes() == 0) {
    return absl::NotFoundError(
        absl::StrCat("you have no API key named ", name, " (airlock api-key ls lists yours)"));
  }
  if (absl::Status st = AuditLog::Append(db, who, who.Tenant(), "apikey.remove", name, "ok");
      !st.ok()) {
    return st;
  }
  return tx.Commit();
}

absl::StatusOr<std::optional<ApiKeyInfo>> ApiKeyRepository::Lookup(const std::string& key) {
  if (key.size() != 44 || key.compare(0, 4, "e2b_") != 0) return std::nullopt;
  SqliteDb::Locked db(db_);
  Stmt q(db, "SELECT name, tenant, created_ms FROM api_keys WHERE hash = ?");
  q.Bind(1, Sha256Hex(key));
  absl::StatusOr<std::vector<ApiKeyInfo>> rows = q.All([](Stmt& r) {
    return ApiKeyInfo{.name = r.Text(0), .tenant = r.Text(1), .created_ms = r.Int(2)};
  });
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::nullopt;
  return rows->front();
}

absl::Status ApiKeyRepository::PutSandbox(const E2bSandboxRecord& r) {
  SqliteDb::Locked db(db_);
  Stmt q(db,
         "INSERT OR REPLACE INTO e2b_sandboxes(session_id, tenant, template_id, metadata, "
         "env_vars, access_token, api_key, traffic_token, snapshot_of, snapshot_name) "
         "VALUES(?,?,?,?,?,?,?,?,?,?)");
  q.Bind(1, r.session_id).Bind(2, r.tenant).Bind(3, r.template_id);
  q.Bind(4, EncodeMap(r.metadata)).Bind(5, EncodeMap(r.env_vars));
  q.Bind(6, r.access_token).Bind(7, r.api_key).Bind(8, r.traffic_token);
  q.Bind(9, r.snapshot_of).Bind(10, r.snapshot_name).Step();
  return q.status();
}

namespace {

constexpr char kSandboxColumns[] =
    "SELECT session_id, tenant, template_id, metadata, env_vars, access_token, api_key, "
    "traffic_token, snapshot_of, snapshot_name FROM e2b_sandboxes WHERE ";

absl::StatusOr<std::vector<E2bSandboxRecord>> Sandboxes(Stmt& q) {
  return q.All([](Stmt& r) {
    return E2bSandboxRecord{.session_id = r.Text(0),
                            .tenant = r.Text(1),
                            .template_id = r.Text(2),
                            .metadata = DecodeMap(r.Text(3)),
                            .env_vars = DecodeMap(r.Text(4)),
                            .access_token = r.Text(5),
                            .api_key = r.Text(6),
                            .traffic_token = r.Text(7),
                            .snapshot_of = r.Text(8),
                            .snapshot_name = r.Text(9)};
  });
}

absl::StatusOr<std::optional<E2bSandboxRecord>> OneSandbox(Stmt& q) {
  absl::StatusOr<std::vector<E2bSandboxRecord>> rows = Sandboxes(q);
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::nullopt;
  return rows->front();
}

}  // namespace

absl::StatusOr<std::optional<E2bSandboxRecord>> ApiKeyRepository::GetSandbox(
    const std::string& tenant, const std::string& session_id) {
  SqliteDb::Locked db(db_);
  Stmt q(db, absl::StrCat(kSandboxColumns, "tenant = ? AND session_id = ?"));
  q.Bind(1, tenant).Bind(2, session_id);
  return OneSandbox(q);
}

absl::StatusOr<std::optional<E2bSandboxRecord>> ApiKeyRepository::FindSandbox(
    const std::string& session_id) {
  SqliteDb::Locked db(db_);
  Stmt q(db, absl::StrCat(kSandboxColumns, "session_id = ?"));
  q.Bind(1, session_id);
  return OneSandbox(q);
}

namespace {
// Snapshots whose session is gone (removed, failed) are no longer any.
std::string LiveSnapshot() {
  return absl::StrCat(
      "snapshot_of != '' AND session_id IN (SELECT id FROM sessions WHERE state IN (",
      static_cast<int>(SessionState::kRunning), ", ", static_cast<int>(SessionState::kPaused),
      "))");
}
}  // namespace

absl::StatusOr<std::vector<E2bSandboxRecord>> ApiKeyRepository::ListSnapshots(
    const std::string& tenant) {
  SqliteDb::Locked db(db_);
  Stmt q(db,
         absl::StrCat(kSandboxColumns, "tenant = ? AND ", LiveSnapshot(), " ORDER BY rowid DESC"));
  q.Bind(1, tenant);
  return Sandboxes(q);
}

absl::StatusOr<std::optional<E2bSandboxRecord>> ApiKeyRepository::FindSnapshot(
    const std::string& tenant, const std::string& name_or_id) {
  SqliteDb::Locked db(db_);
  Stmt q(db, absl::StrCat(kSandboxColumns, "tenant = ? AND ", LiveSnapshot(),
                          " AND (snapshot_name = ? OR (snapshot_name = '' AND session_id = ?)) "
                          "ORDER BY rowid DESC LIMIT 1"));
  q.Bind(1, tenant).Bind(2, name_or_id).Bind(3, name_or_id);
  return OneSandbox(q);
}

}  // namespace airlock
