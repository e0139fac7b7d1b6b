#include "src/guest/agent_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace airlock::guest {
namespace {

constexpr char kSchema[] =
    "CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer "
    "NOT NULL, time_updated integer NOT NULL, data text NOT NULL);"
    "CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT "
    "NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);";

class AgentStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/agent-store-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    root_ = dir;
    path_ = root_ + "/opencode.db";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Sql(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << (error != nullptr ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
  }

  AgentStoreMessage Request(int64_t after_ms = 0, std::string after_id = "") {
    return AgentStoreMessage{.store = static_cast<uint32_t>(AgentStore::kOpenCode),
                             .path = "opencode.db",
                             .after_ms = after_ms,
                             .after_id = std::move(after_id),
                             .max_rows = 100,
                             .max_bytes = kMaxStoreRowBytes};
  }

  // The rows of an answer, which must decode as the host decodes it; *failure: its errno.
  std::vector<StoreRow> Rows(const AgentStoreMessage& request, int* failure = nullptr) {
    std::string answer = ReadAgentStore(request, path_);
    int number = -1;
    std::string what, error;
    std::vector<StoreRow> rows;
    EXPECT_TRUE(DecodeStoreAnswer(answer, request, &number, &what, &rows, &error)) << error;
    if (failure != nullptr) {
      *failure = number;
    } else {
      EXPECT_EQ(number, 0) << what;
    }
    return rows;
  }

  std::string root_, path_;
};

TEST_F(AgentStoreTest, ReadsPartsAfterTheCursorInOrderWithTheirMessagesRole) {
  Sql(std::string(kSchema) +
      "INSERT INTO message VALUES ('msg_1','ses',1,10,'{\"role\":\"user\"}');"
      "INSERT INTO message VALUES ('msg_2','ses',2,20,'{\"role\":\"assistant\"}');"
      "INSERT INTO part VALUES ('prt_b','msg_1','ses',1,10,'{\"type\":\"text\",\"text\":\"hi\"}');"
      "INSERT INTO part VALUES ('prt_a','msg_2','ses',2,30,'{\"type\":\"tool\"}');"
      "INSERT INTO part VALUES ('prt_c','msg_2','ses',2,30,'{\"type\":\"text\"}');"
      "INSERT INTO part VALUES ('prt_d','msg_9','ses',2,40,'{}');");
  std::vector<StoreRow> rows = Rows(Request());
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].id, "prt_b");
  EXPECT_EQ(rows[0].role, "user");
  EXPECT_EQ(rows[0].data, "{\"type\":\"text\",\"text\":\"hi\"}");
  EXPECT_EQ(rows[0].data_size, rows[0].data.size());
  EXPECT_EQ(rows[1].id, "prt_a");
  EXPECT_EQ(rows[1].role, "assistant");
  EXPECT_EQ(rows[2].id, "prt_c");
  EXPECT_EQ(rows[3].role, "");  // its message is not in the store
  // After (30, prt_a): the rest only.
  rows = Rows(Request(30, "prt_a"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].id, "prt_c");
  AgentStoreMessage two = Request();
  two.max_rows = 2;
  EXPECT_EQ(Rows(two).size(), 2u);
}

TEST_F(AgentStoreTest, AMissingStoreOrSomethingElseSaysSo) {
  int failure = 0;
  EXPECT_TRUE(Rows(Request(), &failure).empty());
  EXPECT_EQ(failure, ENOENT);
  ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);  // opening it would wait for a writer
  EXPECT_TRUE(Rows(Request(), &failure).empty());
  EXPECT_EQ(failure, EPROTO);
  unlink(path_.c_str());
  Sql("CREATE TABLE other (x);");
  EXPECT_TRUE(Rows(Request(), &failure).empty());
  EXPECT_EQ(failure, EPROTO);
}

// A store made to harm its reader: the part table a view (which would run what it names),
// triggers, ids that repeat, a row too large to send, values of other types. The reader runs
// nothing of it and answers only what the host accepts.
TEST_F(AgentStoreTest, AHostileStoreRunsNothingAndAnswersWithinTheCaps) {
  Sql("CREATE TABLE message (id, session_id, time_created, time_updated, data);"
      "CREATE TABLE real_part (id, message_id, session_id, time_created, time_updated, data);"
      "CREATE VIEW part AS SELECT * FROM real_part;");
  int failure = 0;
  EXPECT_TRUE(Rows(Request(), &failure).empty());
  EXPECT_EQ(failure, EPROTO);  // views are off

  std::filesystem::remove(path_);
  std::string big(kMaxStoreRowBytes + 1, 'x');
  Sql("CREATE TABLE message (id, session_id, time_created, time_updated, data);"
      "CREATE TABLE part (id, message_id, session_id, time_created, time_updated, data);"
      "INSERT INTO message VALUES ('m', 's', 1, 1, 'not json');"
      "INSERT INTO part VALUES ('p1', 'm', 's', 1, 5, '{}');"
      "INSERT INTO part VALUES ('p1', 'm', 's', 1, 5, '{\"again\":1}');"
      "INSERT INTO part VALUES (X'7000ff', 'm', 's', 1, '6', 7);"
      "INSERT INTO part VALUES ('', 'm', 's', 1, 8, '{}');"
      "INSERT INTO part VALUES ('p9', 'm', 's', 1, 9, '" +
      big + "');");
  std::vector<StoreRow> rows = Rows(Request());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].id, "p1");  // once
  EXPECT_EQ(rows[0].role, "");  // the message's data is not JSON
  EXPECT_EQ(rows[1].id, std::string("p\0\xff", 3));
  EXPECT_EQ(rows[1].updated_ms, 6);
  EXPECT_EQ(rows[1].data, "7");
  EXPECT_EQ(rows[2].id, "p9");  // without its data, but with its size
  EXPECT_EQ(rows[2].data, "");
  EXPECT_EQ(rows[2].data_size, big.size());
}

// The reader is a child: it answers on the pipe and exits.
TEST_F(AgentStoreTest, TheReaderIsAChildThatAnswersOnItsPipe) {
  Sql(std::string(kSchema) + "INSERT INTO part VALUES ('p', 'm', 's', 1, 2, '{}');");
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t pid = StartStoreReader(Request(), path_, out[1]);
  ASSERT_GT(pid, 0);
  close(out[1]);
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof(buf))) > 0;) answer.append(buf, n);
  close(out[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  int number = -1;
  std::string what, error;
  std::vector<StoreRow> rows;
  ASSERT_TRUE(DecodeStoreAnswer(answer, Request(), &number, &what, &rows, &error)) << error;
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id, "p");
}

}  // namespace
}  // namespace airlock::guest
