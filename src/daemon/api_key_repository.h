// API keys (the api_keys table): each authenticates HTTP callers of the gateway's
// E2B-compatible API as the tenant that created it. Only the key's SHA-256 is kept; the key
// itself is shown once, when it is made. Creation and removal are audited. E2B's SDKs accept
// the keys' form: "e2b_" and 40 lowercase hex digits.
//
// The E2B-specific facts of a session the API made (e2b_sandboxes: its template name,
// metadata and environment) live here too, since only that API reads them.
#ifndef AIRLOCK_DAEMON_API_KEY_REPOSITORY_H_
#define AIRLOCK_DAEMON_API_KEY_REPOSITORY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/daemon/records.h"
#include "src/daemon/sqlite_db.h"

namespace airlock {

struct ApiKeyInfo {
  std::string name;
  std::string tenant;
  int64_t created_ms = 0;
};

// What the E2B-compatible API keeps of a session it created.
struct E2bSandboxRecord {
  std::string session_id;
  std::string tenant;
  std::string template_id;
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::string> env_vars;
  // The token its envd API takes (X-Access-Token), and the name of the key that made it.
  std::string access_token;
  std::string api_key;
  // What its ports need (E2B's traffic access token); empty: they are public.
  std::string traffic_token;
  // A snapshot (a paused session kept as a template) has the id of the sandbox it was taken
  // of, and its name if it was given one; a sandbox has neither.
  std::string snapshot_of;
  std::string snapshot_name;
  bool is_snapshot() const { return !snapshot_of.empty(); }
};

class ApiKeyRepository {
 public:
  explicit ApiKeyRepository(SqliteDb& db) : db_(db) {}

  // A new key for the caller's tenant, named `name` (1 to 64 of letters, digits, '-', '_',
  // '.'; unique per tenant: ALREADY_EXISTS). Returns the key, which is never stored.
  [[nodiscard]] absl::StatusOr<std::string> Create(const Principal& who, const std::string& name);
  [[nodiscard]] absl::StatusOr<std::vector<ApiKeyInfo>> List(const std::string& tenant);
  // NOT_FOUND when the tenant has no key of that name.
  [[nodiscard]] absl::Status Remove(const Principal& who, const std::string& name);
  // The key's owner; nullopt for a key nobody has (or one of another form).
  [[nodiscard]] absl::StatusOr<std::optional<ApiKeyInfo>> Lookup(const std::string& key);

  [[nodiscard]] absl::Status PutSandbox(const E2bSandboxRecord& record);
  // nullopt: the session was not made through the E2B API (or is another tenant's).
  [[nodiscard]] absl::StatusOr<std::optional<E2bSandboxRecord>> GetSandbox(
      const std::string& tenant, const std::string& session_id);
  // The same whoever's it is (for the gateway's envd API, which the sandbox's own token
  // admits).
  [[nodiscard]] absl::StatusOr<std::optional<E2bSandboxRecord>> FindSandbox(
      const std::string& session_id);
  // The tenant's snapshots, newest first.
  [[nodiscard]] absl::StatusOr<std::vector<E2bSandboxRecord>> ListSnapshots(
      const std::string& tenant);
  // The tenant's snapshot of that name, or with that session id; the newest if two share the
  // name (while one replaces the other).
  [[nodiscard]] absl::StatusOr<std::optional<E2bSandboxRecord>> FindSnapshot(
      const std::string& tenant, const std::string& name_or_id);

 private:
  SqliteDb& db_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_API_KEY_REPOSITORY_H_
