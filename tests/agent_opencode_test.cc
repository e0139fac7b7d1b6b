// OpenCode in a session, end to end and without the internet: `airlock agent opencode` runs the
// real agent (the airlock/opencode image scripts/test.sh builds from npm's opencode-ai) against
// the loopback fake of the Anthropic Messages API (tests/fake_messages_api.h): first a call of
// its write tool that makes a file in /workspace, then a final message. The proxy puts the real
// key into its requests; the guest holds a placeholder. Afterwards `airlock diff` shows the
// file, and `airlock log --json` has what OpenCode's own store (its SQLite database) says —
// the prompt, the tool call, its result, the answer — beside the activity record's write of
// the file by the agent's command.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "tests/fake_messages_api.h"

namespace airlock {
namespace {

constexpr char kRealKey[] = "sk-ant-api03-airlock-test-real-key-opencode-42";
constexpr char kPrompt[] = "Write a note for the reviewers into /workspace/NOTES.md";
constexpr char kToolId[] = "toolu_01AirlockOpenCodeWrite";

TEST(AgentOpenCodeTest, OpenCodeWorksInASessionAndItsStoreReachesTheTimeline) {
  FakeMessagesApi api(
      "write",
      {{"filePath", "/workspace/NOTES.md"}, {"content", "Reviewed by OpenCode in the airlock.\n"}},
      kToolId, "Done: the note is in NOTES.md.");

  TestDir project;
  ASSERT_TRUE(WriteFileAtomically(project.path + "/README.md", "# A project\n", 0644).ok());
  Result r;
  std::string id = RunAgent(
      {"agent", "opencode", "--workspace", project.path, "--", "run", kPrompt}, kRealKey, &r);
  ASSERT_FALSE(id.empty()) << r.err;
  EXPECT_NE(r.out.find("Done: the note is in NOTES.md."), std::string::npos) << r.out << r.err;

  // The API got the real key every time; the guest held a placeholder.
  std::vector<std::string> keys = api.keys();
  ASSERT_FALSE(keys.empty());
  for (const std::string& k : keys) EXPECT_EQ(k, kRealKey);

  // The agent's work, in the session and not on the host.
  Result diff = RunAirlock({"diff", id});
  EXPECT_NE(diff.out.find("+Reviewed by OpenCode in the airlock."), std::string::npos)
      << diff.out << diff.err;
  EXPECT_FALSE(std::ifstream(project.path + "/NOTES.md").good());

  // What it did, from its own store and from the activity record, side by side.
  Result log = RunAirlock({"log", id, "--json"});
  ASSERT_EQ(log.exit_code, 0) << log.err;
  nlohmann::json events = nlohmann::json::parse(log.out);
  AgentRun run = FindAgentRun(events, "opencode", kPrompt, "write", kToolId, "/workspace/NOTES.md",
                              "Done: the note");
  ExpectWholeRun(run, log.out);
  for (const nlohmann::json& e : events) {
    std::string kind = e["kind"];
    if (kind.rfind("agent.", 0) == 0) {
      EXPECT_EQ(e.value("actor", ""), "opencode") << e.dump();
    }
  }
  RunAirlock({"rm", id});
}

// OpenCode's store as a hostile guest makes it, read by a command marked as OpenCode's (no
// OpenCode needed): a FIFO where the database goes, then bytes that are no database, then a
// real one a script wrote. The first two fail only their readings (the command ends as usual,
// the session goes on); the third reaches the timeline, and the activity record leaves out what
// the agent's reader opened.
TEST(AgentOpenCodeTest, AHostileStoreFailsOnlyItsReadingAndTheReaderIsNotRecorded) {
  Result created = RunAirlock({"session", "create"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id(absl::StripTrailingAsciiWhitespace(created.out));
  const std::string db = "/root/.local/share/opencode/opencode.db";
  ASSERT_EQ(RunAirlock({"exec", id, "--", "sh", "-c",
                        "mkdir -p /root/.local/share/opencode && mkfifo " + db})
                .exit_code,
            0);
  Result r = RunAirlock({"exec", "--agent", "opencode", id, "--", "sleep", "5"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(RunAirlock({"exec", id, "--", "sh", "-c",
                        "rm " + db + " && head -c 100000 /dev/urandom > " + db})
                .exit_code,
            0);
  r = RunAirlock({"exec", "--agent", "opencode", id, "--", "sleep", "5"});
  EXPECT_EQ(r.exit_code, 0) << r.err;

  // A store as OpenCode makes it, written while the command runs.
  const char* script = R"py(
import sqlite3, time
db = sqlite3.connect('/root/.local/share/opencode/opencode.db')
db.execute('PRAGMA journal_mode=WAL')
db.execute('CREATE TABLE message (id text PRIMARY KEY, session_id text, time_created integer, '
           'time_updated integer, data text)')
db.execute('CREATE TABLE part (id text PRIMARY KEY, message_id text, session_id text, '
           'time_created integer, time_updated integer, data text)')
now = int(time.time() * 1000)
db.execute("INSERT INTO message VALUES ('msg_1', 's', ?, ?, '{\"role\":\"user\"}')", (now, now))
db.execute("INSERT INTO part VALUES ('prt_1', 'msg_1', 's', ?, ?, ?)",
           (now, now, '{"type":"text","text":"\\u001b[31mplease"}'))
db.commit()
time.sleep(4)
)py";
  ASSERT_EQ(RunAirlock({"exec", id, "--", "rm", db}).exit_code, 0);
  r = RunAirlock({"exec", "--agent", "opencode", id, "--", "python3", "-c", script});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(RunAirlock({"exec", id, "--", "echo", "still here"}).out, "still here\n");

  Result log = RunAirlock({"log", id, "--json"});
  ASSERT_EQ(log.exit_code, 0) << log.err;
  nlohmann::json events = nlohmann::json::parse(log.out);
  int prompts = 0;
  for (const nlohmann::json& e : events) {
    std::string kind = e["kind"];
    if (kind == "agent.prompt") {
      ++prompts;
      EXPECT_EQ(e.value("text", ""), "\x1b[31mplease");
      EXPECT_EQ(e.value("actor", ""), "opencode");
    }
    // The commands' own reads and writes are recorded; the agent's reader's are not.
    if (absl::StartsWith(kind, "activity.") &&
        absl::StrContains(e.value("path", ""), "opencode.db")) {
      std::string process = e.value("process", "");
      EXPECT_TRUE(process == "python3" || process == "mkfifo" || process == "rm" || process == "sh")
          << e.dump();
    }
  }
  EXPECT_EQ(prompts, 1) << log.out.substr(0, 4000);
  // In text, the escape byte the store held is shown escaped.
  Result text = RunAirlock({"log", id});
  EXPECT_EQ(text.out.find('\x1b'), std::string::npos);
  EXPECT_NE(text.out.find("\\x1b[31mplease"), std::string::npos) << text.out;
  RunAirlock({"rm", id});
}

}  // namespace
}  // namespace airlock
