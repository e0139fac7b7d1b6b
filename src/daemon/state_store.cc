#include "src/daemon/state_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "src/daemon/session_events.h"
#include "src/image/image_store.h"

namespace airlock {

absl::Status CheckSessionId(std::string_view id) {
  bool ok = id.size() == kSessionIdLength;
  for (char ch : id) ok = ok && ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'));
  if (ok) return absl::OkStatus();
  if (id.empty()) {
    return absl::InvalidArgumentError("give a session id (as `airlock ls` lists them)");
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", absl::CHexEscape(std::string(id.substr(0, 40))), id.size() > 40 ? "...\"" : "\"",
      " is not a session id: those are 12 lowercase hex digits, as `airlock ls` lists them"));
}
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
};
static_assert(StateStore::kSchemaVersion == sizeof(kMigrations) / sizeof(kMigrations[0]),
              "a migration is a new schema version");
constexpr int64_t kAuditChainVersion = 8;
constexpr char kAuditNoUpdate[] = R"sql(
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
)sql";

std::string EncodeEgress(const std::vector<EgressGrant>& grants) {
  std::string out;
  for (const EgressGrant& g : grants) {
    absl::StrAppend(&out, g.rule, "\t", g.source, "\t", g.expires_ms, "\t",
                    g.deny ? "deny" : "allow", "\n");
  }
  return out;
}

std::vector<EgressGrant> DecodeEgress(const std::string& text) {
  std::vector<EgressGrant> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    EgressGrant g;
    if (f.size() != 4 || !absl::SimpleAtoi(f[2], &g.expires_ms)) continue;
    g.rule = f[0];
    g.source = f[1];
    g.deny = f[3] == "deny";
    out.push_back(std::move(g));
  }
  return out;
}

std::string EncodeSecrets(const std::vector<SecretGrant>& grants) {
  std::string out;
  for (const SecretGrant& g : grants) {
    absl::StrAppend(&out, secrets::FormatSecretSpec(g.spec), "\t", g.placeholder, "\n");
  }
  return out;
}

std::vector<SecretGrant> DecodeSecrets(const std::string& text) {
  std::vector<SecretGrant> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (f.size() != 2) continue;
    absl::StatusOr<secrets::SecretSpec> spec = secrets::ParseSecretSpec(f[0]);
    if (!spec.ok()) continue;  // written by an airlockd that read specs differently
    out.push_back({*std::move(spec), f[1]});
  }
  return out;
}

std::string EncodeWorkspace(const WorkspaceRecord& w) {
  if (!w.present()) return "";
  return absl::StrCat(absl::CEscape(w.path), "\t", absl::CEscape(w.head), "\t",
                      absl::CEscape(w.branch), "\t", absl::CEscape(w.tree_digest), "\t", w.files,
                      "\t", w.bytes, "\t", w.synced_ms);
}

WorkspaceRecord DecodeWorkspace(const std::string& text) {
  WorkspaceRecord w;
  std::vector<std::string> f = absl::StrSplit(text, '\t');
  if (f.size() != 7) return w;
  if (!absl::CUnescape(f[0], &w.path) || !absl::CUnescape(f[1], &w.head) ||
      !absl::CUnescape(f[2], &w.branch) || !absl::CUnescape(f[3], &w.tree_digest) ||
      !absl::SimpleAtoi(f[4], &w.files) || !absl::SimpleAtoi(f[5], &w.bytes) ||
      !absl::SimpleAtoi(f[6], &w.synced_ms)) {
    return WorkspaceRecord();
  }
  return w;
}

}  // namespace

std::string EncodeSessionRecord(const SessionRecord& s) {
  std::string out;
  auto field = [&out](absl::string_view name, const auto& value) {
    absl::StrAppend(&out, name, "\t", absl::CEscape(absl::StrCat(value)), "\n");
  };
  field("id", s.id);
  field("tenant", s.tenant);
  field("image", s.image);
  field("image_digest", s.image_digest);
  field("created_ms", s.created_ms);
  field("last_used_ms", s.last_used_ms);
  field("vcpus", s.limits.vcpus);
  field("memory_bytes", s.limits.memory_bytes);
  field("pids", s.limits.pids);
  field("disk_bytes", s.limits.disk_bytes);
  field("ttl_seconds", s.limits.ttl_seconds);
  field("idle_timeout_seconds", s.limits.idle_timeout_seconds);
  field("net_bytes_per_second", s.limits.net_bytes_per_second);
  field("hostname", s.hostname);
  field("egress", EncodeEgress(s.egress));
  field("egress_version", s.egress_version);
  field("secrets", EncodeSecrets(s.secrets));
  field("workspace", EncodeWorkspace(s.workspace));
  return out;
}

absl::StatusOr<SessionRecord> DecodeSessionRecord(absl::string_view text) {
  std::map<std::string, std::string, std::less<>> fields;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, '\t');
    std::string value;
    if (!absl::CUnescape(kv.second, &value) || !fields.emplace(kv.first, value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("a session record has a bad or repeated field ", absl::CEscape(kv.first)));
    }
  }
  SessionRecord s;
  bool ok = true;
  auto text_field = [&](absl::string_view name, std::string* out) {
    auto it = fields.find(name);
    if (it == fields.end()) {
      ok = false;
      return;
    }
    *out = it->second;
  };
  auto number = [&](absl::string_view name, auto* out) {
    auto it = fields.find(name);
    ok = ok && it != fields.end() && absl::SimpleAtoi(it->second, out);
  };
  std::string egress, secrets, workspace;
  text_field("id", &s.id);
  text_field("tenant", &s.tenant);
  text_field("image", &s.image);
  text_field("image_digest", &s.image_digest);
  number("created_ms", &s.created_ms);
  number("last_used_ms", &s.last_used_ms);
  number("vcpus", &s.limits.vcpus);
  number("memory_bytes", &s.limits.memory_bytes);
  number("pids", &s.limits.pids);
  number("disk_bytes", &s.limits.disk_bytes);
  number("ttl_seconds", &s.limits.ttl_seconds);
  number("idle_timeout_seconds", &s.limits.idle_timeout_seconds);
  number("net_bytes_per_second", &s.limits.net_bytes_per_second);
  text_field("hostname", &s.hostname);
  text_field("egress", &egress);
  number("egress_version", &s.egress_version);
  text_field("secrets", &secrets);
  text_field("workspace", &workspace);
  if (!ok || fields.size() != 18 || !CheckSessionId(s.id).ok() || s.tenant.empty()) {
    return absl::InvalidArgumentError("a session record is missing a field or has a bad one");
  }
  s.egress = DecodeEgress(egress);
  s.secrets = DecodeSecrets(secrets);
  s.workspace = DecodeWorkspace(workspace);
  s.state = SessionState::kPaused;
  return s;
}

