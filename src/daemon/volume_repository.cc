#include "src/daemon/volume_repository.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/daemon/audit_log.h"

namespace airlock {
namespace {

constexpr char kVolumeColumns[] =
    "id, tenant, name, size_bytes, read_only, origin, generation, created_ms, busy";

struct Row {
  VolumeRecord volume;
  std::string busy;
};

Row ReadVolume(Stmt& q) {
  Row r;
  r.volume.id = q.Text(0);
  r.volume.tenant = q.Text(1);
  r.volume.name = q.Text(2);
  r.volume.size_bytes = static_cast<uint64_t>(q.Int(3));
  r.volume.read_only = q.Int(4) != 0;
  r.volume.origin = q.Text(5);
  r.volume.generation = q.Int(6);
  r.volume.created_ms = q.Int(7);
  r.busy = q.Text(8);
  return r;
}

// A session that holds volumes: its id, state and attachments.
struct Holder {
  std::string id;
  SessionState state;
  std::vector<VolumeAttachment> volumes;
};

// The tenant's sessions that hold volumes now (not stopped, not failed).
absl::StatusOr<std::vector<Holder>> Holders(SqliteDb::Locked& db, const std::string& tenant) {
  Stmt q(db,
         "SELECT id, state, volumes FROM sessions WHERE tenant = ? AND state IN (?, ?, ?) AND "
         "volumes != ''");
  q.Bind(1, tenant)
      .Bind(2, static_cast<int64_t>(SessionState::kCreating))
      .Bind(3, static_cast<int64_t>(SessionState::kRunning))
      .Bind(4, static_cast<int64_t>(SessionState::kPaused));
  return q.All([](Stmt& s) {
    return Holder{s.Text(0), static_cast<SessionState>(s.Int(1)),
                  DecodeVolumeAttachments(s.Text(2))};
  });
}

void FillHolders(const std::vector<Holder>& holders, VolumeRecord* v) {
  for (const Holder& h : holders) {
    for (const VolumeAttachment& a : h.volumes) {
      if (a.volume_id != v->id) continue;
      v->holders.push_back(h.id);
      v->held_read_write = v->held_read_write || !a.read_only;
    }
  }
}

// Within the caller's transaction: the volume's row, and its audit row.
absl::Status InsertAudited(SqliteDb::Locked& db, const Principal& who, const VolumeRecord& v,
                           const std::string& action, const std::string& outcome) {
  Stmt q(db, absl::StrCat("INSERT INTO volumes(", kVolumeColumns, ") VALUES(?,?,?,?,?,?,?,?,'')"));
  q.Bind(1, v.id).Bind(2, v.tenant).Bind(3, v.name).Bind(4, static_cast<int64_t>(v.size_bytes));
  q.Bind(5, v.read_only ? 1 : 0).Bind(6, v.origin).Bind(7, v.generation).Bind(8, v.created_ms);
  q.Step();
  if (!q.ok()) return q.status();
  return AuditLog::Append(db, who, v.tenant, action, "volume " + v.name, outcome);
}

// "session ID (running), session ID2 (paused)".
std::string DescribeHolders(const std::vector<Holder>& holders, const std::string& volume_id,
                            bool read_write_only) {
  std::vector<std::string> out;
  for (const Holder& h : holders) {
    for (const VolumeAttachment& a : h.volumes) {
      if (a.volume_id != volume_id || (read_write_only && a.read_only)) continue;
      out.push_back(absl::StrCat("session ", h.id, " (", SessionStateName(h.state),
                                 a.read_only ? ", read-only" : ", read-write", ")"));
    }
  }
  return absl::StrJoin(out, ", ");
}

absl::StatusOr<Row> GetRow(SqliteDb::Locked& db, const std::string& tenant,
                           const std::string& name) {
  Stmt q(db,
         absl::StrCat("SELECT ", kVolumeColumns, " FROM volumes WHERE tenant = ? AND name = ?"));
  q.Bind(1, tenant).Bind(2, name);
  if (q.Step()) return ReadVolume(q);
  if (!q.ok()) return q.status();
  return absl::NotFoundError(
      absl::StrCat("you have no volume named ", name, " (airlock volume ls lists yours)"));
}

absl::Status Busy(const std::string& name, const std::string& busy) {
  return absl::FailedPreconditionError(
      absl::StrCat("volume ", name, " is busy (", busy, " under way); try again when it is done"));
}

// The tenant's volume of that name if nothing works on it and no session holds it (with
// read_write_only: none writes it); else FAILED_PRECONDITION naming the holders and `then`,
// what to do.
absl::StatusOr<Row> FreeRow(SqliteDb::Locked& db, const std::string& tenant,
                            const std::string& name, bool read_write_only,
                            const std::string& then) {
  absl::StatusOr<Row> row = GetRow(db, tenant, name);
  if (!row.ok()) return row.status();
  if (!row->busy.empty()) return Busy(name, row->busy);
  absl::StatusOr<std::vector<Holder>> holders = Holders(db, tenant);
  if (!holders.ok()) return holders.status();
  if (std::string held = DescribeHolders(*holders, row->volume.id, read_write_only);
      !held.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("volume ", name, " is attached to ", held, "; ", then));
  }
  return row;
}

bool ValidPart(std::string_view part) {
  if (part.empty() || part.size() > 63) return false;
  if (!((part[0] >= 'a' && part[0] <= 'z') || (part[0] >= '0' && part[0] <= '9'))) return false;
  for (char c : part) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string EncodeVolumeAttachments(const std::vector<VolumeAttachment>& volumes) {
  std::vector<std::string> lines;
  for (const VolumeAttachment& v : volumes) {
    lines.push_back(absl::StrCat(absl::CEscape(v.volume_id), "\t", absl::CEscape(v.name), "\t",
                                 absl::CEscape(v.path), "\t", v.read_only ? 1 : 0, "\t",
                                 v.generation));
  }
  return absl::StrJoin(lines, "\n");
}

std::vector<VolumeAttachment> DecodeVolumeAttachments(const std::string& text) {
  std::vector<VolumeAttachment> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    VolumeAttachment v;
    int read_only = 0;
    if (f.size() != 5 || !absl::CUnescape(f[0], &v.volume_id) || !absl::CUnescape(f[1], &v.name) ||
        !absl::CUnescape(f[2], &v.path) || !absl::SimpleAtoi(f[3], &read_only) ||
        !absl::SimpleAtoi(f[4], &v.generation)) {
      continue;
    }
    v.read_only = read_only != 0;
    out.push_back(std::move(v));
  }
  return out;
}

absl::Status CheckVolumeName(std::string_view name, bool snapshot) {
  size_t at = name.find('@');
  bool ok = snapshot ? at != std::string_view::npos && ValidPart(name.substr(0, at)) &&
                           ValidPart(name.substr(at + 1))
                     : ValidPart(name);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", absl::CHexEscape(std::string(name)), "\" is not a ",
      snapshot ? "volume snapshot's" : "volume's",
      " name: use 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
      snapshot ? ", then @ and a tag of the same (data@v1)" : " (data, pip-cache)"));
}

