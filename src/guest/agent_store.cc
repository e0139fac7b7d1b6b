#include "src/guest/agent_store.h"

#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace airlock::guest {
namespace {

// The work one reading may do: SQLite calls the handler every kProgressSteps virtual machine
// steps, and the query stops after kMaxProgressCalls of them.
constexpr int kProgressSteps = 1000;
constexpr int kMaxProgressCalls = 50000;
// No value longer than this is read, and SQLite allocates no more than kHeapLimit in all.
constexpr int kMaxValueBytes = 32 << 20;
constexpr sqlite3_int64 kHeapLimit = 128 << 20;

// Rows changed after the cursor, in (time_updated, id) order, with the role of each part's
// message. Every value is cast, and compared by bytes, whatever the schema declares: the order
// is the one the host checks.
constexpr char kOpenCodeQuery[] =
    "SELECT CAST(p.id AS TEXT), CAST(p.message_id AS TEXT), CAST(p.session_id AS TEXT), "
    "CAST(p.time_updated AS INTEGER) AS t, CASE WHEN ?4 THEN CAST(p.data AS TEXT) END, "
    "(SELECT CASE WHEN json_valid(m.data) THEN CAST(json_extract(m.data, '$.role') AS TEXT) END "
    "FROM message m WHERE m.id = p.message_id LIMIT 1) "
    "FROM part p WHERE t > ?1 OR (t = ?1 AND CAST(p.id AS TEXT) > ?2 COLLATE BINARY) "
    "ORDER BY t, CAST(p.id AS TEXT) COLLATE BINARY LIMIT ?3";

std::string Failed(int error, const std::string& what) {
  return EncodeStoreAnswer(error, what.substr(0, kMaxReasonBytes), {});
}

int OnProgress(void* calls) { return ++*static_cast<int*>(calls) > kMaxProgressCalls; }

std::string Text(sqlite3_stmt* statement, int column) {
  const unsigned char* text = sqlite3_column_text(statement, column);
  int size = sqlite3_column_bytes(statement, column);
  return text == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(text), size);
}

struct Database {
  sqlite3* db = nullptr;
  ~Database() { sqlite3_close_v2(db); }
};
struct Statement {
  sqlite3_stmt* statement = nullptr;
  ~Statement() { sqlite3_finalize(statement); }
};

// One query: rows, or false with *code (SQLite's) and *what.
bool Query(sqlite3* db, const AgentStoreMessage& request, bool with_data,
           std::vector<StoreRow>* rows, int* code, std::string* what) {
  rows->clear();
  Statement s;
  *code = sqlite3_prepare_v2(db, kOpenCodeQuery, -1, &s.statement, nullptr);
  if (*code == SQLITE_OK) {
    sqlite3_bind_int64(s.statement, 1, request.after_ms);
    sqlite3_bind_text(s.statement, 2, request.after_id.data(),
                      static_cast<int>(request.after_id.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(s.statement, 3, request.max_rows);
    sqlite3_bind_int(s.statement, 4, with_data ? 1 : 0);
  }
  uint64_t bytes = 0;
  while (*code == SQLITE_OK || *code == SQLITE_ROW) {
    *code = sqlite3_step(s.statement);
    if (*code != SQLITE_ROW) break;
    StoreRow row;
    row.id = Text(s.statement, 0);
    row.message_id = Text(s.statement, 1);
    row.session_id = Text(s.statement, 2);
    row.updated_ms = sqlite3_column_int64(s.statement, 3);
    row.role = Text(s.statement, 5);
    // What the host refuses is left out here: an id it cannot hold, or a row not after the
    // last one (a table without a unique id may hold the same one twice).
    if (row.id.empty() || row.id.size() > kMaxStoreIdBytes ||
        row.message_id.size() > kMaxStoreIdBytes || row.session_id.size() > kMaxStoreIdBytes) {
      continue;
    }
    if (row.role.size() > kMaxStoreIdBytes) row.role.clear();
    const StoreRow* last = rows->empty() ? nullptr : &rows->back();
    int64_t last_ms = last != nullptr ? last->updated_ms : request.after_ms;
    const std::string& last_id = last != nullptr ? last->id : request.after_id;
    if (row.updated_ms < last_ms || (row.updated_ms == last_ms && row.id <= last_id)) continue;
    std::string data = with_data ? Text(s.statement, 4) : std::string();
    row.data_size = data.size();
    if (data.size() <= kMaxStoreRowBytes) row.data = std::move(data);
    if (bytes + row.data.size() > request.max_bytes) break;  // the next reading goes on here
    bytes += row.data.size();
    rows->push_back(std::move(row));
  }
  if (*code == SQLITE_DONE || *code == SQLITE_ROW) return true;
  *what = sqlite3_errmsg(db);
  return false;
}

int ErrnoOf(int code) {
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return EBUSY;
    case SQLITE_CANTOPEN:
      return ENOENT;
    case SQLITE_NOMEM:
      return ENOMEM;
    case SQLITE_INTERRUPT:
      return ETIME;
    case SQLITE_IOERR:
      return EIO;
    default:
      return EPROTO;
  }
}

}  // namespace

std::string ReadAgentStore(const AgentStoreMessage& request, const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return Failed(errno, path + ": " + strerror(errno));
  if (!S_ISREG(st.st_mode)) return Failed(EPROTO, path + " is not a regular file");
  sqlite3_hard_heap_limit64(kHeapLimit);
  Database d;
  int code =
      sqlite3_open_v2(path.c_str(), &d.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, nullptr);
  if (code != SQLITE_OK) {
    return Failed(ErrnoOf(code), path + ": " + (d.db != nullptr ? sqlite3_errmsg(d.db) : "open"));
  }
  // The schema is the guest's: nothing in it runs, and nothing it declares is trusted.
  sqlite3_db_config(d.db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(d.db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_db_config(d.db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
  sqlite3_db_config(d.db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
  sqlite3_db_config(d.db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  sqlite3_limit(d.db, SQLITE_LIMIT_LENGTH, kMaxValueBytes);
  sqlite3_exec(d.db, "PRAGMA cell_size_check=ON", nullptr, nullptr, nullptr);
  sqlite3_busy_timeout(d.db, 2000);
  int calls = 0;
  sqlite3_progress_handler(d.db, kProgressSteps, OnProgress, &calls);
  std::vector<StoreRow> rows;
  std::string what;
  bool read = Query(d.db, request, /*with_data=*/true, &rows, &code, &what);
  if (!read && (code & 0xff) == SQLITE_TOOBIG) {
    // A value over the cap: these rows come without their data, so the next reading goes on.
    calls = 0;
    read = Query(d.db, request, /*with_data=*/false, &rows, &code, &what);
  }
  if (!read) return Failed(ErrnoOf(code), path + ": " + what);
  return EncodeStoreAnswer(0, "", rows);
}

pid_t StartStoreReader(const AgentStoreMessage& request, const std::string& path, int out_fd) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  // The child: the signals PID 1 blocks or ignores are its own again, and it is stopped after
  // kStoreReadSeconds whatever it waits on.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGALRM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  alarm(kStoreReadSeconds);
  setpriority(PRIO_PROCESS, 0, 10);
  std::string answer = ReadAgentStore(request, path);
  for (std::string_view left = answer; !left.empty();) {
    ssize_t n = write(out_fd, left.data(), left.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(1);
    left.remove_prefix(static_cast<size_t>(n));
  }
  _exit(0);
}

}  // namespace airlock::guest