namespace {

// The database's last error: with what to do when its disk is full (nothing was written).
absl::Status DbError(sqlite3* db, absl::string_view what, absl::StatusCode code) {
  if (sqlite3_errcode(db) == SQLITE_FULL) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": the disk that holds airlockd's state is full (",
                     sqlite3_db_filename(db, "main"), "); free some space there and try again"));
  }
  return absl::Status(code, absl::StrCat(what, ": ", sqlite3_errmsg(db)));
}

// A prepared statement, finalized on destruction.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt& Bind(int i, int64_t v) {
    if (ok()) rc_ = sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& Bind(int i, const std::string& v) {
    if (ok())
      rc_ = sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindBlob(int i, const std::string& v) {
    if (ok())
      rc_ = sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  // True while a row is available.
  bool Step() {
    if (!ok()) return false;
    rc_ = sqlite3_step(stmt_);
    if (rc_ == SQLITE_ROW) return true;
    if (rc_ == SQLITE_DONE) rc_ = SQLITE_OK;
    return false;
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  std::string Text(int col) {
    const void* p = sqlite3_column_blob(stmt_, col);
    int n = sqlite3_column_bytes(stmt_, col);
    return p ? std::string(static_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
  }
  bool ok() const { return rc_ == SQLITE_OK || rc_ == SQLITE_ROW; }
  absl::Status status() const {
    if (ok()) return absl::OkStatus();
    return DbError(db_, "state database", absl::StatusCode::kInternal);
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

// BEGIN IMMEDIATE now; ROLLBACK unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {
    ok_ = sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  ~Transaction() {
    if (ok_ && !done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  absl::Status Begun() const {
    return ok_ ? absl::OkStatus() : DbError(db_, "state database", absl::StatusCode::kUnavailable);
  }
  absl::Status Commit() {
    if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
      return DbError(db_, "state database commit", absl::StatusCode::kInternal);
    }
    done_ = true;
    return absl::OkStatus();
  }

 private:
  sqlite3* db_;
  bool ok_ = false;
  bool done_ = false;
};

constexpr char kSessionColumns[] =
    "id, tenant, image, image_digest, state, reason, created_ms, last_used_ms, vcpus, "
    "memory_bytes, pids, disk_bytes, ttl_seconds, hostname, pid, idle_timeout_seconds, egress, "
    "egress_version, net_bytes_per_second, secrets, workspace";

SessionRecord ReadSession(Stmt& q) {
  SessionRecord s;
  s.id = q.Text(0);
  s.tenant = q.Text(1);
  s.image = q.Text(2);
  s.image_digest = q.Text(3);
  s.state = static_cast<SessionState>(q.Int(4));
  s.reason = q.Text(5);
  s.created_ms = q.Int(6);
  s.last_used_ms = q.Int(7);
  s.limits.vcpus = static_cast<uint32_t>(q.Int(8));
  s.limits.memory_bytes = static_cast<uint64_t>(q.Int(9));
  s.limits.pids = static_cast<uint32_t>(q.Int(10));
  s.limits.disk_bytes = static_cast<uint64_t>(q.Int(11));
  s.limits.ttl_seconds = static_cast<uint64_t>(q.Int(12));
  s.hostname = q.Text(13);
  s.pid = q.Int(14);
  s.limits.idle_timeout_seconds = static_cast<uint64_t>(q.Int(15));
  s.egress = DecodeEgress(q.Text(16));
  s.egress_version = q.Int(17);
  s.limits.net_bytes_per_second = static_cast<uint64_t>(q.Int(18));
  s.secrets = DecodeSecrets(q.Text(19));
  s.workspace = DecodeWorkspace(q.Text(20));
  return s;
}

}  // namespace

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* SessionStateName(SessionState state) {
  switch (state) {
    case SessionState::kCreating:
      return "creating";
    case SessionState::kRunning:
      return "running";
    case SessionState::kStopped:
      return "stopped";
    case SessionState::kFailed:
      return "failed";
    case SessionState::kPaused:
      return "paused";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<StateStore>> StateStore::Open(const std::string& path,
                                                             uint64_t log_cap_bytes) {
  // Create it 0600 ourselves: sqlite would use the umask.
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the state database ", path, ": ", strerror(errno)));
  }
  close(fd);
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr) !=
      SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::FailedPreconditionError(absl::StrCat("cannot open ", path, ": ", message));
  }
  std::unique_ptr<StateStore> store(new StateStore(db, log_cap_bytes));
  sqlite3_busy_timeout(db, 5000);
  {
    absl::MutexLock lock(&store->mu_);
    for (const char* pragma :
         {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
      if (absl::Status s = store->Exec(pragma); !s.ok()) return s;
    }
  }
  if (absl::Status s = store->Migrate(); !s.ok()) return s;
  return store;
}

StateStore::~StateStore() { sqlite3_close(db_); }

absl::Status StateStore::Exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return absl::InternalError(absl::StrCat("state database: ", message));
  }
  return absl::OkStatus();
}

std::string AuditHash(const std::string& previous, const AuditRecord& r) {
  // Each field with its length first, so that no two records share an encoding.
  std::string bytes = "airlock-audit-v1\n" + previous;
  for (const std::string& field :
       {absl::StrCat(r.unix_ms), r.principal, r.tenant, r.action, r.target, r.outcome}) {
    absl::StrAppend(&bytes, "\n", field.size(), ":", field);
  }
  return Sha256String(bytes);
}

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

absl::Status StateStore::ChainExistingAudit() {
  std::vector<AuditRecord> records;
  Stmt q(db_, absl::StrCat("SELECT ", kAuditColumns, " FROM audit ORDER BY seq").c_str());
  while (q.Step()) records.push_back(ReadAudit(q));
  if (!q.ok()) return q.status();
  std::string previous;
  for (const AuditRecord& r : records) {
    previous = AuditHash(previous, r);
    Stmt u(db_, "UPDATE audit SET hash = ? WHERE seq = ?");
    u.Bind(1, previous).Bind(2, r.seq).Step();
    if (!u.ok()) return u.status();
  }
  return Exec(kAuditNoUpdate);
}

absl::Status StateStore::Migrate() {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status s = tx.Begun(); !s.ok()) return s;
  Stmt version(db_, "PRAGMA user_version");
  int64_t current = version.Step() ? version.Int(0) : 0;
  constexpr int64_t known = sizeof(kMigrations) / sizeof(kMigrations[0]);
  if (current > known) {
    return absl::FailedPreconditionError(absl::StrCat("the state database has schema version ",
                                                      current, ", newer than this airlockd (",
                                                      known, "); run the newer airlockd"));
  }
  for (int64_t v = current; v < known; ++v) {
    if (absl::Status s = Exec(kMigrations[v]); !s.ok()) return s;
    if (v + 1 == kAuditChainVersion) {
      if (absl::Status s = ChainExistingAudit(); !s.ok()) return s;
    }
  }
  if (absl::Status s = Exec(absl::StrCat("PRAGMA user_version=", known).c_str()); !s.ok()) return s;
  return tx.Commit();
}

absl::Status StateStore::AuditLocked(const Principal& who, const std::string& tenant,
                                     const std::string& action, const std::string& target,
                                     const std::string& outcome) {
  return AppendAudit({.unix_ms = NowUnixMs(),
                      .principal = who.Name(),
                      .tenant = tenant,
                      .action = action,
                      .target = target,
                      .outcome = outcome});
}

absl::Status StateStore::AppendAudit(AuditRecord r) {
  // The one connection, under mu_: nothing comes between reading the last hash and the insert.
  Stmt last(db_, "SELECT hash FROM audit ORDER BY seq DESC LIMIT 1");
  std::string previous = last.Step() ? last.Text(0) : "";
  if (!last.ok()) return last.status();
  r.hash = AuditHash(previous, r);
  Stmt q(db_,
         "INSERT INTO audit(unix_ms, principal, tenant, action, target, outcome, hash) "
         "VALUES(?,?,?,?,?,?,?)");
  q.Bind(1, r.unix_ms).Bind(2, r.principal).Bind(3, r.tenant).Bind(4, r.action);
  q.Bind(5, r.target).Bind(6, r.outcome).Bind(7, r.hash).Step();
  return q.status();
}

absl::StatusOr<std::vector<AuditRecord>> StateStore::AuditSince(int64_t since_ms, size_t limit) {
  absl::MutexLock lock(&mu_);
  // The newest `limit`, oldest first.
  Stmt q(db_, absl::StrCat("SELECT * FROM (SELECT ", kAuditColumns,
                           " FROM audit WHERE unix_ms >= ? ORDER BY seq DESC LIMIT ?) ORDER BY seq")
                  .c_str());
  q.Bind(1, since_ms).Bind(2, static_cast<int64_t>(limit));
  std::vector<AuditRecord> out;
  while (q.Step()) out.push_back(ReadAudit(q));
  if (!q.ok()) return q.status();
  return out;
}

absl::StatusOr<std::vector<AuditRecord>> StateStore::AuditAfter(int64_t seq, size_t limit) {
  absl::MutexLock lock(&mu_);
  Stmt q(db_,
         absl::StrCat("SELECT ", kAuditColumns, " FROM audit WHERE seq > ? ORDER BY seq LIMIT ?")
             .c_str());
  q.Bind(1, seq).Bind(2, static_cast<int64_t>(limit));
  std::vector<AuditRecord> out;
  while (q.Step()) out.push_back(ReadAudit(q));
  if (!q.ok()) return q.status();
  return out;
}

absl::StatusOr<int64_t> StateStore::LastAuditSeq() {
  absl::MutexLock lock(&mu_);
  Stmt q(db_, "SELECT COALESCE(MAX(seq), 0) FROM audit");
  if (q.Step()) return q.Int(0);
  return q.status();
}

absl::StatusOr<AuditCheck> StateStore::VerifyAudit() {
  absl::MutexLock lock(&mu_);
  // A read transaction: one consistent view of the log and its sequence, however long it is.
  Transaction tx(db_);
  if (absl::Status s = tx.Begun(); !s.ok()) return s;
  AuditCheck check;
  Stmt q(db_, absl::StrCat("SELECT ", kAuditColumns, " FROM audit ORDER BY seq").c_str());
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
  Stmt top(db_, "SELECT seq FROM sqlite_sequence WHERE name = 'audit'");
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

absl::Status StateStore::Audit(const Principal& who, const std::string& tenant,
                               const std::string& action, const std::string& target,
                               const std::string& outcome) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status s = tx.Begun(); !s.ok()) return s;
  if (absl::Status s = AuditLocked(who, tenant, action, target, outcome); !s.ok()) return s;
  return tx.Commit();
}

