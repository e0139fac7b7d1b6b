// Guest ports exposed as URLs through airlockd's HTTP gateway (the exposures table): which port
// of which session, whether a token is needed and which. Each change is audited in its own
// transaction, with the session as the target, so it shows in the session's timeline; a session
// that stops or fails loses its exposures with it (SessionRepository::SetState).
#ifndef AIRLOCK_DAEMON_EXPOSURE_REPOSITORY_H_
#define AIRLOCK_DAEMON_EXPOSURE_REPOSITORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/daemon/records.h"
#include "src/daemon/sqlite_db.h"

namespace airlock {

struct Exposure {
  std::string tenant;
  std::string session_id;
  uint16_t port = 0;
  bool is_public = false;  // reached without a token
  std::string token;       // 32 URL-safe characters; empty when public
  int64_t created_ms = 0;
};

class ExposureRepository {
 public:
  explicit ExposureRepository(SqliteDb& db) : db_(db) {}

  // Exposes the port (again: a new token, or none when public), audited as session.expose.
  [[nodiscard]] absl::StatusOr<Exposure> Put(const Principal& who, const std::string& tenant,
                                             const std::string& session_id, uint16_t port,
                                             bool is_public);
  // NOT_FOUND when the port is not exposed; audited as session.unexpose.
  [[nodiscard]] absl::Status Remove(const Principal& who, const std::string& tenant,
                                    const std::string& session_id, uint16_t port);
  // The session's exposures by port.
  [[nodiscard]] absl::StatusOr<std::vector<Exposure>> List(const std::string& tenant,
                                                           const std::string& session_id);
  // The exposure of a port of any tenant's session (the gateway's lookup); nullopt: none.
  [[nodiscard]] absl::StatusOr<std::optional<Exposure>> Find(const std::string& session_id,
                                                             uint16_t port);

  // Within the caller's transaction: the session's exposures end (it stopped or was deleted).
  [[nodiscard]] static absl::Status RemoveAll(SqliteDb::Locked& db, const std::string& session_id);

 private:
  SqliteDb& db_;
};

// A fresh exposure token: 24 random bytes, base64url (32 characters).
[[nodiscard]] absl::StatusOr<std::string> NewExposureToken();

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_EXPOSURE_REPOSITORY_H_
