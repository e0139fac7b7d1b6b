// airlockd's durable state: SQLite in WAL mode with synchronous=FULL, writes in BEGIN IMMEDIATE
// transactions, a versioned schema migrated at open.
//
// Tables: tenants, sessions (with their egress grants), execs, output (each session's command
// output, bounded per session like a ring), net_events (the egress proxy's decisions, bounded
// per session), and audit (append-only: triggers refuse UPDATE and DELETE). Every query of user
// data names the tenant, so one tenant can never read another's rows. A state change and the audit
// record of it commit in the same transaction. Thread-safe (one connection behind a mutex).
#ifndef AIRLOCK_DAEMON_STATE_STORE_H_
#define AIRLOCK_DAEMON_STATE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/daemon/records.h"
#include "src/net/net_event.h"

struct sqlite3;

namespace airlock {

// A paused session's record as text, for hosts that hand sessions to each other
// (SessionHandoff): one "field<TAB>value" line per field, values C-escaped. The state, reason
// and pid are not in it (the text always describes a paused session). Decode expects text a host
// of the fleet wrote and signed, checked before it is parsed; still, anything off is
// InvalidArgument, never a partly filled record.
std::string EncodeSessionRecord(const SessionRecord& s);
[[nodiscard]] absl::StatusOr<SessionRecord> DecodeSessionRecord(absl::string_view text);

// SHA-256 (hex) of "airlock-audit-v1", the previous hash ("" for the first record) and each
// field with its length before it.
std::string AuditHash(const std::string& previous, const AuditRecord& record);

class SessionEventHub;

class StateStore {
 public:
  // The database's version (PRAGMA user_version) once migrated: one per migration.
  static constexpr int kSchemaVersion = 9;

  // Opens (creating and migrating) the database at path; the file is 0600.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<StateStore>> Open(const std::string& path,
                                                                        uint64_t log_cap_bytes);
  ~StateStore();

  // Inserts a session (state kCreating) and its audit record in one transaction.
  [[nodiscard]] absl::Status CreateSession(const Principal& who, const SessionRecord& session);
  // Puts the record of a session another host published (SessionHandoff) in place of this
  // host's, or inserts it; its commands and logs here stay. FailedPrecondition if the id is
  // another tenant's here. Audited as session.import.
  [[nodiscard]] absl::Status ImportSession(const Principal& who, const SessionRecord& session,
                                           const std::string& from_host);
  // Changes state (and reason/pid) and records who did it and why, in one transaction.
  [[nodiscard]] absl::Status SetSessionState(const Principal& who, const std::string& tenant,
                                             const std::string& id, SessionState state,
                                             const std::string& reason, int64_t pid,
                                             const std::string& action);
  // Deletes a session's record, commands and output (the audit log keeps what happened).
  [[nodiscard]] absl::Status DeleteSession(const Principal& who, const std::string& tenant,
                                           const std::string& id);
  [[nodiscard]] absl::Status TouchSession(const std::string& id, int64_t unix_ms);
  // NOT_FOUND for a missing session or one of another tenant.
  [[nodiscard]] absl::StatusOr<SessionRecord> GetSession(const std::string& tenant,
                                                         const std::string& id);
  [[nodiscard]] absl::StatusOr<std::vector<SessionRecord>> ListSessions(const std::string& tenant);
  // Every tenant's sessions, by tenant (for root and the read-only operators).
  [[nodiscard]] absl::StatusOr<std::vector<SessionRecord>> ListEveryTenantsSessions();
  // The tenant that holds session `id`; NOT_FOUND if none does.
  [[nodiscard]] absl::StatusOr<std::string> SessionTenant(const std::string& id);
  // Sessions of every tenant in these states (for recovery at start-up).
  [[nodiscard]] absl::StatusOr<std::vector<SessionRecord>> SessionsInState(
      std::vector<SessionState> states);

  // Records the start of a command (e: argv, user, cwd, tty); returns its exec id.
  [[nodiscard]] absl::StatusOr<int64_t> StartExec(const Principal& who, const SessionRecord& s,
                                                  const ExecRecord& e);
  // A session's commands, oldest first (at most kMaxTimelineRows).
  [[nodiscard]] absl::StatusOr<std::vector<ExecRecord>> ReadExecs(const std::string& tenant,
                                                                  const std::string& id);
  // Each command's stored output by exec id, keeping its first keep_bytes.
  [[nodiscard]] absl::StatusOr<std::map<int64_t, ExecOutput>> ReadExecOutputs(
      const std::string& tenant, const std::string& id, size_t keep_bytes);
  // Events from agents' transcripts; at most kMaxAgentEventsPerSession, oldest dropped.
  [[nodiscard]] absl::Status AppendAgentEvents(const SessionRecord& s,
                                               const std::vector<AgentEvent>& events);
  [[nodiscard]] absl::StatusOr<std::vector<AgentEvent>> ReadAgentEvents(const std::string& tenant,
                                                                        const std::string& id);
  // The audit records whose target is the session, oldest first.
  [[nodiscard]] absl::StatusOr<std::vector<AuditRecord>> AuditOf(const std::string& tenant,
                                                                 const std::string& id);
  static constexpr int64_t kMaxAgentEventsPerSession = 20000;
  // Rows of each kind one timeline reads at most.
  static constexpr int64_t kMaxTimelineRows = 50000;
  [[nodiscard]] absl::Status EndExec(const SessionRecord& s, int64_t exec_id, int exit_code,
                                     const std::string& message);