absl::Status StateStore::CreateSession(const Principal& who, const SessionRecord& s) {
  return PutSession(who, s, /*import=*/false, "");
}

absl::Status StateStore::ImportSession(const Principal& who, const SessionRecord& s,
                                       const std::string& from_host) {
  return PutSession(who, s, /*import=*/true, from_host);
}

absl::Status StateStore::PutSession(const Principal& who, const SessionRecord& s, bool import,
                                    const std::string& from_host) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt tenant(db_, "INSERT OR IGNORE INTO tenants(id, created_ms) VALUES(?, ?)");
  tenant.Bind(1, s.tenant).Bind(2, NowUnixMs()).Step();
  if (!tenant.ok()) return tenant.status();
  // An import replaces every field but the tenant (the session's logs and commands stay).
  std::string sql = absl::StrCat("INSERT INTO sessions(", kSessionColumns,
                                 ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  if (import) {
    absl::StrAppend(&sql, " ON CONFLICT(id) DO UPDATE SET ");
    bool first = true;
    for (absl::string_view column : absl::StrSplit(kSessionColumns, ", ")) {
      if (column == "id" || column == "tenant") continue;
      absl::StrAppend(&sql, first ? "" : ", ", column, " = excluded.", column);
      first = false;
    }
    absl::StrAppend(&sql, " WHERE sessions.tenant = excluded.tenant");
  }
  Stmt q(db_, sql.c_str());
  q.Bind(1, s.id).Bind(2, s.tenant).Bind(3, s.image).Bind(4, s.image_digest);
  q.Bind(5, static_cast<int64_t>(s.state)).Bind(6, s.reason).Bind(7, s.created_ms);
  q.Bind(8, s.last_used_ms).Bind(9, s.limits.vcpus);
  q.Bind(10, static_cast<int64_t>(s.limits.memory_bytes)).Bind(11, s.limits.pids);
  q.Bind(12, static_cast<int64_t>(s.limits.disk_bytes));
  q.Bind(13, static_cast<int64_t>(s.limits.ttl_seconds)).Bind(14, s.hostname).Bind(15, s.pid);
  q.Bind(16, static_cast<int64_t>(s.limits.idle_timeout_seconds));
  q.Bind(17, EncodeEgress(s.egress)).Bind(18, s.egress_version);
  q.Bind(19, static_cast<int64_t>(s.limits.net_bytes_per_second));
  q.Bind(20, EncodeSecrets(s.secrets)).Bind(21, EncodeWorkspace(s.workspace));
  q.Step();
  if (!q.ok()) return q.status();
  if (import && sqlite3_changes(db_) != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", s.id, " belongs to another tenant on this host"));
  }
  std::string outcome = "ok";
  if (import) outcome = absl::StrCat("from host ", from_host);
  if (s.workspace.present()) {
    absl::StrAppend(&outcome, "; workspace ", s.workspace.path,
                    s.workspace.head.empty() ? "" : " at " + s.workspace.head, " (",
                    s.workspace.files, " files, ", s.workspace.tree_digest, ")");
  }
  if (absl::Status st =
          AuditLocked(who, s.tenant, import ? "session.import" : "session.create", s.id, outcome);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  if (events_) {
    events_->Publish({.kind = SessionEvent::Kind::kState,
                      .tenant = s.tenant,
                      .session_id = s.id,
                      .unix_ms = NowUnixMs(),
                      .state = s.state,
                      .reason = s.reason});
  }
  return absl::OkStatus();
}

absl::Status StateStore::SetSessionState(const Principal& who, const std::string& tenant,
                                         const std::string& id, SessionState state,
                                         const std::string& reason, int64_t pid,
                                         const std::string& action) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt q(db_, "UPDATE sessions SET state = ?, reason = ?, pid = ? WHERE id = ? AND tenant = ?");
  q.Bind(1, static_cast<int64_t>(state)).Bind(2, reason).Bind(3, pid).Bind(4, id).Bind(5, tenant);
  q.Step();
  if (!q.ok()) return q.status();
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(absl::StrCat("no session ", id));
  std::string outcome = absl::StrCat(SessionStateName(state), reason.empty() ? "" : ": ", reason);
  if (absl::Status st = AuditLocked(who, tenant, action, id, outcome); !st.ok()) return st;
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  if (events_) {
    events_->Publish({.kind = SessionEvent::Kind::kState,
                      .tenant = tenant,
                      .session_id = id,
                      .unix_ms = NowUnixMs(),
                      .state = state,
                      .reason = reason});
  }
  return absl::OkStatus();
}

