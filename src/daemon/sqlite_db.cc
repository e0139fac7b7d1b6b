#include "src/daemon/sqlite_db.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <string.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace airlock {

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path,
                                                         const std::vector<Migration>& migrations) {
  // Create it 0600 ourselves: sqlite would use the umask.
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the state database ", path, ": ", strerror(errno)));
  }
  close(fd);
  sqlite3* raw = nullptr;
  if (sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr) !=
      SQLITE_OK) {
    std::string message = raw ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close(raw);
    return absl::FailedPreconditionError(absl::StrCat("cannot open ", path, ": ", message));
  }
  std::unique_ptr<SqliteDb> db(new SqliteDb(raw));
  sqlite3_busy_timeout(raw, 5000);
  Locked locked(*db);
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
    if (absl::Status s = locked.Exec(pragma); !s.ok()) return s;
  }
  Transaction tx(locked);
  if (absl::Status s = tx.Begun(); !s.ok()) return s;
  Stmt version(locked, "PRAGMA user_version");
  int64_t current = version.Step() ? version.Int(0) : 0;
  int64_t known = static_cast<int64_t>(migrations.size());
  if (current > known) {
    return absl::FailedPreconditionError(absl::StrCat("the state database has schema version ",
                                                      current, ", newer than this airlockd (",
                                                      known, "); run the newer airlockd"));
  }
  for (int64_t v = current; v < known; ++v) {
    if (absl::Status s = locked.Exec(migrations[v].sql); !s.ok()) return s;
    if (migrations[v].after) {
      if (absl::Status s = migrations[v].after(locked); !s.ok()) return s;
    }
  }
  if (absl::Status s = locked.Exec(absl::StrCat("PRAGMA user_version=", known)); !s.ok()) return s;
  if (absl::Status s = tx.Commit(); !s.ok()) return s;
  return db;
}

SqliteDb::~SqliteDb() ABSL_NO_THREAD_SAFETY_ANALYSIS { sqlite3_close(db_); }  // no one else left

SqliteDb::Locked::Locked(SqliteDb& db) : db_(db) { db_.mu_.Lock(); }

SqliteDb::Locked::~Locked() { db_.mu_.Unlock(); }

absl::Status SqliteDb::Locked::Exec(absl::string_view sql) {
  std::string text(sql);
  char* error = nullptr;
  if (sqlite3_exec(raw(), text.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    if (sqlite3_errcode(raw()) == SQLITE_FULL) {
      return Error("state database", absl::StatusCode::kResourceExhausted);
    }
    return absl::InternalError(absl::StrCat("state database: ", message));
  }
  return absl::OkStatus();
}

int64_t SqliteDb::Locked::changes() { return sqlite3_changes(raw()); }

int64_t SqliteDb::Locked::last_insert_rowid() { return sqlite3_last_insert_rowid(raw()); }

absl::Status SqliteDb::Locked::Error(absl::string_view what, absl::StatusCode code) {
  if (sqlite3_errcode(raw()) == SQLITE_FULL) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": the disk that holds airlockd's state is full (",
                     sqlite3_db_filename(raw(), "main"), "); free some space there and try again"));
  }
  return absl::Status(code, absl::StrCat(what, ": ", sqlite3_errmsg(raw())));
}

Stmt::Stmt(SqliteDb::Locked& db, absl::string_view sql) : db_(db) {
  rc_ = sqlite3_prepare_v2(db.raw(), sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
}

Stmt::~Stmt() { sqlite3_finalize(stmt_); }

Stmt& Stmt::Bind(int i, int64_t v) {
  if (ok()) rc_ = sqlite3_bind_int64(stmt_, i, v);
  return *this;
}

Stmt& Stmt::Bind(int i, const std::string& v) {
  if (ok()) {
    rc_ = sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  return *this;
}

Stmt& Stmt::BindBlob(int i, const std::string& v) {
  if (ok()) {
    rc_ = sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  return *this;
}

bool Stmt::Step() {
  if (!ok()) return false;
  rc_ = sqlite3_step(stmt_);
  if (rc_ == SQLITE_ROW) return true;
  if (rc_ == SQLITE_DONE) rc_ = SQLITE_OK;
  return false;
}

int64_t Stmt::Int(int col) { return sqlite3_column_int64(stmt_, col); }

std::string Stmt::Text(int col) {
  const void* p = sqlite3_column_blob(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::string(static_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

bool Stmt::ok() const { return rc_ == SQLITE_OK || rc_ == SQLITE_ROW; }

absl::Status Stmt::status() const {
  if (ok()) return absl::OkStatus();
  return db_.Error("state database", absl::StatusCode::kInternal);
}

Transaction::Transaction(SqliteDb::Locked& db) : db_(db) {
  if (sqlite3_exec(db.raw(), "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    begun_ = db.Error("state database", absl::StatusCode::kUnavailable);
  }
}

Transaction::~Transaction() {
  if (begun_.ok() && !done_) sqlite3_exec(db_.raw(), "ROLLBACK", nullptr, nullptr, nullptr);
}

absl::Status Transaction::Commit() {
  if (sqlite3_exec(db_.raw(), "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return db_.Error("state database commit", absl::StatusCode::kInternal);
  }
  done_ = true;
  return absl::OkStatus();
}

}  // namespace airlock