  // Output stored for a tenant's sessions in all, removed ones included.
  [[nodiscard]] absl::StatusOr<uint64_t> LogBytes(const std::string& tenant);
  // What a tenant's sessions may store in all (its logs quota); unset: no cap beyond each
  // session's own. Call before the store is shared.
  void set_tenant_log_cap(std::function<uint64_t(const std::string&)> cap) {
    tenant_log_cap_ = std::move(cap);
  }
  // Where committed changes are published for Sessions.Watch (state changes, commands starting
  // and ending, egress denials, removals); unset: nowhere. Call before the store is shared.
  void set_events(SessionEventHub* events) { events_ = events; }
  // Appends output; the oldest entries of the session are dropped beyond the log cap, and the
  // oldest of the tenant's beyond its cap.
  [[nodiscard]] absl::Status AppendLogs(const SessionRecord& s, const std::vector<LogRecord>& logs);
  // Entries after after_seq (and at or after since_ms); with tail > 0 only the last `tail`.
  [[nodiscard]] absl::StatusOr<std::vector<LogRecord>> ReadLogs(const std::string& tenant,
                                                                const std::string& id,
                                                                int64_t after_seq, int64_t since_ms,
                                                                uint32_t tail);

  // Replaces a session's egress grants (with their new version), audited in one transaction.
  [[nodiscard]] absl::Status SetEgress(const Principal& who, const std::string& tenant,
                                       const std::string& id,
                                       const std::vector<EgressGrant>& egress, int64_t version,
                                       const std::string& action, const std::string& outcome);
  // The egress proxy's decisions. Denied and allowed ones are kept apart, at most half of
  // kMaxNetEventsPerSession each: the first kFirstNetEventsKept of each, and the newest.
  [[nodiscard]] absl::Status AppendNetEvents(const SessionRecord& s,
                                             const std::vector<net::NetEvent>& events);
  // Replaces a session's secret bindings (never values), with an audit record.
  [[nodiscard]] absl::Status SetSecrets(const Principal& who, const std::string& tenant,
                                        const std::string& id,
                                        const std::vector<SecretGrant>& secrets,
                                        const std::string& action, const std::string& outcome);
  // Replaces a session's workspace record (its base advanced), with an audit record.
  [[nodiscard]] absl::Status SetWorkspace(const Principal& who, const std::string& tenant,
                                          const std::string& id, const WorkspaceRecord& workspace,
                                          const std::string& action, const std::string& outcome);
  // When each secret of a session was last sent (from its network log), by name.
  [[nodiscard]] absl::StatusOr<std::map<std::string, int64_t>> LastSecretUses(
      const std::string& tenant, const std::string& id);
  [[nodiscard]] absl::StatusOr<std::vector<net::NetEvent>> ReadNetEvents(const std::string& tenant,
                                                                         const std::string& id,
                                                                         int64_t after_seq,
                                                                         uint32_t tail);
  static constexpr int64_t kMaxNetEventsPerSession = 10000;
  static constexpr int64_t kFirstNetEventsKept = 1000;

  [[nodiscard]] absl::Status Audit(const Principal& who, const std::string& tenant,
                                   const std::string& action, const std::string& target,
                                   const std::string& outcome);
  [[nodiscard]] absl::StatusOr<std::vector<AuditRecord>> AuditLog(const std::string& tenant);
  // Every tenant's records from since_ms on: the newest `limit`, oldest first (the operator's
  // `airlock audit`).
  [[nodiscard]] absl::StatusOr<std::vector<AuditRecord>> AuditSince(int64_t since_ms, size_t limit);
  // Records after `seq`, oldest first, at most `limit` (the OTLP log export follows the log).
  [[nodiscard]] absl::StatusOr<std::vector<AuditRecord>> AuditAfter(int64_t seq, size_t limit);
  [[nodiscard]] absl::StatusOr<int64_t> LastAuditSeq();
  // Walks the whole chain: every record's hash against its content and the one before it, no
  // number missing, none removed from the end (SQLite's AUTOINCREMENT counter). Detects what was
  // done to the database alone; someone who rewrites every hash after a change (with this
  // program's code) is not detected by it.
  [[nodiscard]] absl::StatusOr<AuditCheck> VerifyAudit();

 private:
  absl::Status PutSession(const Principal& who, const SessionRecord& s, bool import,
                          const std::string& from_host);
  StateStore(sqlite3* db, uint64_t log_cap_bytes) : db_(db), log_cap_bytes_(log_cap_bytes) {}
  std::function<uint64_t(const std::string&)> tenant_log_cap_;
  SessionEventHub* events_ = nullptr;
  absl::Status Migrate() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AuditLocked(const Principal& who, const std::string& tenant,
                           const std::string& action, const std::string& target,
                           const std::string& outcome) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Chains r (its seq and hash are filled in) after the last record.
  absl::Status AppendAudit(AuditRecord r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Migration to version 8: hashes for the records written before there were any.
  absl::Status ChainExistingAudit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  // When each (caller tenant, session) lookup of another tenant's session was last audited.
  std::map<std::string, int64_t> denials_ ABSL_GUARDED_BY(mu_);
  uint64_t log_cap_bytes_;
};

int64_t NowUnixMs();

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_STATE_STORE_H_
