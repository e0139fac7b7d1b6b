#include "src/daemon/session_repository.h"

#include <functional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/daemon/audit_log.h"
#include "src/daemon/exposure_repository.h"
#include "src/daemon/session_events.h"
#include "src/daemon/volume_repository.h"

namespace airlock {
namespace {

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

constexpr char kSessionColumns[] =
    "id, tenant, image, image_digest, state, reason, created_ms, last_used_ms, vcpus, "
    "memory_bytes, pids, disk_bytes, ttl_seconds, hostname, pid, idle_timeout_seconds, egress, "
    "egress_version, net_bytes_per_second, secrets, workspace, volumes, pause_at_ttl";

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
  s.volumes = DecodeVolumeAttachments(q.Text(21));
  s.limits.pause_at_ttl = q.Int(22) != 0;
  return s;
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
  // Only when there are some, so that hosts that know no volumes read the rest.
  if (!s.volumes.empty()) field("volumes", EncodeVolumeAttachments(s.volumes));
  if (s.limits.pause_at_ttl) field("pause_at_ttl", 1);
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
  std::string egress, secrets, workspace, volumes;
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
  size_t expected = 18;
  if (fields.contains("volumes")) {
    text_field("volumes", &volumes);
    ++expected;
  }
  if (fields.contains("pause_at_ttl")) {
    int flag = 0;
    number("pause_at_ttl", &flag);
    ok = ok && (flag == 0 || flag == 1);
    s.limits.pause_at_ttl = flag == 1;
    ++expected;
  }
  if (!ok || fields.size() != expected || !CheckSessionId(s.id).ok() || s.tenant.empty()) {
    return absl::InvalidArgumentError("a session record is missing a field or has a bad one");
  }
  s.egress = DecodeEgress(egress);
  s.secrets = DecodeSecrets(secrets);
  s.workspace = DecodeWorkspace(workspace);
  s.volumes = DecodeVolumeAttachments(volumes);
  s.state = SessionState::kPaused;
  return s;
}

absl::Status SessionRepository::Create(const Principal& who, const SessionRecord& s) {
  return Put(who, s, /*import=*/false, "");
}

absl::Status SessionRepository::Import(const Principal& who, const SessionRecord& s,
                                       const std::string& from_host) {
  return Put(who, s, /*import=*/true, from_host);
}

absl::Status SessionRepository::Put(const Principal& who, const SessionRecord& s, bool import,
                                    const std::string& from_host) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt tenant(db, "INSERT OR IGNORE INTO tenants(id, created_ms) VALUES(?, ?)");
  tenant.Bind(1, s.tenant).Bind(2, NowUnixMs()).Step();
  if (!tenant.ok()) return tenant.status();
  // Whether it may attach its volumes is decided with its insert, so that two sessions never
  // both take a volume read-write.
  if (absl::Status st = VolumeRepository::CheckAttachments(db, s.tenant, s.id, s.volumes);
      !st.ok()) {
    return st;
  }
  // An import replaces every field but the tenant (the session's logs and commands stay).
  std::string sql = absl::StrCat("INSERT INTO sessions(", kSessionColumns,
                                 ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
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
  Stmt q(db, sql);
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
  q.Bind(22, EncodeVolumeAttachments(s.volumes));
  q.Bind(23, int64_t{s.limits.pause_at_ttl ? 1 : 0});
  q.Step();
  if (!q.ok()) return q.status();
  if (import && db.changes() != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", s.id, " belongs to another tenant on this host"));
  }
  std::string outcome = "ok";
  if (import) outcome = absl::StrCat("from host ", from_host);
  for (const VolumeAttachment& v : s.volumes) {
    absl::StrAppend(&outcome, "; volume ", v.name, " at ", v.path,
                    v.read_only ? " (read-only)" : "");
  }
  if (s.workspace.present()) {
    absl::StrAppend(&outcome, "; workspace ", s.workspace.path,
                    s.workspace.head.empty() ? "" : " at " + s.workspace.head, " (",
                    s.workspace.files, " files, ", s.workspace.tree_digest, ")");
  }
  if (absl::Status st = AuditLog::Append(
          db, who, s.tenant, import ? "session.import" : "session.create", s.id, outcome);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  PublishState(s.tenant, s.id, s.state, s.reason);
  return absl::OkStatus();
}

absl::Status SessionRepository::SetState(const Principal& who, const std::string& tenant,
                                         const std::string& id, SessionState state,
                                         const std::string& reason, int64_t pid,
                                         const std::string& action) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt q(db, "UPDATE sessions SET state = ?, reason = ?, pid = ? WHERE id = ? AND tenant = ?");
  q.Bind(1, static_cast<int64_t>(state)).Bind(2, reason).Bind(3, pid).Bind(4, id).Bind(5, tenant);
  q.Step();
  if (!q.ok()) return q.status();
  if (db.changes() == 0) return absl::NotFoundError(absl::StrCat("no session ", id));
  if (state == SessionState::kStopped || state == SessionState::kFailed) {
    // Its guest ports are no longer reached through the gateway.
    if (absl::Status st = ExposureRepository::RemoveAll(db, id); !st.ok()) return st;
  }
  std::string outcome = absl::StrCat(SessionStateName(state), reason.empty() ? "" : ": ", reason);
  if (absl::Status st = AuditLog::Append(db, who, tenant, action, id, outcome); !st.ok()) return st;
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  PublishState(tenant, id, state, reason);
  return absl::OkStatus();
}

absl::Status SessionRepository::SetTimeToLive(const Principal& who, const std::string& tenant,
                                              const std::string& id, uint64_t ttl_seconds,
                                              std::optional<bool> pause_at_ttl) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt q(db,
         "UPDATE sessions SET ttl_seconds = ?1, pause_at_ttl = CASE WHEN ?2 < 0 THEN "
         "pause_at_ttl ELSE ?2 END WHERE id = ?3 AND tenant = ?4");
  q.Bind(1, static_cast<int64_t>(ttl_seconds))
      .Bind(2, int64_t{pause_at_ttl ? (*pause_at_ttl ? 1 : 0) : -1})
      .Bind(3, id)
      .Bind(4, tenant)
      .Step();
  if (!q.ok()) return q.status();
  if (db.changes() == 0) return absl::NotFoundError(absl::StrCat("no session ", id));
  if (absl::Status st =
          AuditLog::Append(db, who, tenant, "session.ttl", id,
                           absl::StrCat(ttl_seconds, "s from its creation",
                                        pause_at_ttl.value_or(false) ? ", paused then" : ""));
      !st.ok()) {
    return st;
  }
  return tx.Commit();
}

