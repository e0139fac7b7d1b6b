// The small SQLite layer under airlockd's state: one connection in WAL mode with
// synchronous=FULL, reached only through SqliteDb::Locked (which holds the connection's lock),
// prepared statements, BEGIN IMMEDIATE transactions, and errors that say what to do when the
// disk is full. The repositories (sessions, commands, network events, audit) are built on it;
// StateStore composes them.
#ifndef AIRLOCK_DAEMON_SQLITE_DB_H_
#define AIRLOCK_DAEMON_SQLITE_DB_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

struct sqlite3;
struct sqlite3_stmt;

namespace airlock {

class SqliteDb {
 public:
  class Locked;
  // A migration: the statements of one schema version, and what to do right after them in the
  // same transaction (e.g. fill a new column), if anything.
  struct Migration {
    const char* sql;
    std::function<absl::Status(Locked&)> after;
  };

  // Opens (creating it 0600) the database at path and brings its schema to migrations.size()
  // (PRAGMA user_version), each version in order; FailedPrecondition for a database newer than
  // this program.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(
      const std::string& path, const std::vector<Migration>& migrations);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

 private:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  absl::Mutex mu_;
  sqlite3* const db_ ABSL_PT_GUARDED_BY(mu_);
};

// The connection, under its lock for as long as this lives: statements and transactions are
// made from it, so none runs without the lock.
class ABSL_SCOPED_LOCKABLE SqliteDb::Locked {
 public:
  explicit Locked(SqliteDb& db) ABSL_EXCLUSIVE_LOCK_FUNCTION(db.mu_);
  ~Locked() ABSL_UNLOCK_FUNCTION();
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

  // Runs statements that return no rows (schema, pragmas).
  [[nodiscard]] absl::Status Exec(absl::string_view sql);
  // Rows the last INSERT, UPDATE or DELETE changed; the rowid of the last INSERT.
  int64_t changes();
  int64_t last_insert_rowid();
  // The connection's last error as a status: ResourceExhausted, saying to free space, when the
  // disk is full (nothing was written); otherwise `code` with SQLite's message.
  absl::Status Error(absl::string_view what, absl::StatusCode code);

 private:
  friend class Stmt;
  friend class Transaction;
  SqliteDb& db_;
  sqlite3* raw() ABSL_NO_THREAD_SAFETY_ANALYSIS { return db_.db_; }  // held since construction
};

// A prepared statement, finalized on destruction. Binds and steps record the first failure;
// status() reports it.
class Stmt {
 public:
  Stmt(SqliteDb::Locked& db, absl::string_view sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& Bind(int i, int64_t v);
  Stmt& Bind(int i, const std::string& v);
  Stmt& BindBlob(int i, const std::string& v);
  // True while a row is available.
  bool Step();
  int64_t Int(int col);
  std::string Text(int col);
  bool ok() const;
  absl::Status status() const;
  // Every row, each made by read(*this); the statement's failure if it failed.
  template <typename Read>
  auto All(Read read) -> absl::StatusOr<std::vector<decltype(read(*this))>> {
    std::vector<decltype(read(*this))> out;
    while (Step()) out.push_back(read(*this));
    if (!ok()) return status();
    return out;
  }

 private:
  SqliteDb::Locked& db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

// BEGIN IMMEDIATE now; ROLLBACK on destruction unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(SqliteDb::Locked& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  // Unavailable if the transaction could not begin (the database is busy past its timeout).
  absl::Status Begun() const { return begun_; }
  [[nodiscard]] absl::Status Commit();

 private:
  SqliteDb::Locked& db_;
  absl::Status begun_;
  bool done_ = false;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_SQLITE_DB_H_
