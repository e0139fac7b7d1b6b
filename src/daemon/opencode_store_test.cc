#include "src/daemon/opencode_store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/daemon/timeline.h"

namespace airlock {
namespace {

StoreRow Part(std::string id, std::string role, int64_t updated_ms, std::string data) {
  StoreRow row;
  row.id = std::move(id);
  row.message_id = "msg_1";
  row.session_id = "ses_1";
  row.role = std::move(role);
  row.updated_ms = updated_ms;
  row.data_size = data.size();
  row.data = std::move(data);
  return row;
}

std::vector<std::string> Kinds(const std::vector<AgentEvent>& events) {
  std::vector<std::string> kinds;
  for (const AgentEvent& e : events) kinds.push_back(e.kind);
  return kinds;
}

constexpr int64_t kStart = 1'800'000'000'000;

TEST(OpenCodeFollowerTest, EachPartIsSaidOnceAsItsStateAllows) {
  OpenCodeFollower follower(*FindAgent("opencode"), "", 7, kStart);
  AgentStoreMessage first = follower.NextRequest();
  EXPECT_EQ(first.path, ".local/share/opencode/opencode.db");
  EXPECT_LT(first.after_ms, kStart);  // a little before: clocks differ

  // The prompt, a call being made, and the agent's text as it streams.
  std::vector<AgentEvent> events = follower.Take(
      {Part("prt_1", "user", kStart + 10, R"({"type":"text","text":"fix the test"})"),
       Part(
           "prt_2", "assistant", kStart + 20,
           R"({"type":"tool","callID":"toolu_1","tool":"write","state":{"status":"pending","input":{}}})"),
       Part("prt_3", "assistant", kStart + 30,
            R"({"type":"text","text":"Writ","time":{"start":1800000000030}})"),
       Part("prt_4", "assistant", kStart + 31, R"({"type":"reasoning","text":"hmm"})"),
       Part("prt_5", "assistant", kStart + 32, R"({"type":"step-start"})")},
      kStart + 100, false);
  EXPECT_EQ(Kinds(events), std::vector<std::string>{"agent.prompt"});
  EXPECT_EQ(events[0].text, "fix the test");
  EXPECT_EQ(events[0].agent, "opencode");
  EXPECT_EQ(events[0].exec_id, 7);
  EXPECT_EQ(events[0].unix_ms, kStart + 10);
  EXPECT_EQ(follower.NextRequest().after_ms, kStart + 32);
  EXPECT_EQ(follower.NextRequest().after_id, "prt_5");

  // The call runs and completes; the text ends; the prompt comes again unchanged.
  events = follower.Take(
      {Part("prt_1", "user", kStart + 40, R"({"type":"text","text":"fix the test"})"),
       Part("prt_2", "assistant", kStart + 50,
            R"({"type":"tool","callID":"toolu_1","tool":"write","state":{"status":"completed",)"
            R"("input":{"filePath":"/workspace/a.py"},"output":"Wrote file",)"
            R"("time":{"start":1800000000045,"end":1800000000050}}})"),
       Part(
           "prt_3", "assistant", kStart + 60,
           R"({"type":"text","text":"Written.","time":{"start":1800000000030,"end":1800000000060}})")},
      kStart + 100, false);
  ASSERT_EQ(Kinds(events),
            (std::vector<std::string>{"agent.tool_call", "agent.tool_result", "agent.message"}));
  EXPECT_EQ(events[0].tool, "write");
  EXPECT_EQ(events[0].tool_id, "toolu_1");
  EXPECT_EQ(events[0].text, R"({"filePath":"/workspace/a.py"})");
  EXPECT_EQ(events[0].unix_ms, kStart + 45);
  EXPECT_EQ(events[1].text, "Wrote file");
  EXPECT_EQ(events[1].tool_id, "toolu_1");
  EXPECT_EQ(events[2].text, "Written.");

  // Nothing is said twice.
  events = follower.Take(
      {Part("prt_2", "assistant", kStart + 70,
            R"({"type":"tool","callID":"toolu_1","tool":"write","state":{"status":"completed"}})")},
      kStart + 100, true);
  EXPECT_TRUE(events.empty());
}

TEST(OpenCodeFollowerTest, FailuresUnfinishedTextsAndOversizedPartsAreSaid) {
  OpenCodeFollower follower(*FindAgent("opencode"), "", 1, kStart);
  StoreRow big = Part("prt_9", "assistant", kStart + 5, "");
  big.data_size = kMaxStoreRowBytes + 1;
  std::vector<AgentEvent> events = follower.Take(
      {Part("prt_1", "assistant", kStart + 1,
            R"({"type":"tool","callID":"c","tool":"bash","state":{"status":"error",)"
            R"("input":{"command":"false"},"error":"exit 1","time":{"start":1,"end":2}}})"),
       Part("prt_2", "assistant", kStart + 2, R"({"type":"text","text":"half a sent"})"),
       Part("prt_3", "user", kStart + 3, R"({"type":"text","text":"file body","synthetic":true})"),
       Part("prt_4", "user", kStart + 4, "not json {"), big},
      kStart + 100, false);
  ASSERT_EQ(Kinds(events),
            (std::vector<std::string>{"agent.tool_call", "agent.tool_result", "agent.note"}));
  EXPECT_EQ(events[0].unix_ms, kStart + 1);  // its own times are long ago: when it changed
  EXPECT_EQ(events[1].text, "[error] exit 1");
  EXPECT_NE(events[2].text.find("1 parts of OpenCode's store over"), std::string::npos);
  // At the command's end, the text as far as it got.
  events = follower.Take({}, kStart + 200, true);
  ASSERT_EQ(Kinds(events), std::vector<std::string>{"agent.message"});
  EXPECT_EQ(events[0].text, "half a sent");
}

TEST(OpenCodeFollowerTest, TheNextCommandGoesOnFromTheLastOnesCursorNeverBack) {
  OpenCodeFollower first(*FindAgent("opencode"), "", 1, kStart);
  first.Take({Part("prt_1", "user", kStart + 10, R"({"type":"text","text":"hi"})")}, kStart + 20,
             true);
  // A command long after: its own start is later than where the last one stopped.
  OpenCodeFollower second(*FindAgent("opencode"), "", 2, kStart + 100000);
  second.StartAt(first.Position());
  EXPECT_EQ(second.NextRequest().after_ms, kStart + 100000 - 5000);
  // A command right after: it goes on from the last one's cursor.
  OpenCodeFollower third(*FindAgent("opencode"), "", 3, kStart);
  third.StartAt(first.Position());
  EXPECT_EQ(third.NextRequest().after_ms, kStart + 10);
  EXPECT_EQ(third.NextRequest().after_id, "prt_1");
}

TEST(OpenCodeFollowerTest, HostileTextsStayWithinTheCaps) {
  OpenCodeFollower follower(*FindAgent("opencode"), "", 1, kStart);
  std::string deep(100, '[');
  std::string huge(kAgentTextBytes * 2, 'x');
  std::vector<AgentEvent> events = follower.Take(
      {Part("a", "user", kStart + 1, R"({"type":"text","text":")" + huge + R"("})"),
       Part("b", "user", kStart + 2, R"({"type":"text","text":)" + deep + "}"),
       Part("c", "user", kStart + 3, "{\"type\":\"text\",\"text\":\"bad \xff bytes\"}"),
       Part("d", "assistant", kStart + 4,
            R"({"type":"tool","callID":")" + huge +
                R"(","tool":"x","state":{"status":"running"}})")},
      kStart + 100, false);
  ASSERT_EQ(Kinds(events),
            (std::vector<std::string>{"agent.prompt", "agent.prompt", "agent.tool_call"}));
  EXPECT_LT(events[0].text.size(), kAgentTextBytes + 100);
  EXPECT_EQ(events[1].text, "bad \\xff bytes");
  EXPECT_LE(events[2].tool_id.size(), 256u);
}

}  // namespace
}  // namespace airlock
