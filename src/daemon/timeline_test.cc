#include "src/daemon/timeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "src/daemon/state_store_testing.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

TEST(TimelineTest, MergesTheSessionsRecordsInTimeOrder) {
  testing::TempDir dir;
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  Principal alice{1001, 1001}, bob{1002, 1002};
  SessionRecord s = NewSession("s-a", alice);
  ASSERT_TRUE((*store)->sessions().Create(alice, s).ok());
  ASSERT_TRUE((*store)->sessions().Create(bob, NewSession("s-b", bob)).ok());
  usleep(3000);
  ExecRecord run;
  run.argv = {"sh", "-c", "echo a b", ""};
  run.user = "app";
  run.cwd = "/work";
  run.tty = true;
  absl::StatusOr<int64_t> exec = (*store)->commands().Start(alice, s, run);
  ASSERT_TRUE(exec.ok());
  std::string big(100000, 'x');
  ASSERT_TRUE((*store)
                  ->commands()
                  .AppendOutput(s, {{0, NowUnixMs(), *exec, LogStream::kEvent, "$ sh"},
                                    {0, NowUnixMs(), *exec, LogStream::kStdout, "out\n"},
                                    {0, NowUnixMs(), *exec, LogStream::kStderr, big}})
                  .ok());
  ASSERT_TRUE((*store)->commands().End(s, *exec, 2, "").ok());
  usleep(3000);  // each step on a later millisecond: the timeline orders by time
  AgentEvent call{0,         NowUnixMs(), "agent.tool_call",     "claude", *exec,
                  "toolu_1", "Bash",      "{\"command\":\"ls\"}"};
  AgentEvent result{0, NowUnixMs(), "agent.tool_result", "claude", *exec, "toolu_1", "", "a\nb"};
  ASSERT_TRUE((*store)->commands().AppendAgentEvents(s, {call, result}).ok());
  usleep(3000);
  ASSERT_TRUE(
      (*store)->audit().Audit(alice, alice.Tenant(), "file.write", "s-a", "/tmp/x: ok").ok());
  usleep(3000);
  // Bob's attempt at alice's session is on her session's record.
  (*store)->sessions().Get(bob.Tenant(), "s-a").IgnoreError();

  absl::StatusOr<std::vector<v1::TimelineEvent>> events =
      BuildTimeline(**store, alice.Tenant(), "s-a", 0);
  ASSERT_TRUE(events.ok()) << events.status();
  std::vector<std::string> kinds;
  for (const v1::TimelineEvent& e : *events) kinds.push_back(e.kind());
  EXPECT_EQ(kinds, (std::vector<std::string>{"session.create", "exec", "agent.tool_call",
                                             "agent.tool_result", "file.write", "session.lookup"}));
  for (size_t i = 0; i < events->size(); ++i) EXPECT_EQ((*events)[i].seq(), i + 1);
  const v1::TimelineEvent& e = (*events)[1];
  EXPECT_EQ(e.exec_id(), static_cast<uint64_t>(*exec));
  ASSERT_EQ(e.argv_size(), 4);
  EXPECT_EQ(e.argv(2), "echo a b");  // the exact words, not joined
  EXPECT_EQ(e.argv(3), "");
  EXPECT_EQ(e.user(), "app");
  EXPECT_EQ(e.cwd(), "/work");
  EXPECT_TRUE(e.tty());
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_TRUE(e.failed());
  EXPECT_GE(e.duration_ms(), 0);
  EXPECT_EQ(e.actor(), "uid:1001/gid:1001");
  EXPECT_EQ(e.output().size(), kTimelineOutputBytes);  // its first bytes, stdout and stderr
  EXPECT_EQ(e.output().substr(0, 5), "out\nx");
  EXPECT_EQ(e.output_total(), 4u + big.size());
  EXPECT_EQ((*events)[2].tool_id(), "toolu_1");
  EXPECT_EQ((*events)[2].summary(), "Bash: {\"command\":\"ls\"}");
  EXPECT_EQ((*events)[3].exec_id(), static_cast<uint64_t>(*exec));
  EXPECT_TRUE((*events)[5].failed());
  EXPECT_EQ((*events)[5].actor(), "uid:1002");

  // Another tenant sees no timeline of it; the owner's stays after the session is removed.
  EXPECT_TRUE(absl::IsNotFound(BuildTimeline(**store, bob.Tenant(), "s-a", 0).status()));
  ASSERT_TRUE((*store)
                  ->sessions()
                  .SetState(alice, alice.Tenant(), "s-a", SessionState::kStopped, "removed", 0,
                            "session.remove")
                  .ok());
  events = BuildTimeline(**store, alice.Tenant(), "s-a", 10);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().kind(), "session.remove");
  EXPECT_EQ((*events)[1].output(), "out\nxxxxxx");
}

TEST(TimelineTest, AgentEventsAreCappedPerSession) {
  testing::TempDir dir;
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok());
  Principal alice{1001, 1001};
  SessionRecord s = NewSession("s-a", alice);
  ASSERT_TRUE((*store)->sessions().Create(alice, s).ok());
  std::vector<AgentEvent> batch(1000);
  for (int round = 0; round < 21; ++round) {
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i] = {
          0, NowUnixMs(), "agent.message", "claude", 0, "", "", std::to_string(round * 1000 + i)};
    }
    ASSERT_TRUE((*store)->commands().AppendAgentEvents(s, batch).ok());
  }
  absl::StatusOr<std::vector<AgentEvent>> kept =
      (*store)->commands().ReadAgentEvents(alice.Tenant(), "s-a");
  ASSERT_TRUE(kept.ok());
  ASSERT_EQ(kept->size(), static_cast<size_t>(CommandLog::kMaxAgentEventsPerSession));
  EXPECT_EQ(kept->front().text, "1000");  // the oldest went first
  EXPECT_EQ(kept->back().text, "20999");
}

}  // namespace
}  // namespace airlock
