#include "src/daemon/session_events.h"

#include <gtest/gtest.h>

#include <thread>

#include "src/daemon/state_store_testing.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

absl::Time Soon() { return absl::Now() + absl::Seconds(5); }

TEST(SessionEventsTest, TheStorePublishesCommittedChangesToTheirTenantOnly) {
  testing::TempDir dir;
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  SessionEventHub hub;
  (*store)->set_events(&hub);
  Principal alice{1001, 1001}, bob{1002, 1002};
  auto all_of_alice = hub.Subscribe(alice.Tenant(), "");
  auto one_of_alice = hub.Subscribe(alice.Tenant(), "s-a2");
  auto all_of_bob = hub.Subscribe(bob.Tenant(), "");
  auto every_tenant = hub.Subscribe(SessionEventHub::kEveryTenant, "");

  SessionRecord a = NewSession("s-a", alice);
  ASSERT_TRUE((*store)->sessions().Create(alice, a).ok());
  ASSERT_TRUE((*store)->sessions().Create(alice, NewSession("s-a2", alice)).ok());
  ASSERT_TRUE((*store)->sessions().Create(bob, NewSession("s-b", bob)).ok());
  ASSERT_TRUE(
      (*store)
          ->sessions()
          .SetState(alice, alice.Tenant(), "s-a", SessionState::kPaused, "idle", 0, "session.pause")
          .ok());
  absl::StatusOr<int64_t> exec = (*store)->commands().Start(alice, a, {.argv = {"echo", "hi"}});
  ASSERT_TRUE(exec.ok());
  ASSERT_TRUE((*store)->commands().End(a, *exec, 3, "").ok());
  net::NetEvent allowed{.kind = "connect", .name = "ok.test", .port = 443, .allowed = true};
  net::NetEvent denied{.kind = "connect",
                       .name = "evil.test",
                       .port = 443,
                       .allowed = false,
                       .reason = "no rule allows evil.test"};
  net::NetEvent dns{.kind = "dns", .name = "nowhere.test", .allowed = false};
  ASSERT_TRUE((*store)->net_events().Append(a, {allowed, denied, dns}).ok());
  ASSERT_TRUE((*store)->sessions().Delete(alice, alice.Tenant(), "s-a").ok());
  // A change that fails publishes nothing.
  EXPECT_FALSE((*store)
                   ->sessions()
                   .SetState(alice, alice.Tenant(), "no-such", SessionState::kRunning, "", 0,
                             "session.resume")
                   .ok());

  std::vector<SessionEvent> seen;
  while (std::optional<SessionEvent> e = all_of_alice->Next(absl::Now())) seen.push_back(*e);
  ASSERT_EQ(seen.size(), 8u);
  EXPECT_EQ(seen[0].kind, SessionEvent::Kind::kState);
  EXPECT_EQ(seen[0].state, SessionState::kCreating);
  EXPECT_EQ(seen[2].state, SessionState::kPaused);
  EXPECT_EQ(seen[2].reason, "idle");
  EXPECT_EQ(seen[3].kind, SessionEvent::Kind::kExecStart);
  EXPECT_EQ(seen[3].argv, (std::vector<std::string>{"echo", "hi"}));
  EXPECT_EQ(seen[4].kind, SessionEvent::Kind::kExecExit);
  EXPECT_EQ(seen[4].exec_id, *exec);
  EXPECT_EQ(seen[4].exit_code, 3);
  EXPECT_EQ(seen[5].kind, SessionEvent::Kind::kDenied);  // only the denials, not the allowed
  EXPECT_EQ(seen[5].destination, "evil.test:443");
  EXPECT_EQ(seen[5].reason, "no rule allows evil.test");
  EXPECT_EQ(seen[6].destination, "nowhere.test");
  EXPECT_EQ(seen[7].kind, SessionEvent::Kind::kRemoved);
  for (const SessionEvent& e : seen) EXPECT_EQ(e.lost, 0u);

  std::optional<SessionEvent> only = one_of_alice->Next(absl::Now());
  ASSERT_TRUE(only.has_value());
  EXPECT_EQ(only->session_id, "s-a2");
  EXPECT_FALSE(one_of_alice->Next(absl::Now()).has_value());
  std::optional<SessionEvent> bobs = all_of_bob->Next(absl::Now());
  ASSERT_TRUE(bobs.has_value());
  EXPECT_EQ(bobs->session_id, "s-b");
  EXPECT_FALSE(all_of_bob->Next(absl::Now()).has_value());  // nothing of another tenant
  // Root's and the operators' watch: everyone's, each naming its tenant.
  std::vector<std::string> everyone;
  while (std::optional<SessionEvent> e = every_tenant->Next(absl::Now())) {
    everyone.push_back(e->tenant + " " + e->session_id);
  }
  ASSERT_EQ(everyone.size(), 9u);
  EXPECT_EQ(everyone[2], "uid:1002 s-b");
}

TEST(SessionEventsTest, ASlowWatcherLosesTheOldestAndIsToldHowMany) {
  SessionEventHub hub;
  auto slow = hub.Subscribe("uid:1", "");
  for (size_t i = 0; i < SessionEventHub::kQueueEvents + 10; ++i) {
    hub.Publish({.kind = SessionEvent::Kind::kExecStart,
                 .tenant = "uid:1",
                 .session_id = "s",
                 .exec_id = static_cast<int64_t>(i)});
  }
  std::optional<SessionEvent> first = slow->Next(absl::Now());
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->exec_id, 10);
  EXPECT_EQ(first->lost, 10u);
  EXPECT_EQ(slow->Next(absl::Now())->lost, 0u);
}

TEST(SessionEventsTest, NextWaitsForAnEventAndAGoneWatcherIsDropped) {
  SessionEventHub hub;
  auto watcher = hub.Subscribe("uid:1", "");
  std::thread later([&] {
    absl::SleepFor(absl::Milliseconds(50));
    hub.Publish({.kind = SessionEvent::Kind::kRemoved, .tenant = "uid:1", .session_id = "s"});
  });
  std::optional<SessionEvent> e = watcher->Next(Soon());
  later.join();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, SessionEvent::Kind::kRemoved);
  EXPECT_FALSE(watcher->Next(absl::Now() + absl::Milliseconds(20)).has_value());
  std::weak_ptr<SessionEventHub::Subscription> weak = watcher;
  watcher.reset();
  hub.Publish({.kind = SessionEvent::Kind::kRemoved, .tenant = "uid:1", .session_id = "s"});
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace airlock
