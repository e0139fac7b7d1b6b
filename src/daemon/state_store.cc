#include "src/daemon/state_store.h"

#include "src/daemon/session_events.h"

namespace airlock {
namespace {

// Version 1. Later versions append statements to kMigrations; never edit a shipped one.
constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE tenants(
  id TEXT PRIMARY KEY,
  created_ms INTEGER NOT NULL);
CREATE TABLE sessions(
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL REFERENCES tenants(id),
  image TEXT NOT NULL,
  image_digest TEXT NOT NULL,
  state INTEGER NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  created_ms INTEGER NOT NULL,
  last_used_ms INTEGER NOT NULL,
  vcpus INTEGER NOT NULL,
  memory_bytes INTEGER NOT NULL,
  pids INTEGER NOT NULL,
  disk_bytes INTEGER NOT NULL,
  ttl_seconds INTEGER NOT NULL,
  hostname TEXT NOT NULL,
  pid INTEGER NOT NULL DEFAULT 0,
  log_bytes INTEGER NOT NULL DEFAULT 0);
CREATE INDEX sessions_by_tenant ON sessions(tenant, created_ms);
CREATE TABLE execs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  tenant TEXT NOT NULL,
  argv TEXT NOT NULL,
  started_ms INTEGER NOT NULL,
  ended_ms INTEGER,
  exit_code INTEGER,
  message TEXT);
CREATE TABLE output(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  tenant TEXT NOT NULL,
  exec_id INTEGER NOT NULL,
  unix_ms INTEGER NOT NULL,
  stream INTEGER NOT NULL,
  data BLOB NOT NULL);
CREATE INDEX output_by_session ON output(session_id, seq);
CREATE TABLE audit(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  unix_ms INTEGER NOT NULL,
  principal TEXT NOT NULL,
  tenant TEXT NOT NULL,
  action TEXT NOT NULL,
  target TEXT NOT NULL,
  outcome TEXT NOT NULL);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
)sql",
    // Version 2: sessions pause themselves after this many idle seconds (0: never).
    R"sql(
ALTER TABLE sessions ADD COLUMN idle_timeout_seconds INTEGER NOT NULL DEFAULT 300;
)sql",
    // Version 3: egress. A session's grants, one per line: RULE \t SOURCE \t EXPIRES_MS \t
    // EFFECT (allow|deny), the version of that policy, and what its proxy decided.
    R"sql(
ALTER TABLE sessions ADD COLUMN egress TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN egress_version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE sessions ADD COLUMN net_bytes_per_second INTEGER NOT NULL DEFAULT 0;
CREATE TABLE net_events(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  tenant TEXT NOT NULL,
  unix_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  address TEXT NOT NULL,
  port INTEGER NOT NULL,
  allowed INTEGER NOT NULL,
  rule TEXT NOT NULL,
  reason TEXT NOT NULL,
  bytes_out INTEGER NOT NULL,
  bytes_in INTEGER NOT NULL);
CREATE INDEX net_events_by_session ON net_events(session_id, seq);
)sql",
    // Version 4: secrets. A session's bindings, one per line: SPEC \t PLACEHOLDER (no values).
    R"sql(
ALTER TABLE sessions ADD COLUMN secrets TEXT NOT NULL DEFAULT '';
)sql",
    // Version 5: workspaces. Where the project came from, C-escaped fields joined by tabs
    // (path, head, branch, tree digest, files, bytes, synced); empty: none.
    R"sql(
ALTER TABLE sessions ADD COLUMN workspace TEXT NOT NULL DEFAULT '';
)sql",
    // Version 6: a tenant's stored output is capped in all (its logs quota): oldest first.
    R"sql(
CREATE INDEX output_by_tenant ON output(tenant, seq);
)sql",
    // Version 7: the timeline. Each command's exact argv (NUL-terminated each), user, working
    // directory and terminal; what coding agents in a session said and did (from their own
    // transcripts); audit records found by their session.
    R"sql(
ALTER TABLE execs ADD COLUMN args BLOB NOT NULL DEFAULT x'';
ALTER TABLE execs ADD COLUMN user TEXT NOT NULL DEFAULT '';
ALTER TABLE execs ADD COLUMN cwd TEXT NOT NULL DEFAULT '';
ALTER TABLE execs ADD COLUMN tty INTEGER NOT NULL DEFAULT 0;
CREATE INDEX execs_by_session ON execs(session_id, id);
CREATE INDEX audit_by_target ON audit(target, seq);
CREATE TABLE agent_events(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  tenant TEXT NOT NULL,
  unix_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  agent TEXT NOT NULL,
  exec_id INTEGER NOT NULL,
  tool_id TEXT NOT NULL,
  tool TEXT NOT NULL,
  text BLOB NOT NULL);
CREATE INDEX agent_events_by_session ON agent_events(session_id, seq);
)sql",
    // Version 8: the audit log is a hash chain (AuditHash). The records already there are
    // chained by Migrate right after this, with the update trigger lifted meanwhile.
    R"sql(
DROP TRIGGER audit_no_update;
ALTER TABLE audit ADD COLUMN hash TEXT NOT NULL DEFAULT '';
)sql",
    // Version 9: a denial seen again is counted on its first row (repeats, and when the last
    // was), so that a guest repeating names cannot push other evidence out.
    R"sql(
