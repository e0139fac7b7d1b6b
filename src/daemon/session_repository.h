// The sessions table: a session's record (state, limits, egress grants, secret bindings, its
// workspace) with every change audited in the same transaction and published to watchers
// (Sessions.Watch) once committed. Every query names the tenant, so one tenant can never read
// another's rows; a lookup of another tenant's session is NotFound for the caller and audited
// for its owner.
#ifndef AIRLOCK_DAEMON_SESSION_REPOSITORY_H_
#define AIRLOCK_DAEMON_SESSION_REPOSITORY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "src/daemon/records.h"
#include "src/daemon/sqlite_db.h"

namespace airlock {

class SessionEventHub;

// A paused session's record as text, for hosts that hand sessions to each other
// (SessionHandoff): one "field<TAB>value" line per field, values C-escaped. The state, reason
// and pid are not in it (the text always describes a paused session). Decode expects text a host
// of the fleet wrote and signed, checked before it is parsed; still, anything off is
// InvalidArgument, never a partly filled record.
std::string EncodeSessionRecord(const SessionRecord& s);
[[nodiscard]] absl::StatusOr<SessionRecord> DecodeSessionRecord(absl::string_view text);

class SessionRepository {
 public:
  explicit SessionRepository(SqliteDb& db) : db_(db) {}
  // Where committed changes are published; unset: nowhere. Call before the store is shared.
  void set_events(SessionEventHub* events) { events_ = events; }

  // Inserts a session (state kCreating) and its audit record in one transaction.
  [[nodiscard]] absl::Status Create(const Principal& who, const SessionRecord& session);
  // Puts the record of a session another host published (SessionHandoff) in place of this
  // host's, or inserts it; its commands and logs here stay. FailedPrecondition if the id is
  // another tenant's here. Audited as session.import.
  [[nodiscard]] absl::Status Import(const Principal& who, const SessionRecord& session,
                                    const std::string& from_host);
  // Changes state (and reason/pid) and records who did it and why, in one transaction.
  [[nodiscard]] absl::Status SetState(const Principal& who, const std::string& tenant,
                                      const std::string& id, SessionState state,
                                      const std::string& reason, int64_t pid,
                                      const std::string& action);
  // Deletes a session's record, commands, output and events (the audit log keeps what
  // happened).
  [[nodiscard]] absl::Status Delete(const Principal& who, const std::string& tenant,
                                    const std::string& id);
  // NOT_FOUND for a missing session or one of another tenant.
  [[nodiscard]] absl::StatusOr<SessionRecord> Get(const std::string& tenant, const std::string& id);
  [[nodiscard]] absl::StatusOr<std::vector<SessionRecord>> List(const std::string& tenant);
  // Every tenant's sessions, by tenant (for root and the read-only operators).
  [[nodiscard]] absl::StatusOr<std::vector<SessionRecord>> ListEveryTenant();
  // The tenant that holds session `id`; NOT_FOUND if none does.
  [[nodiscard]] absl::StatusOr<std::string> TenantOf(const std::string& id);
  // Sessions of every tenant in these states (for recovery at start-up).
  [[nodiscard]] absl::StatusOr<std::vector<SessionRecord>> InState(
      std::vector<SessionState> states);

  // Replaces a session's egress grants (with their new version), audited in one transaction.
  // A new time to live (seconds from its creation; 0: none), and with pause_at_ttl whether the
  // session is paused rather than stopped then; audited as session.ttl.
  [[nodiscard]] absl::Status SetTimeToLive(const Principal& who, const std::string& tenant,
                                           const std::string& id, uint64_t ttl_seconds,
                                           std::optional<bool> pause_at_ttl = std::nullopt);
  [[nodiscard]] absl::Status SetEgress(const Principal& who, const std::string& tenant,
                                       const std::string& id,
                                       const std::vector<EgressGrant>& egress, int64_t version,
                                       const std::string& action, const std::string& outcome);
  // Replaces a session's secret bindings (never values), with an audit record.
  [[nodiscard]] absl::Status SetSecrets(const Principal& who, const std::string& tenant,
                                        const std::string& id,
                                        const std::vector<SecretGrant>& secrets,
                                        const std::string& action, const std::string& outcome);
  // Replaces a session's workspace record (its base advanced), with an audit record.
  [[nodiscard]] absl::Status SetWorkspace(const Principal& who, const std::string& tenant,
                                          const std::string& id, const WorkspaceRecord& workspace,
                                          const std::string& action, const std::string& outcome);

 private:
  absl::Status Put(const Principal& who, const SessionRecord& s, bool import,
                   const std::string& from_host);
  // Runs an UPDATE of a tenant's session (sql ends "WHERE id = ? AND tenant = ?"; bind binds
  // the values before those and returns how many), audited, in one transaction.
  absl::Status SetColumn(const Principal& who, const std::string& tenant, const std::string& id,
                         const char* sql, const std::function<int(Stmt&)>& bind,
                         const std::string& action, const std::string& outcome);
  // Audits a lookup of another tenant's session for its owner, at most once a minute per caller
  // and session, so that asking again and again cannot fill the log.
  absl::Status AuditDenial(SqliteDb::Locked& db, const std::string& tenant,
                           const std::string& owner, const std::string& id);
  void PublishState(const std::string& tenant, const std::string& id, SessionState state,
                    const std::string& reason);

  SqliteDb& db_;
  SessionEventHub* events_ = nullptr;
  absl::Mutex denials_mu_;
  // When each (caller tenant, session) lookup of another tenant's session was last audited.
  std::map<std::string, int64_t> denials_ ABSL_GUARDED_BY(denials_mu_);
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_SESSION_REPOSITORY_H_