absl::Status VolumeRepository::Create(const Principal& who, const VolumeRecord& v,
                                      const std::string& action, const std::string& outcome) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt have(db, "SELECT 1 FROM volumes WHERE tenant = ? AND name = ?");
  have.Bind(1, v.tenant).Bind(2, v.name);
  if (have.Step()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "you have a volume named ", v.name,
        " already: choose another name, or remove it first (airlock volume rm ", v.name, ")"));
  }
  if (!have.ok()) return have.status();
  if (absl::Status st = InsertAudited(db, who, v, action, outcome); !st.ok()) return st;
  return tx.Commit();
}

absl::Status VolumeRepository::Adopt(const Principal& who, const VolumeRecord& v,
                                     const std::string& outcome) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt have(db, "SELECT id FROM volumes WHERE tenant = ? AND name = ?");
  have.Bind(1, v.tenant).Bind(2, v.name);
  if (have.Step() && have.Text(0) != v.id) {
    return absl::FailedPreconditionError(absl::StrCat("this host has another volume named ", v.name,
                                                      " (airlock volume rm ", v.name,
                                                      " removes it)"));
  }
  if (!have.ok()) return have.status();
  Stmt drop(db, "DELETE FROM volumes WHERE id = ?");
  drop.Bind(1, v.id);
  drop.Step();
  if (!drop.ok()) return drop.status();
  if (absl::Status st = InsertAudited(db, who, v, "volume.fetch", outcome); !st.ok()) return st;
  return tx.Commit();
}

absl::StatusOr<VolumeRecord> VolumeRepository::Get(const std::string& tenant,
                                                   const std::string& name) {
  SqliteDb::Locked db(db_);
  absl::StatusOr<Row> row = GetRow(db, tenant, name);
  if (!row.ok()) return row.status();
  absl::StatusOr<std::vector<Holder>> holders = Holders(db, tenant);
  if (!holders.ok()) return holders.status();
  FillHolders(*holders, &row->volume);
  return row->volume;
}

absl::StatusOr<std::vector<VolumeRecord>> VolumeRepository::List(const std::string& tenant) {
  SqliteDb::Locked db(db_);
  Stmt q(db,
         absl::StrCat("SELECT ", kVolumeColumns, " FROM volumes WHERE tenant = ? ORDER BY name"));
  q.Bind(1, tenant);
  absl::StatusOr<std::vector<Row>> rows = q.All(ReadVolume);
  if (!rows.ok()) return rows.status();
  absl::StatusOr<std::vector<Holder>> holders = Holders(db, tenant);
  if (!holders.ok()) return holders.status();
  std::vector<VolumeRecord> out;
  for (Row& r : *rows) {
    FillHolders(*holders, &r.volume);
    out.push_back(std::move(r.volume));
  }
  return out;
}

