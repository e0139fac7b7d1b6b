// airlockd's durable state: one SQLite database (sqlite_db.h: WAL, synchronous=FULL, BEGIN
// IMMEDIATE transactions, a versioned schema migrated at open) and the repositories over its
// tables: sessions (with their egress grants, secret bindings and workspace), commands (execs,
// their output, agents' events), network events, and the audit log (append-only, a hash
// chain), the guest ports exposed through the HTTP gateway, and the activity record. Every query of
// user data names the tenant, so one tenant can never read another's rows; a state change and the
// audit record of it commit in the same transaction. Thread-safe (one connection behind a lock).
#ifndef AIRLOCK_DAEMON_STATE_STORE_H_
#define AIRLOCK_DAEMON_STATE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "src/daemon/activity_log.h"
#include "src/daemon/api_key_repository.h"
#include "src/daemon/audit_log.h"
#include "src/daemon/command_log.h"
#include "src/daemon/exposure_repository.h"
#include "src/daemon/net_event_log.h"
#include "src/daemon/records.h"
#include "src/daemon/session_repository.h"
#include "src/daemon/sqlite_db.h"
#include "src/daemon/volume_repository.h"

namespace airlock {

class SessionEventHub;

class StateStore {
 public:
  // The database's version (PRAGMA user_version) once migrated: one per migration.
  static constexpr int kSchemaVersion = 16;

  // Opens (creating and migrating) the database at path; the file is 0600. log_cap_bytes: what
  // one session's output may take.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<StateStore>> Open(const std::string& path,
                                                                        uint64_t log_cap_bytes);

  SessionRepository& sessions() { return sessions_; }
  CommandLog& commands() { return commands_; }
  NetEventLog& net_events() { return net_events_; }
  AuditLog& audit() { return audit_; }
  ExposureRepository& exposures() { return exposures_; }
  ApiKeyRepository& api_keys() { return api_keys_; }
  VolumeRepository& volumes() { return volumes_; }
  ActivityLog& activity() { return activity_; }

  // Where committed changes are published for Sessions.Watch (state changes, commands starting
  // and ending, egress denials, removals); unset: nowhere. Call before the store is shared.
  void set_events(SessionEventHub* events);
  SessionEventHub* events() const { return events_; }
  // What a tenant's sessions may store in all (its logs quota). Call before the store is shared.
  void set_tenant_log_cap(std::function<uint64_t(const std::string&)> cap) {
    commands_.set_tenant_log_cap(std::move(cap));
  }

 private:
  StateStore(std::unique_ptr<SqliteDb> db, uint64_t log_cap_bytes);
  std::unique_ptr<SqliteDb> db_;
  SessionRepository sessions_;
  CommandLog commands_;
  NetEventLog net_events_;
  AuditLog audit_;
  ExposureRepository exposures_;
  ApiKeyRepository api_keys_;
  VolumeRepository volumes_;
  ActivityLog activity_;
  SessionEventHub* events_ = nullptr;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_STATE_STORE_H_
