// Claude Code in a session, end to end and without the internet: `airlock agent claude` runs
// the real agent (the airlock/claude image scripts/test.sh builds) against a loopback fake of
// the Anthropic Messages API that the test scripts: first a tool call that writes a file in
// /workspace, then a final message. The agent reaches the fake as api.anthropic.com through the
// egress proxy (the test resolver maps the name to the loopback), and the proxy puts the real
// key into its requests: the fake checks it got that key, and the guest only ever held a
// placeholder. Afterwards `airlock diff` shows the file and `airlock log --json` has the
// prompt, the tool call, its result and the command the agent ran in, and beside them the
// activity record's write of the file by that command, which the agent's call names. A second
// run in the same session adds its own events only.
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

constexpr char kRealKey[] = "sk-ant-api03-airlock-test-real-key-0123456789";
constexpr char kPrompt[] = "Write a note for the reviewers into /workspace/NOTES.md";
constexpr char kToolId[] = "toolu_01AirlockTestWrite";

TEST(AgentClaudeTest, ClaudeCodeWorksInASessionAndItsTimelineShowsWhatItDid) {
  FakeMessagesApi api("Write",
                      {{"file_path", "/workspace/NOTES.md"},
                       {"content", "Reviewed by the agent in the airlock.\n"}},
                      kToolId, "Done: the note is in NOTES.md.");

  TestDir project;
  ASSERT_TRUE(WriteFileAtomically(project.path + "/README.md", "# A project\n", 0644).ok());
  Result r;
  std::string id = RunAgent({"agent", "claude", "--workspace", project.path, "--", "-p", kPrompt,
                             "--dangerously-skip-permissions"},
                            kRealKey, &r);
  ASSERT_FALSE(id.empty()) << r.err;
  EXPECT_NE(r.out.find("Done: the note is in NOTES.md."), std::string::npos) << r.out << r.err;

  // The API got the real key every time; the guest held a placeholder.
  std::vector<std::string> keys = api.keys();
  ASSERT_FALSE(keys.empty());
  for (const std::string& k : keys) EXPECT_EQ(k, kRealKey);
  Result env = RunAirlock({"exec", id, "--", "sh", "-c", "echo $ANTHROPIC_API_KEY"});
  EXPECT_EQ(env.out.find(kRealKey), std::string::npos);
  EXPECT_NE(env.out.find("AIRLOCK_PLACEHOLDER_"), std::string::npos) << env.out;

  // The agent's work, in the session (still running) and not on the host.
  Result diff = RunAirlock({"diff", id});
  EXPECT_NE(diff.out.find("NOTES.md"), std::string::npos) << diff.out << diff.err;
  EXPECT_NE(diff.out.find("+Reviewed by the agent in the airlock."), std::string::npos);
  EXPECT_FALSE(std::ifstream(project.path + "/NOTES.md").good());
  EXPECT_NE(RunAirlock({"ls"}).out.find(id), std::string::npos);

  // What it did, in its timeline.
  Result log = RunAirlock({"log", id, "--json"});
  ASSERT_EQ(log.exit_code, 0) << log.err;
  nlohmann::json events = nlohmann::json::parse(log.out);
  AgentRun run = FindAgentRun(events, "claude", kPrompt, "Write", kToolId, "/workspace/NOTES.md",
                              "Done: the note");
  ExpectWholeRun(run, log.out);

  // Again in the same session: the transcript is read from its start, and the first run's
  // events are not stored a second time.
  Result again;
  RunAgent({"agent", "claude", "--session", id, "--", "-p", "Say it again",
            "--dangerously-skip-permissions"},
           kRealKey, &again);
  log = RunAirlock({"log", id, "--json"});
  int first = 0, second = 0;
  for (const nlohmann::json& e : nlohmann::json::parse(log.out)) {
    if (e["kind"] != "agent.prompt") continue;
    first += absl::StrContains(e.value("text", ""), kPrompt);
    second += absl::StrContains(e.value("text", ""), "Say it again");
  }
  EXPECT_EQ(first, 1) << log.out;
  EXPECT_EQ(second, 1) << log.out;
  RunAirlock({"rm", id});
}

// What an agent's transcripts may hold is the guest's to choose: markup, escape sequences,
// invalid UTF-8, a 100 MB line, a symbolic link to a file the agent never wrote, a file that
// grows without end. The timeline keeps them as text, follows no link, and stays within caps.
TEST(AgentClaudeTest, HostileTranscriptsStayTextAndWithinTheCaps) {
  Result created = RunAirlock({"session", "create", "--disk", "2g"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id(absl::StripTrailingAsciiWhitespace(created.out));
  const char* setup =
      "set -e; d=/root/.claude/projects/p; mkdir -p $d\n"
      "printf '%s\\n' '{\"type\":\"user\",\"message\":{\"content\":\"</script><script>"
      "alert(1)</script> <img src=x onerror=alert(2)> [x](javascript:alert(3)) "
      "\\u001b[31mred\"}}' > $d/hostile.jsonl\n"
      "printf '{\"type\":\"user\",\"message\":{\"content\":\"bad \\377\\376 bytes\"}}\\n' "
      ">> $d/hostile.jsonl\n"
      "printf '{\"type\":\"user\",\"message\":{\"content\":\"SECRET-VIA-LINK\"}}\\n' > "
      "/tmp/secret.jsonl\n"
      "mkdir -p /tmp/elsewhere; cp /tmp/secret.jsonl /tmp/elsewhere/\n"
      "ln -s /tmp/secret.jsonl $d/evil.jsonl; ln -s /tmp/elsewhere $d/linked\n"
      "head -c 100000000 /dev/zero | tr '\\0' x > $d/huge.jsonl\n";
  Result r = RunAirlock({"exec", id, "--", "sh", "-c", setup});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The "agent": a command marked as Claude Code that makes a transcript grow without end.
  r = RunAirlock({"exec", "--agent", "claude", id, "--", "sh", "-c",
                  "while :; do echo '{\"type\":\"user\",\"message\":{\"content\":\"again\"}}'; "
                  "done > /root/.claude/projects/p/grow.jsonl & sleep 9; kill $!"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Result log = RunAirlock({"log", id, "--json"});
  ASSERT_EQ(log.exit_code, 0) << log.err;
  nlohmann::json events = nlohmann::json::parse(log.out);
  bool markup = false, bytes = false, skipped = false;
  size_t again = 0, agent_events = 0;
  for (const nlohmann::json& e : events) {
    std::string kind = e["kind"], text = e.value("text", "");
    if (kind.rfind("agent.", 0) != 0) continue;
    ++agent_events;
    EXPECT_EQ(text.find("SECRET-VIA-LINK"), std::string::npos);
    markup |= absl::StrContains(text, "</script><script>alert(1)</script> <img src=x");
    bytes |= text == "bad \\xff\\xfe bytes";
    skipped |= kind == "agent.note" && absl::StrContains(text, "huge.jsonl");
    again += text == "again";
  }
  EXPECT_TRUE(markup) << log.out.substr(0, 3000);
  EXPECT_TRUE(bytes) << log.out.substr(0, 3000);
  EXPECT_TRUE(skipped) << log.out.substr(0, 3000);
  EXPECT_GT(again, 0u);
  EXPECT_LE(agent_events, static_cast<size_t>(20000));
  // The text form shows the escape sequence as \x1b, not as a colour.
  Result text = RunAirlock({"log", id});
  EXPECT_EQ(text.out.find('\x1b'), std::string::npos);
  EXPECT_NE(text.out.find("\\x1b[31mred"), std::string::npos);
  RunAirlock({"rm", id});
}

}  // namespace
}  // namespace airlock
