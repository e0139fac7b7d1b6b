#include "src/daemon/agent_transcripts.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "src/daemon/timeline.h"

namespace airlock {
namespace {

std::string Line(const nlohmann::json& j) { return j.dump() + "\n"; }

TEST(AgentTranscriptsTest, ClaudeLinesBecomePromptsMessagesToolCallsAndResults) {
  int64_t now = 1796117460000;
  auto prompt =
      ParseClaudeLine(Line({{"type", "user"},
                            {"timestamp", "2026-12-01T09:30:00.500Z"},
                            {"message", {{"role", "user"}, {"content", "fix the failing test"}}}}),
                      7, 0, now);
  ASSERT_EQ(prompt.size(), 1u);
  EXPECT_EQ(prompt[0].kind, "agent.prompt");
  EXPECT_EQ(prompt[0].text, "fix the failing test");
  EXPECT_EQ(prompt[0].exec_id, 7);
  EXPECT_EQ(prompt[0].unix_ms, 1796117400500);  // its own time, within the run
  auto said = ParseClaudeLine(Line({{"type", "assistant"},
                                    {"message",
                                     {{"content",
                                       {{{"type", "thinking"}, {"thinking", "hmm"}},
                                        {{"type", "text"}, {"text", "Running the tests."}},
                                        {{"type", "tool_use"},
                                         {"id", "toolu_1"},
                                         {"name", "Bash"},
                                         {"input", {{"command", "make test"}}}}}}}}}),
                              7, 0, now);
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[0].kind, "agent.message");
  EXPECT_EQ(said[1].kind, "agent.tool_call");
  EXPECT_EQ(said[1].tool, "Bash");
  EXPECT_EQ(said[1].tool_id, "toolu_1");
  EXPECT_EQ(said[1].text, "{\"command\":\"make test\"}");
  EXPECT_EQ(said[1].unix_ms, now);  // no timestamp: when it was read
  auto result =
      ParseClaudeLine(Line({{"type", "user"},
                            {"timestamp", "2099-01-01T00:00:00Z"},  // in the future: not believed
                            {"message",
                             {{"content",
                               {{{"type", "tool_result"},
                                 {"tool_use_id", "toolu_1"},
                                 {"is_error", true},
                                 {"content", {{{"type", "text"}, {"text", "1 failed"}}}}}}}}}}),
                      7, 0, now);
  ASSERT_EQ(result.size(), 1u);
  EXPECT_EQ(result[0].kind, "agent.tool_result");
  EXPECT_EQ(result[0].text, "[error] 1 failed");
  EXPECT_EQ(result[0].unix_ms, now);
  // Lines that say nothing to a person, and lines that are not what they should be.
  for (const std::string& line :
       {Line({{"type", "summary"}, {"summary", "x"}}),
        Line({{"type", "user"}, {"isMeta", true}, {"message", {{"content", "<command>"}}}}),
        std::string("not json\n"), std::string("[[[[1]]]]\n"), std::string(100000, '[') + "\n",
        Line({{"type", "assistant"}, {"message", {{"content", 42}}}})}) {
    EXPECT_TRUE(ParseClaudeLine(line, 7, 0, now).empty()) << line.substr(0, 80);
  }
  // A line stamped before the command started was an earlier command's; a later command that
  // reads the transcript again from its start leaves it.
  EXPECT_TRUE(ParseClaudeLine(Line({{"type", "user"},
                                    {"timestamp", "2026-12-01T09:30:00.500Z"},
                                    {"message", {{"content", "an earlier run"}}}}),
                              7, 1796117400501, now)
                  .empty());
  EXPECT_EQ(ParseClaudeLine(Line({{"type", "user"},
                                  {"timestamp", "2026-12-01T09:30:00.500Z"},
                                  {"message", {{"content", "this run"}}}}),
                            7, 1796117400500, now)
                .size(),
            1u);
  // Long texts are cut.
  auto long_text = ParseClaudeLine(
      Line({{"type", "user"}, {"message", {{"content", std::string(100000, 'a')}}}}), 7, 0, now);
  ASSERT_EQ(long_text.size(), 1u);
  EXPECT_LT(long_text[0].text.size(), kAgentTextBytes + 64);
}

TEST(AgentTranscriptsTest, TheFollowerKeepsUnfinishedLinesAndSkipsHugeOnes) {
  TranscriptFollower follower(*FindAgent("claude"), "", 3, 0);
  TailRequest first = follower.NextRequest();
  EXPECT_EQ(first.dir, ".claude/projects");
  EXPECT_EQ(first.suffix, ".jsonl");
  EXPECT_TRUE(first.offsets.empty());
  std::string a = Line({{"type", "user"}, {"message", {{"content", "one"}}}});
  std::string b = Line({{"type", "user"}, {"message", {{"content", "two"}}}});
  // The second line arrives in two pieces.
  std::vector<AgentEvent> got = follower.Take({{"p/s.jsonl", 100, 0, a + b.substr(0, 10)}}, 1000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].text, "one");
  EXPECT_EQ(follower.NextRequest().offsets.at("p/s.jsonl"), a.size() + 10);
  got = follower.Take({{"p/s.jsonl", 200, a.size() + 10, b.substr(10)}}, 1000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].text, "two");
  // A line over the cap is skipped (and said so), then the next one is read.
  std::string huge(kMaxTranscriptLine + 1, 'x');
  uint64_t at = follower.NextRequest().offsets.at("p/s.jsonl");
  got = follower.Take({{"p/s.jsonl", at + huge.size() + 1000, at, huge}}, 1000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, "agent.note");
  at += huge.size();
  got = follower.Take({{"p/s.jsonl", at + 1000, at, "tail of the huge line\n" + a}}, 1000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].text, "one");
  // A file that starts over (offset 0 again) is read anew.
  got = follower.Take({{"p/s.jsonl", b.size(), 0, b}}, 1000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].text, "two");
}