absl::StatusOr<uint64_t> VolumeRepository::TotalBytes(const std::string& tenant) {
  SqliteDb::Locked db(db_);
  Stmt q(db, "SELECT COALESCE(SUM(size_bytes), 0) FROM volumes WHERE tenant = ?");
  q.Bind(1, tenant);
  if (q.Step()) return static_cast<uint64_t>(q.Int(0));
  return q.status();
}

absl::StatusOr<VolumeRecord> VolumeRepository::Remove(const Principal& who,
                                                      const std::string& tenant,
                                                      const std::string& name) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  absl::StatusOr<Row> row = FreeRow(db, tenant, name, false, "remove those sessions first");
  if (!row.ok()) return row.status();
  Stmt q(db, "DELETE FROM volumes WHERE id = ?");
  q.Bind(1, row->volume.id).Step();
  if (!q.ok()) return q.status();
  if (absl::Status st = AuditLog::Append(db, who, tenant, "volume.remove", "volume " + name, "ok");
      !st.ok()) {
    return st;
  }
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  return row->volume;
}

absl::StatusOr<VolumeRecord> VolumeRepository::Mark(const std::string& tenant,
                                                    const std::string& name,
                                                    const std::string& what, bool read_write_only) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  absl::StatusOr<Row> row = FreeRow(
      db, tenant, name, read_write_only,
      absl::StrCat(what, " needs it ",
                   read_write_only ? "written by no session: pause or remove that session first"
                                   : "attached to no session: remove those sessions first"));
  if (!row.ok()) return row.status();
  Stmt q(db, "UPDATE volumes SET busy = ? WHERE id = ?");
  q.Bind(1, what).Bind(2, row->volume.id).Step();
  if (!q.ok()) return q.status();
  if (absl::Status st = tx.Commit(); !st.ok()) return st;
  return row->volume;
}

absl::Status VolumeRepository::Unmark(const Principal& who, const VolumeRecord& v, bool replaced,
                                      const std::string& action, const std::string& outcome) {
  SqliteDb::Locked db(db_);
  Transaction tx(db);
  if (absl::Status st = tx.Begun(); !st.ok()) return st;
  Stmt q(db, "UPDATE volumes SET busy = '', generation = generation + ? WHERE id = ?");
  q.Bind(1, replaced ? 1 : 0).Bind(2, v.id).Step();
  if (!q.ok()) return q.status();
  if (!action.empty()) {
    if (absl::Status st = AuditLog::Append(db, who, v.tenant, action, "volume " + v.name, outcome);
        !st.ok()) {
      return st;
    }
  }
  return tx.Commit();
}

absl::Status VolumeRepository::ClearBusy() {
  SqliteDb::Locked db(db_);
  Stmt q(db, "UPDATE volumes SET busy = '' WHERE busy != ''");
  q.Step();
  return q.status();
}

absl::StatusOr<std::vector<std::string>> VolumeRepository::AllIds() {
  SqliteDb::Locked db(db_);
  Stmt q(db, "SELECT id FROM volumes");
  return q.All([](Stmt& s) { return s.Text(0); });
}

absl::Status VolumeRepository::CheckAttachments(SqliteDb::Locked& db, const std::string& tenant,
                                                const std::string& session_id,
                                                const std::vector<VolumeAttachment>& volumes) {
  if (volumes.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<Holder>> holders = Holders(db, tenant);
  if (!holders.ok()) return holders.status();
  std::erase_if(*holders, [&](const Holder& h) { return h.id == session_id; });
  for (const VolumeAttachment& a : volumes) {
    Stmt q(db, "SELECT read_only, busy FROM volumes WHERE id = ? AND tenant = ?");
    q.Bind(1, a.volume_id).Bind(2, tenant);
    if (!q.Step()) {
      if (!q.ok()) return q.status();
      return absl::NotFoundError(
          absl::StrCat("you have no volume named ", a.name, " (airlock volume ls lists yours)"));
    }
    if (std::string busy = q.Text(1); !busy.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("volume ", a.name, " is busy (", busy,
                                                        " under way); try again when it is done"));
    }
    if (q.Int(0) != 0 && !a.read_only) {
      return absl::FailedPreconditionError(absl::StrCat(
          "volume ", a.name, " is a snapshot: attach it read-only (", a.name, ":", a.path, ":ro)"));
    }
    if (std::string held = DescribeHolders(*holders, a.volume_id, a.read_only); !held.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "volume ", a.name, " is attached to ", held, "; ",
          a.read_only ? "a volume written by a session (running or paused) is attached by no other"
                      : "one session at a time may write a volume, and none while others read it",
          ": remove that session, or attach a snapshot of the volume read-only (airlock volume "
          "snapshot)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace airlock