absl::Status StateStore::DeleteSession(const Principal& who, const std::string& tenant,
                                       const std::string& id) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  for (const char* sql : {"DELETE FROM output WHERE session_id = ? AND tenant = ?",
                          "DELETE FROM net_events WHERE session_id = ? AND tenant = ?",
                          "DELETE FROM agent_events WHERE session_id = ? AND tenant = ?",
                          "DELETE FROM execs WHERE session_id = ? AND tenant = ?",
                          "DELETE FROM sessions WHERE id = ? AND tenant = ?"}) {
    Stmt q(db_, sql);
    q.Bind(1, id).Bind(2, tenant).Step();
    if (!q.ok()) return q.status();
  }
  if (absl::Status st = AuditLocked(who, tenant, "session.delete", id, "ok"); !st.ok()) return st;
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  if (events_) {
    events_->Publish({.kind = SessionEvent::Kind::kRemoved,
                      .tenant = tenant,
                      .session_id = id,
                      .unix_ms = NowUnixMs()});
  }
  return absl::OkStatus();
}

absl::Status StateStore::TouchSession(const std::string& id, int64_t unix_ms) {
  absl::MutexLock lock(&mu_);
  Stmt q(db_, "UPDATE sessions SET last_used_ms = ? WHERE id = ?");
  q.Bind(1, unix_ms).Bind(2, id).Step();
  return q.status();
}