absl::Status SessionRepository::Delete(const Principal& who, const std::string& tenant,
                                       const std::string& id) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  if (absl::Status st = ExposureRepository::RemoveAll(db, id); !st.ok()) return st;
  for (const char* sql : {"DELETE FROM e2b_sandboxes WHERE session_id = ? AND tenant = ?",
                          "DELETE FROM output WHERE session_id = ? AND tenant = ?",
                          "DELETE FROM net_events WHERE session_id = ? AND tenant = ?",
                          "DELETE FROM agent_events WHERE session_id = ? AND tenant = ?",
                          "DELETE FROM activity WHERE session_id = ? AND tenant = ?",
                          "DELETE FROM activity_usage WHERE session_id = ? AND tenant = ?",
                          "DELETE FROM execs WHERE session_id = ? AND tenant = ?",
                          "DELETE FROM sessions WHERE id = ? AND tenant = ?"}) {
    Stmt q(db, sql);
    q.Bind(1, id).Bind(2, tenant).Step();
    if (!q.ok()) return q.status();
  }
  if (absl::Status st = AuditLog::Append(db, who, tenant, "session.delete", id, "ok"); !st.ok())
    return st;
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  if (events_) {
    events_->Publish({.kind = SessionEvent::Kind::kRemoved,
                      .tenant = tenant,
                      .session_id = id,
                      .unix_ms = NowUnixMs()});
  }
  return absl::OkStatus();
}

absl::StatusOr<SessionRecord> SessionRepository::Get(const std::string& tenant,
                                                     const std::string& id) {
  SqliteDb::Locked db(db_);
  Stmt q(db,
         absl::StrCat("SELECT ", kSessionColumns, " FROM sessions WHERE id = ? AND tenant = ?"));
  q.Bind(1, id).Bind(2, tenant);
  if (q.Step()) return ReadSession(q);
  if (!q.ok()) return q.status();
  // Another tenant's session is not found for the caller, and audited for its owner.
  Stmt owner(db, "SELECT tenant FROM sessions WHERE id = ?");
  owner.Bind(1, id);
  if (owner.Step()) {
    if (absl::Status s = AuditDenial(db, tenant, owner.Text(0), id); !s.ok()) return s;
  }
  if (!owner.ok()) return owner.status();
  return absl::NotFoundError(absl::StrCat("no session ", id, "; `airlock ls` lists your sessions"));
}