// The next command in a session goes on where the last one's follower stopped: whole lines
// are not read again, an unfinished one is read again from its start.
TEST(AgentTranscriptsTest, TheNextCommandGoesOnWhereTheLastOneStopped) {
  AgentPositions positions;
  std::string a = Line({{"type", "user"}, {"message", {{"content", "one"}}}});
  std::string b = Line({{"type", "user"}, {"message", {{"content", "two"}}}});
  TranscriptFollower first(*FindAgent("claude"), "", 3, 0);
  ASSERT_EQ(first.Take({{"p/s.jsonl", 100, 0, a + b.substr(0, 10)}}, 1000).size(), 1u);
  positions.Put("claude/", first.Position());
  TranscriptFollower second(*FindAgent("claude"), "", 4, 0);
  second.StartAt(*positions.Get("claude/"));
  EXPECT_EQ(second.NextRequest().offsets.at("p/s.jsonl"), a.size());
  std::vector<AgentEvent> got = second.Take({{"p/s.jsonl", 100, a.size(), b}}, 1000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].text, "two");
  EXPECT_EQ(got[0].exec_id, 4);
  EXPECT_FALSE(positions.Get("opencode/").has_value());
}

TEST(AgentTranscriptsTest, AFloodingFileDoesNotCrowdOutTheOthers) {
  TranscriptFollower follower(*FindAgent("claude"), "", 3, 0);
  std::string flood;
  for (int i = 0; i < 2000; ++i) flood += Line({{"type", "user"}, {"message", {{"content", "x"}}}});
  std::string quiet = "{\"type\":\"user\",\"message\":{\"content\":\"quiet \xff\"}}\n";
  std::vector<AgentEvent> got = follower.Take(
      {{"a.jsonl", flood.size(), 0, flood}, {"b.jsonl", quiet.size(), 0, quiet}}, 1000);
  ASSERT_EQ(got.size(), kMaxAgentEventsPerFile + 2);
  EXPECT_EQ(got[kMaxAgentEventsPerFile].text, "quiet \\xff");  // invalid UTF-8, kept as \xff
  EXPECT_EQ(got.back().kind, "agent.note");
  EXPECT_EQ(got.back().text.rfind("1500 transcript lines were not kept", 0), 0u) << got.back().text;
}

TEST(AgentTranscriptsTest, TailAnswersAreCheckedBeforeUse) {
  std::string ok =
      EncodeTailRecord({"proj/a.jsonl", 10, 2, "abc"}) + EncodeTailRecord({"b.jsonl", 3, 0, ""});
  std::vector<TailRecord> records;
  std::string error;
  ASSERT_TRUE(DecodeTailRecords(ok, 1024, &records, &error)) << error;
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].bytes, "abc");
  for (const TailRecord& bad : std::vector<TailRecord>{{"../shadow", 4, 0, "root"},
                                                       {"/etc/shadow", 4, 0, "root"},
                                                       {"a/./b", 1, 0, "x"},
                                                       {"", 1, 0, "x"},
                                                       {std::string("a\0b", 3), 1, 0, "x"},
                                                       {"a", 2, 1, "xy"},
                                                       {"a", 1, 2, ""}}) {
    EXPECT_FALSE(DecodeTailRecords(EncodeTailRecord(bad), 1024, &records, &error)) << bad.name;
  }
  EXPECT_FALSE(DecodeTailRecords(ok, 2, &records, &error));  // more than asked for
  EXPECT_FALSE(DecodeTailRecords(ok.substr(0, ok.size() - 1), 1024, &records, &error));
}

}  // namespace
}  // namespace airlock