absl::StatusOr<SessionRecord> StateStore::GetSession(const std::string& tenant,
                                                     const std::string& id) {
  absl::MutexLock lock(&mu_);
  Stmt q(db_, absl::StrCat("SELECT ", kSessionColumns, " FROM sessions WHERE id = ? AND tenant = ?")
                  .c_str());
  q.Bind(1, id).Bind(2, tenant);
  if (q.Step()) return ReadSession(q);
  if (!q.ok()) return q.status();
  // Another tenant's session is not found for the caller, and audited for its owner: at most once
  // a minute per caller and session, so that asking again and again cannot fill the log.
  Stmt owner(db_, "SELECT tenant FROM sessions WHERE id = ?");
  owner.Bind(1, id);
  if (owner.Step()) {
    int64_t now = NowUnixMs();
    std::string key = absl::StrCat(tenant, "\n", id);
    auto last = denials_.find(key);
    if (last == denials_.end() || now - last->second >= 60000) {
      if (denials_.size() >= 10000) denials_.clear();
      denials_[key] = now;
      absl::Status audited = AppendAudit({.unix_ms = now,
                                          .principal = tenant,
                                          .tenant = owner.Text(0),
                                          .action = "session.lookup",
                                          .target = id,
                                          .outcome = "denied: the session is another tenant's"});
      if (!audited.ok()) return audited;
    }
  }
  return absl::NotFoundError(absl::StrCat("no session ", id, "; `airlock ls` lists your sessions"));
}

absl::StatusOr<std::vector<SessionRecord>> StateStore::ListSessions(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  Stmt q(db_, absl::StrCat("SELECT ", kSessionColumns,
                           " FROM sessions WHERE tenant = ? ORDER BY created_ms DESC, id")
                  .c_str());
  q.Bind(1, tenant);
  std::vector<SessionRecord> out;
  while (q.Step()) out.push_back(ReadSession(q));
  if (!q.ok()) return q.status();
  return out;
}

absl::StatusOr<std::vector<SessionRecord>> StateStore::ListEveryTenantsSessions() {
  absl::MutexLock lock(&mu_);
  Stmt q(db_, absl::StrCat("SELECT ", kSessionColumns,
                           " FROM sessions ORDER BY tenant, created_ms DESC, id")
                  .c_str());
  std::vector<SessionRecord> out;
  while (q.Step()) out.push_back(ReadSession(q));
  if (!q.ok()) return q.status();
  return out;
}

absl::StatusOr<std::string> StateStore::SessionTenant(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Stmt q(db_, "SELECT tenant FROM sessions WHERE id = ?");
  q.Bind(1, id);
  if (q.Step()) return q.Text(0);
  if (!q.ok()) return q.status();
  return absl::NotFoundError(absl::StrCat("no session ", id));
}

absl::StatusOr<std::vector<SessionRecord>> StateStore::SessionsInState(
    std::vector<SessionState> states) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> numbers;
  for (SessionState s : states) numbers.push_back(std::to_string(static_cast<int>(s)));
  Stmt q(db_, absl::StrCat("SELECT ", kSessionColumns, " FROM sessions WHERE state IN (",
                           absl::StrJoin(numbers, ","), ")")
                  .c_str());
  std::vector<SessionRecord> out;
  while (q.Step()) out.push_back(ReadSession(q));
  if (!q.ok()) return q.status();
  return out;
}

absl::StatusOr<int64_t> StateStore::StartExec(const Principal& who, const SessionRecord& s,
                                              const ExecRecord& e) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  std::string command = absl::StrJoin(e.argv, " ");
  std::string args;
  for (const std::string& a : e.argv) args.append(a).push_back('\0');
  Stmt q(db_,
         "INSERT INTO execs(session_id, tenant, argv, started_ms, args, user, cwd, tty) "
         "VALUES(?,?,?,?,?,?,?,?)");
  q.Bind(1, s.id).Bind(2, s.tenant).Bind(3, command).Bind(4, NowUnixMs()).BindBlob(5, args);
  q.Bind(6, e.user).Bind(7, e.cwd).Bind(8, e.tty ? 1 : 0).Step();
  if (!q.ok()) return q.status();
  int64_t exec_id = sqlite3_last_insert_rowid(db_);
  Stmt touch(db_, "UPDATE sessions SET last_used_ms = ? WHERE id = ?");
  touch.Bind(1, NowUnixMs()).Bind(2, s.id).Step();
  if (!touch.ok()) return touch.status();
  if (absl::Status st = AuditLocked(who, s.tenant, "session.exec", s.id,
                                    absl::StrCat("exec ", exec_id, ": ", command.substr(0, 200)));
      !st.ok()) {
    return st;
  }
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  if (events_) {
    events_->Publish({.kind = SessionEvent::Kind::kExecStart,
                      .tenant = s.tenant,
                      .session_id = s.id,
                      .unix_ms = NowUnixMs(),
                      .exec_id = exec_id,
                      .argv = e.argv});
  }
  return exec_id;
}

absl::StatusOr<std::vector<ExecRecord>> StateStore::ReadExecs(const std::string& tenant,
                                                              const std::string& id) {
  absl::MutexLock lock(&mu_);
  Stmt q(db_,
         "SELECT id, argv, args, user, cwd, tty, started_ms, IFNULL(ended_ms, -1), "
         "IFNULL(exit_code, 0), IFNULL(message, '') FROM execs WHERE session_id = ? AND "
         "tenant = ? ORDER BY id LIMIT ?");
  q.Bind(1, id).Bind(2, tenant).Bind(3, kMaxTimelineRows);
  std::vector<ExecRecord> out;
  while (q.Step()) {
    ExecRecord e;
    e.id = q.Int(0);
    std::string args = q.Text(2);
    if (args.empty()) {
      e.argv = {q.Text(1)};  // recorded before version 7: the words joined by spaces
    } else {
      e.argv = absl::StrSplit(args, '\0');
      e.argv.pop_back();  // after the last terminator
    }
    e.user = q.Text(3);
    e.cwd = q.Text(4);
    e.tty = q.Int(5) != 0;
    e.started_ms = q.Int(6);
    e.ended_ms = q.Int(7);
    e.exit_code = static_cast<int>(q.Int(8));
    e.message = q.Text(9);
    out.push_back(std::move(e));
  }
  if (!q.ok()) return q.status();
  return out;
}