absl::Status SessionRepository::AuditDenial(SqliteDb::Locked& db, const std::string& tenant,
                                            const std::string& owner, const std::string& id) {
  int64_t now = NowUnixMs();
  {
    absl::MutexLock lock(&denials_mu_);
    std::string key = absl::StrCat(tenant, "\n", id);
    auto last = denials_.find(key);
    if (last != denials_.end() && now - last->second < 60000) return absl::OkStatus();
    if (denials_.size() >= 10000) denials_.clear();
    denials_[key] = now;
  }
  return AuditLog::Append(db, {.unix_ms = now,
                               .principal = tenant,
                               .tenant = owner,
                               .action = "session.lookup",
                               .target = id,
                               .outcome = "denied: the session is another tenant's"});
}

absl::StatusOr<std::vector<SessionRecord>> SessionRepository::List(const std::string& tenant) {
  SqliteDb::Locked db(db_);
  Stmt q(db, absl::StrCat("SELECT ", kSessionColumns,
                          " FROM sessions WHERE tenant = ? ORDER BY created_ms DESC, id"));
  q.Bind(1, tenant);
  return q.All(ReadSession);
}

absl::StatusOr<std::vector<SessionRecord>> SessionRepository::ListEveryTenant() {
  SqliteDb::Locked db(db_);
  Stmt q(db, absl::StrCat("SELECT ", kSessionColumns,
                          " FROM sessions ORDER BY tenant, created_ms DESC, id"));
  return q.All(ReadSession);
}

absl::StatusOr<std::string> SessionRepository::TenantOf(const std::string& id) {
  SqliteDb::Locked db(db_);
  Stmt q(db, "SELECT tenant FROM sessions WHERE id = ?");
  q.Bind(1, id);
  if (q.Step()) return q.Text(0);
  if (!q.ok()) return q.status();
  return absl::NotFoundError(absl::StrCat("no session ", id));
}

absl::StatusOr<std::vector<SessionRecord>> SessionRepository::InState(
    std::vector<SessionState> states) {
  SqliteDb::Locked db(db_);
  std::vector<std::string> numbers;
  for (SessionState s : states) numbers.push_back(std::to_string(static_cast<int>(s)));
  Stmt q(db, absl::StrCat("SELECT ", kSessionColumns, " FROM sessions WHERE state IN (",
                          absl::StrJoin(numbers, ","), ")"));
  return q.All(ReadSession);
}

absl::Status SessionRepository::SetEgress(const Principal& who, const std::string& tenant,
                                          const std::string& id,
                                          const std::vector<EgressGrant>& egress, int64_t version,
                                          const std::string& action, const std::string& outcome) {
  return SetColumn(
      who, tenant, id,
      "UPDATE sessions SET egress = ?, egress_version = ? WHERE id = ? AND tenant = ?",
      [&](Stmt& q) {
        q.Bind(1, EncodeEgress(egress)).Bind(2, version);
        return 2;
      },
      action, outcome);
}

absl::Status SessionRepository::SetWorkspace(const Principal& who, const std::string& tenant,
                                             const std::string& id,
                                             const WorkspaceRecord& workspace,
                                             const std::string& action,
                                             const std::string& outcome) {
  return SetColumn(
      who, tenant, id, "UPDATE sessions SET workspace = ? WHERE id = ? AND tenant = ?",
      [&](Stmt& q) {
        q.Bind(1, EncodeWorkspace(workspace));
        return 1;
      },
      action, outcome);
}

absl::Status SessionRepository::SetSecrets(const Principal& who, const std::string& tenant,
                                           const std::string& id,
                                           const std::vector<SecretGrant>& secrets,
                                           const std::string& action, const std::string& outcome) {
  return SetColumn(
      who, tenant, id, "UPDATE sessions SET secrets = ? WHERE id = ? AND tenant = ?",
      [&](Stmt& q) {
        q.Bind(1, EncodeSecrets(secrets));
        return 1;
      },
      action, outcome);
}

absl::Status SessionRepository::SetColumn(const Principal& who, const std::string& tenant,
                                          const std::string& id, const char* sql,
                                          const std::function<int(Stmt&)>& bind,
                                          const std::string& action, const std::string& outcome) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt q(db, sql);
  int bound = bind(q);
  q.Bind(bound + 1, id).Bind(bound + 2, tenant).Step();
  if (!q.ok()) return q.status();
  if (db.changes() == 0) return absl::NotFoundError(absl::StrCat("no session ", id));
  if (absl::Status st = AuditLog::Append(db, who, tenant, action, id, outcome); !st.ok()) return st;
  return tx.Commit();
}

void SessionRepository::PublishState(const std::string& tenant, const std::string& id,
                                     SessionState state, const std::string& reason) {
  if (events_ == nullptr) return;
  events_->Publish({.kind = SessionEvent::Kind::kState,
                    .tenant = tenant,
                    .session_id = id,
                    .unix_ms = NowUnixMs(),
                    .state = state,
                    .reason = reason});
}

}  // namespace airlock