ALTER TABLE net_events ADD COLUMN repeats INTEGER NOT NULL DEFAULT 0;
ALTER TABLE net_events ADD COLUMN last_ms INTEGER NOT NULL DEFAULT 0;
CREATE INDEX net_events_denied ON net_events(session_id, name, port) WHERE allowed = 0;
)sql",
    // Version 10: guest ports exposed through the HTTP gateway, each with its token (empty:
    // public).
    R"sql(
CREATE TABLE exposures(
  session_id TEXT NOT NULL REFERENCES sessions(id),
  port INTEGER NOT NULL,
  tenant TEXT NOT NULL,
  public INTEGER NOT NULL,
  token TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  PRIMARY KEY(session_id, port));
)sql",
    // Version 11: API keys for the gateway's E2B-compatible API (their SHA-256 only), and what
    // that API keeps of the sessions it made (metadata and environment as JSON objects).
    R"sql(
CREATE TABLE api_keys(
  hash TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  UNIQUE(tenant, name));
CREATE TABLE e2b_sandboxes(
  session_id TEXT PRIMARY KEY REFERENCES sessions(id),
  tenant TEXT NOT NULL,
  template_id TEXT NOT NULL,
  metadata TEXT NOT NULL,
  env_vars TEXT NOT NULL);
)sql",
    // Version 12: each E2B sandbox's envd access token, the key that made it, and the token
    // its ports need (empty: they are public).
    R"sql(
ALTER TABLE e2b_sandboxes ADD COLUMN access_token TEXT NOT NULL DEFAULT '';
ALTER TABLE e2b_sandboxes ADD COLUMN api_key TEXT NOT NULL DEFAULT '';
ALTER TABLE e2b_sandboxes ADD COLUMN traffic_token TEXT NOT NULL DEFAULT '';
)sql",
    // Version 13: snapshots taken through the E2B API are paused sessions kept as templates:
    // the sandbox each was taken of, and its name (empty: it goes by its session's id).
    R"sql(
ALTER TABLE e2b_sandboxes ADD COLUMN snapshot_of TEXT NOT NULL DEFAULT '';
ALTER TABLE e2b_sandboxes ADD COLUMN snapshot_name TEXT NOT NULL DEFAULT '';
)sql",
    // Version 14: volumes (named disks that outlive sessions), and the ones each session
    // attaches (by slot; who holds a volume is read from these).
    R"sql(
CREATE TABLE volumes(
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  size_bytes INTEGER NOT NULL,
  read_only INTEGER NOT NULL,
  origin TEXT NOT NULL,
  generation INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  busy TEXT NOT NULL DEFAULT '',
  UNIQUE(tenant, name));
ALTER TABLE sessions ADD COLUMN volumes TEXT NOT NULL DEFAULT '';
)sql",
    // Version 15: a session paused, not stopped, when its time to live runs out (E2B's
    // autoPause).
    R"sql(
ALTER TABLE sessions ADD COLUMN pause_at_ttl INTEGER NOT NULL DEFAULT 0;
)sql",
    // Version 16: the activity record (what the guest's PID 1 saw programs do: processes
    // started and ended, files read, written, made, removed and renamed), argv NUL-terminated
    // each, and the bytes each row counts against its session's cap; and per session, what it
    // holds and how many records its caps dropped.
    R"sql(
CREATE TABLE activity(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  tenant TEXT NOT NULL,
  unix_ms INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  exec_id INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  parent INTEGER NOT NULL,
  code INTEGER NOT NULL,
  process BLOB NOT NULL,
  path BLOB NOT NULL,
  target BLOB NOT NULL,
  argv BLOB NOT NULL,
  size INTEGER NOT NULL);
CREATE INDEX activity_by_session ON activity(session_id, seq);
CREATE TABLE activity_usage(
  session_id TEXT PRIMARY KEY REFERENCES sessions(id),
  tenant TEXT NOT NULL,
  rows INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  dropped INTEGER NOT NULL);
)sql",
};

// Version 8 chains the audit records already there (AuditLog::ChainExisting) right after its
// statements.
constexpr size_t kAuditChainVersion = 8;

}  // namespace

absl::StatusOr<std::unique_ptr<StateStore>> StateStore::Open(const std::string& path,
                                                             uint64_t log_cap_bytes) {
  std::vector<SqliteDb::Migration> migrations;
  for (const char* sql : kMigrations) migrations.push_back({sql, nullptr});
  migrations[kAuditChainVersion - 1].after = AuditLog::ChainExisting;
  static_assert(kSchemaVersion == sizeof(kMigrations) / sizeof(kMigrations[0]),
                "a migration is a new schema version");
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path, migrations);
  if (!db.ok()) return db.status();
  return std::unique_ptr<StateStore>(new StateStore(*std::move(db), log_cap_bytes));
}

StateStore::StateStore(std::unique_ptr<SqliteDb> db, uint64_t log_cap_bytes)
    : db_(std::move(db)),
      sessions_(*db_),
      commands_(*db_, log_cap_bytes),
      net_events_(*db_),
      audit_(*db_),
      exposures_(*db_),
      api_keys_(*db_),
      volumes_(*db_),
      activity_(*db_) {}

void StateStore::set_events(SessionEventHub* events) {
  events_ = events;
  sessions_.set_events(events);
  commands_.set_events(events);
  net_events_.set_events(events);
}

}  // namespace airlock