absl::StatusOr<std::map<int64_t, ExecOutput>> StateStore::ReadExecOutputs(const std::string& tenant,
                                                                          const std::string& id,
                                                                          size_t keep_bytes) {
  absl::MutexLock lock(&mu_);
  Stmt q(db_,
         "SELECT exec_id, data FROM output WHERE session_id = ? AND tenant = ? AND stream IN "
         "(1, 2) ORDER BY seq");
  q.Bind(1, id).Bind(2, tenant);
  std::map<int64_t, ExecOutput> out;
  while (q.Step()) {
    ExecOutput& o = out[q.Int(0)];
    std::string data = q.Text(1);
    o.total += data.size();
    if (o.kept.size() < keep_bytes) o.kept.append(data, 0, keep_bytes - o.kept.size());
  }
  if (!q.ok()) return q.status();
  return out;
}

absl::Status StateStore::AppendAgentEvents(const SessionRecord& s,
                                           const std::vector<AgentEvent>& events) {
  if (events.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  for (const AgentEvent& e : events) {
    Stmt q(db_,
           "INSERT INTO agent_events(session_id, tenant, unix_ms, kind, agent, exec_id, tool_id, "
           "tool, text) VALUES(?,?,?,?,?,?,?,?,?)");
    q.Bind(1, s.id).Bind(2, s.tenant).Bind(3, e.unix_ms).Bind(4, e.kind).Bind(5, e.agent);
    q.Bind(6, e.exec_id).Bind(7, e.tool_id).Bind(8, e.tool).BindBlob(9, e.text).Step();
    if (!q.ok()) return q.status();
  }
  Stmt trim(db_,
            "DELETE FROM agent_events WHERE session_id = ? AND seq <= (SELECT seq FROM "
            "agent_events WHERE session_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)");
  trim.Bind(1, s.id).Bind(2, s.id).Bind(3, kMaxAgentEventsPerSession).Step();
  if (!trim.ok()) return trim.status();
  return tx.Commit();
}

absl::StatusOr<std::vector<AgentEvent>> StateStore::ReadAgentEvents(const std::string& tenant,
                                                                    const std::string& id) {
  absl::MutexLock lock(&mu_);
  Stmt q(db_,
         "SELECT seq, unix_ms, kind, agent, exec_id, tool_id, tool, text FROM agent_events "
         "WHERE session_id = ? AND tenant = ? ORDER BY seq LIMIT ?");
  q.Bind(1, id).Bind(2, tenant).Bind(3, kMaxTimelineRows);
  std::vector<AgentEvent> out;
  while (q.Step()) {
    out.push_back(
        {q.Int(0), q.Int(1), q.Text(2), q.Text(3), q.Int(4), q.Text(5), q.Text(6), q.Text(7)});
  }
  if (!q.ok()) return q.status();
  return out;
}

absl::StatusOr<std::vector<AuditRecord>> StateStore::AuditOf(const std::string& tenant,
                                                             const std::string& id) {
  absl::MutexLock lock(&mu_);
  Stmt q(db_, absl::StrCat("SELECT ", kAuditColumns,
                           " FROM audit WHERE target = ? AND tenant = ? ORDER BY seq LIMIT ?")
                  .c_str());
  q.Bind(1, id).Bind(2, tenant).Bind(3, kMaxTimelineRows);
  std::vector<AuditRecord> out;
  while (q.Step()) out.push_back(ReadAudit(q));
  if (!q.ok()) return q.status();
  return out;
}

absl::Status StateStore::EndExec(const SessionRecord& s, int64_t exec_id, int exit_code,
                                 const std::string& message) {
  absl::MutexLock lock(&mu_);
  Stmt q(db_,
         "UPDATE execs SET ended_ms = ?, exit_code = ?, message = ? WHERE id = ? AND tenant = ?");
  q.Bind(1, NowUnixMs()).Bind(2, exit_code).Bind(3, message).Bind(4, exec_id).Bind(5, s.tenant);
  q.Step();
  if (q.ok() && events_) {
    events_->Publish({.kind = SessionEvent::Kind::kExecExit,
                      .tenant = s.tenant,
                      .session_id = s.id,
                      .unix_ms = NowUnixMs(),
                      .exec_id = exec_id,
                      .exit_code = exit_code,
                      .message = message});
  }
  return q.status();
}

absl::Status StateStore::AppendLogs(const SessionRecord& s, const std::vector<LogRecord>& logs) {
  if (logs.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  int64_t added = 0;
  for (const LogRecord& log : logs) {
    Stmt q(db_,
           "INSERT INTO output(session_id, tenant, exec_id, unix_ms, stream, data) "
           "VALUES(?,?,?,?,?,?)");
    q.Bind(1, s.id).Bind(2, s.tenant).Bind(3, log.exec_id).Bind(4, log.unix_ms);
    q.Bind(5, static_cast<int64_t>(log.stream)).BindBlob(6, log.data).Step();
    if (!q.ok()) return q.status();
    added += static_cast<int64_t>(log.data.size());
  }
  Stmt total(db_, "UPDATE sessions SET log_bytes = log_bytes + ? WHERE id = ? RETURNING log_bytes");
  total.Bind(1, added).Bind(2, s.id);
  int64_t bytes = total.Step() ? total.Int(0) : 0;
  while (total.Step()) {
  }
  if (!total.ok()) return total.status();
  // Ring: drop the oldest entries until the session is back under its cap.
  while (bytes > static_cast<int64_t>(log_cap_bytes_)) {
    Stmt oldest(db_,
                "SELECT seq, length(data) FROM output WHERE session_id = ? ORDER BY seq LIMIT 64");
    oldest.Bind(1, s.id);
    int64_t freed = 0, last_seq = -1;
    while (oldest.Step() && bytes - freed > static_cast<int64_t>(log_cap_bytes_)) {
      last_seq = oldest.Int(0);
      freed += oldest.Int(1);
    }
    if (last_seq < 0) break;
    Stmt drop(db_, "DELETE FROM output WHERE session_id = ? AND seq <= ?");
    drop.Bind(1, s.id).Bind(2, last_seq).Step();
    Stmt shrink(db_, "UPDATE sessions SET log_bytes = log_bytes - ? WHERE id = ?");
    shrink.Bind(1, freed).Bind(2, s.id).Step();
    if (!drop.ok() || !shrink.ok()) return drop.ok() ? shrink.status() : drop.status();
    bytes -= freed;
  }
  // And the tenant's whole output under its logs quota: the oldest entries of any of its
  // sessions go first (removed sessions' records keep their output until then).
  uint64_t tenant_cap = tenant_log_cap_ ? tenant_log_cap_(s.tenant) : UINT64_MAX;
  Stmt sum(db_, "SELECT COALESCE(SUM(log_bytes), 0) FROM sessions WHERE tenant = ?");
  sum.Bind(1, s.tenant);
  int64_t tenant_bytes = sum.Step() ? sum.Int(0) : 0;
  if (!sum.ok()) return sum.status();
  while (static_cast<uint64_t>(tenant_bytes) > tenant_cap) {
    Stmt oldest(db_,
                "SELECT seq, session_id, length(data) FROM output WHERE tenant = ? ORDER BY seq "
                "LIMIT 64");
    oldest.Bind(1, s.tenant);
    std::vector<std::tuple<int64_t, std::string, int64_t>> victims;
    int64_t freed = 0;
    while (oldest.Step() && static_cast<uint64_t>(tenant_bytes - freed) > tenant_cap) {
      victims.emplace_back(oldest.Int(0), oldest.Text(1), oldest.Int(2));
      freed += oldest.Int(2);
    }
    if (victims.empty()) break;
    for (const auto& [seq, session, length] : victims) {
      Stmt drop(db_, "DELETE FROM output WHERE seq = ?");
      drop.Bind(1, seq).Step();
      Stmt shrink(db_, "UPDATE sessions SET log_bytes = log_bytes - ? WHERE id = ?");
      shrink.Bind(1, length).Bind(2, session).Step();
      if (!drop.ok() || !shrink.ok()) return drop.ok() ? shrink.status() : drop.status();
    }
    tenant_bytes -= freed;
  }
  return tx.Commit();
}

absl::StatusOr<uint64_t> StateStore::LogBytes(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  Stmt sum(db_, "SELECT COALESCE(SUM(log_bytes), 0) FROM sessions WHERE tenant = ?");
  sum.Bind(1, tenant);
  int64_t bytes = sum.Step() ? sum.Int(0) : 0;
  if (!sum.ok()) return sum.status();
  return static_cast<uint64_t>(bytes);
}

absl::StatusOr<std::vector<LogRecord>> StateStore::ReadLogs(const std::string& tenant,
                                                            const std::string& id,
                                                            int64_t after_seq, int64_t since_ms,
                                                            uint32_t tail) {
  absl::MutexLock lock(&mu_);
  std::string sql =
      "SELECT seq, unix_ms, exec_id, stream, data FROM output WHERE session_id = ? AND tenant = ? "
      "AND seq > ? AND unix_ms >= ?";
  sql += tail > 0 ? " ORDER BY seq DESC LIMIT ?" : " ORDER BY seq LIMIT 4096";
  Stmt q(db_, sql.c_str());
  q.Bind(1, id).Bind(2, tenant).Bind(3, after_seq).Bind(4, since_ms);
  if (tail > 0) q.Bind(5, tail);
  std::vector<LogRecord> out;
  while (q.Step()) {
    LogRecord r;
    r.seq = q.Int(0);
    r.unix_ms = q.Int(1);
    r.exec_id = q.Int(2);
    r.stream = static_cast<LogStream>(q.Int(3));
    r.data = q.Text(4);
    out.push_back(std::move(r));
  }
  if (!q.ok()) return q.status();
  if (tail > 0) std::reverse(out.begin(), out.end());
  return out;
}

absl::Status StateStore::SetEgress(const Principal& who, const std::string& tenant,
                                   const std::string& id, const std::vector<EgressGrant>& egress,
                                   int64_t version, const std::string& action,
                                   const std::string& outcome) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt q(db_, "UPDATE sessions SET egress = ?, egress_version = ? WHERE id = ? AND tenant = ?");
  q.Bind(1, EncodeEgress(egress)).Bind(2, version).Bind(3, id).Bind(4, tenant).Step();
  if (!q.ok()) return q.status();
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(absl::StrCat("no session ", id));
  if (absl::Status st = AuditLocked(who, tenant, action, id, outcome); !st.ok()) return st;
  return tx.Commit();
}

absl::Status StateStore::SetWorkspace(const Principal& who, const std::string& tenant,
                                      const std::string& id, const WorkspaceRecord& workspace,
                                      const std::string& action, const std::string& outcome) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt q(db_, "UPDATE sessions SET workspace = ? WHERE id = ? AND tenant = ?");
  q.Bind(1, EncodeWorkspace(workspace)).Bind(2, id).Bind(3, tenant).Step();
  if (!q.ok()) return q.status();
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(absl::StrCat("no session ", id));
  if (absl::Status st = AuditLocked(who, tenant, action, id, outcome); !st.ok()) return st;
  return tx.Commit();
}

absl::Status StateStore::SetSecrets(const Principal& who, const std::string& tenant,
                                    const std::string& id, const std::vector<SecretGrant>& secrets,
                                    const std::string& action, const std::string& outcome) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt q(db_, "UPDATE sessions SET secrets = ? WHERE id = ? AND tenant = ?");
  q.Bind(1, EncodeSecrets(secrets)).Bind(2, id).Bind(3, tenant).Step();
  if (!q.ok()) return q.status();
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(absl::StrCat("no session ", id));
  if (absl::Status st = AuditLocked(who, tenant, action, id, outcome); !st.ok()) return st;
  return tx.Commit();
}

absl::StatusOr<std::map<std::string, int64_t>> StateStore::LastSecretUses(const std::string& tenant,
                                                                          const std::string& id) {
  absl::MutexLock lock(&mu_);
  Stmt q(db_,
         "SELECT rule, MAX(unix_ms) FROM net_events WHERE session_id = ? AND tenant = ? AND "
         "kind = 'secret' AND allowed = 1 GROUP BY rule");
  q.Bind(1, id).Bind(2, tenant);
  std::map<std::string, int64_t> out;
  while (q.Step()) out[q.Text(0)] = q.Int(1);
  if (!q.ok()) return q.status();
  return out;
}

absl::Status StateStore::AppendNetEvents(const SessionRecord& s,
                                         const std::vector<net::NetEvent>& events) {
  if (events.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  for (const net::NetEvent& e : events) {
    if (!e.allowed) {
      Stmt again(db_,
                 "UPDATE net_events SET repeats = repeats + 1, last_ms = ? WHERE session_id = ? "
                 "AND allowed = 0 AND name = ? AND port = ? AND kind = ? AND address = ? AND "
                 "reason = ?");
      again.Bind(1, e.unix_ms).Bind(2, s.id).Bind(3, e.name).Bind(4, static_cast<int64_t>(e.port));
      again.Bind(5, e.kind).Bind(6, e.address).Bind(7, e.reason).Step();
      if (!again.ok()) return again.status();
      if (sqlite3_changes(db_) > 0) continue;
    }
    Stmt q(db_,
           "INSERT INTO net_events(session_id, tenant, unix_ms, kind, name, address, port, "
           "allowed, rule, reason, bytes_out, bytes_in) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)");
    q.Bind(1, s.id).Bind(2, s.tenant).Bind(3, e.unix_ms).Bind(4, e.kind).Bind(5, e.name);
    q.Bind(6, e.address).Bind(7, static_cast<int64_t>(e.port)).Bind(8, e.allowed ? 1 : 0);
    q.Bind(9, e.rule).Bind(10, e.reason).Bind(11, static_cast<int64_t>(e.bytes_out));
    q.Bind(12, static_cast<int64_t>(e.bytes_in)).Step();
    if (!q.ok()) return q.status();
  }
  // Bounded per session, denials and allowed connections each on their own: a guest's flood of
  // cheap denied names never pushes out its allowed connections, and of each kind the first
  // kFirstNetEventsKept stay (what it tried first is the evidence) besides the newest; the
  // ones between go. A denial seen before is only counted, on its first row.
  for (int allowed : {0, 1}) {
    Stmt trim(db_,
              "DELETE FROM net_events WHERE session_id = ?1 AND allowed = ?2 "
              "AND seq > COALESCE((SELECT seq FROM net_events WHERE session_id = ?1 AND "
              "allowed = ?2 ORDER BY seq LIMIT 1 OFFSET ?3), 9223372036854775807) "
              "AND seq <= COALESCE((SELECT seq FROM net_events WHERE session_id = ?1 AND "
              "allowed = ?2 ORDER BY seq DESC LIMIT 1 OFFSET ?4), -1)");
    trim.Bind(1, s.id)
        .Bind(2, static_cast<int64_t>(allowed))
        .Bind(3, kFirstNetEventsKept - 1)
        .Bind(4, kMaxNetEventsPerSession / 2 - kFirstNetEventsKept)
        .Step();
    if (!trim.ok()) return trim.status();
  }
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  for (const net::NetEvent& e : events) {
    if (e.allowed || !events_) continue;
    events_->Publish({.kind = SessionEvent::Kind::kDenied,
                      .tenant = s.tenant,
                      .session_id = s.id,
                      .unix_ms = e.unix_ms,
                      .reason = e.reason,
                      .destination = e.port == 0 ? (e.name.empty() ? e.address : e.name)
                                                 : absl::StrCat(e.name.empty() ? e.address : e.name,
                                                                ":", e.port)});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<net::NetEvent>> StateStore::ReadNetEvents(const std::string& tenant,
                                                                     const std::string& id,
                                                                     int64_t after_seq,
                                                                     uint32_t tail) {
  absl::MutexLock lock(&mu_);
  std::string sql =
      "SELECT seq, unix_ms, kind, name, address, port, allowed, rule, reason, bytes_out, "
      "bytes_in, repeats, last_ms FROM net_events WHERE session_id = ? AND tenant = ? AND seq > ?";
  sql += tail > 0 ? " ORDER BY seq DESC LIMIT ?" : " ORDER BY seq LIMIT 4096";
  Stmt q(db_, sql.c_str());
  q.Bind(1, id).Bind(2, tenant).Bind(3, after_seq);
  if (tail > 0) q.Bind(4, tail);
  std::vector<net::NetEvent> out;
  while (q.Step()) {
    net::NetEvent e;
    e.seq = q.Int(0);
    e.unix_ms = q.Int(1);
    e.kind = q.Text(2);
    e.name = q.Text(3);
    e.address = q.Text(4);
    e.port = static_cast<uint32_t>(q.Int(5));
    e.allowed = q.Int(6) != 0;
    e.rule = q.Text(7);
    e.reason = q.Text(8);
    e.bytes_out = static_cast<uint64_t>(q.Int(9));
    e.bytes_in = static_cast<uint64_t>(q.Int(10));
    e.repeats = static_cast<uint64_t>(q.Int(11));
    e.last_ms = q.Int(12);
    out.push_back(std::move(e));
  }
  if (!q.ok()) return q.status();
  if (tail > 0) std::reverse(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::vector<AuditRecord>> StateStore::AuditLog(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  Stmt q(
      db_,
      absl::StrCat("SELECT ", kAuditColumns, " FROM audit WHERE tenant = ? ORDER BY seq").c_str());
  q.Bind(1, tenant);
  std::vector<AuditRecord> out;
  while (q.Step()) out.push_back(ReadAudit(q));
  if (!q.ok()) return q.status();
  return out;
}

}  // namespace airlock
