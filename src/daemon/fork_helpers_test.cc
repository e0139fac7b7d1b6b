#include "src/daemon/fork_helpers.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace airlock {
namespace {

ForkHelperKind Kind(const std::string& digest, uint64_t memory_mib = 512) {
  ForkHelperKind kind;
  kind.image.digest = digest;
  kind.memory_bytes = memory_mib << 20;
  kind.disk_bytes = 1 << 30;
  return kind;
}

// Starts no VM: each helper is told apart by its memory descriptor's address.
class FakeStarts {
 public:
  ForkHelpers::Starter starter() {
    return [this](const ForkHelperKind&, bool ahead) -> absl::StatusOr<ForkHelper> {
      (ahead ? ahead_ : now_)++;
      return ForkHelper{.vm = nullptr, .memory = std::make_shared<UniqueFd>()};
    };
  }
  int now() const { return now_; }
  int ahead() const { return ahead_; }

 private:
  std::atomic<int> now_{0}, ahead_{0};
};

// Polls until `done` (at most 5 s).
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 500; ++i) {
    if (done()) return true;
    usleep(10000);
  }
  return done();
}

TEST(ForkHelpersTest, AForkLeavesAHelperOfItsKindForTheNextOne) {
  FakeStarts starts;
  ForkHelpers helpers({}, starts.starter());
  ForkHelperKind kind = Kind("sha256:a");
  absl::StatusOr<ForkHelper> first = helpers.Take(kind);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(starts.now(), 1);
  EXPECT_FALSE(helpers.Waiting());  // none before the fork is done
  helpers.Done(kind);
  ASSERT_TRUE(Eventually([&] { return helpers.Waiting() == kind.Key(); }));
  EXPECT_EQ(starts.ahead(), 1);
  absl::StatusOr<ForkHelper> second = helpers.Take(kind);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(starts.now(), 1);       // the one waiting, not a new one
  EXPECT_FALSE(helpers.Waiting());  // handed out once
}

TEST(ForkHelpersTest, AnotherKindGetsItsOwnAndReplacesTheOneWaiting) {
  FakeStarts starts;
  ForkHelpers helpers({}, starts.starter());
  helpers.Done(Kind("sha256:a"));
  ASSERT_TRUE(Eventually([&] { return helpers.Waiting() == Kind("sha256:a").Key(); }));
  ASSERT_TRUE(helpers.Take(Kind("sha256:b")).ok());
  EXPECT_EQ(starts.now(), 1);  // a's does not fit b
  EXPECT_EQ(helpers.Waiting(), Kind("sha256:a").Key());
  helpers.Done(Kind("sha256:b"));
  ASSERT_TRUE(Eventually([&] { return helpers.Waiting() == Kind("sha256:b").Key(); }));
  EXPECT_EQ(starts.ahead(), 2);  // one waits at a time
}

TEST(ForkHelpersTest, OneNobodyTookGoesAfterTheIdleTime) {
  FakeStarts starts;
  ForkHelpers helpers({.idle = absl::Milliseconds(100)}, starts.starter());
  ASSERT_TRUE(helpers.Take(Kind("sha256:a")).ok());
  helpers.Done(Kind("sha256:a"));
  ASSERT_TRUE(Eventually([&] { return starts.ahead() == 1; }));
  EXPECT_TRUE(Eventually([&] { return !helpers.Waiting(); }));
}

TEST(ForkHelpersTest, NoneAheadWithThePoolOffOrOverItsBudget) {
  FakeStarts off_starts;
  ForkHelpers off({.ahead_of_need = false}, off_starts.starter());
  ASSERT_TRUE(off.Take(Kind("sha256:a")).ok());
  off.Done(Kind("sha256:a"));
  FakeStarts big_starts;
  ForkHelpers big({.memory_budget_bytes = 1ull << 30}, big_starts.starter());
  ASSERT_TRUE(big.Take(Kind("sha256:a", 2048)).ok());
  big.Done(Kind("sha256:a", 2048));
  usleep(200000);
  EXPECT_EQ(off_starts.ahead(), 0);
  EXPECT_FALSE(off.Waiting());
  EXPECT_EQ(big_starts.ahead(), 0);
  EXPECT_FALSE(big.Waiting());
  EXPECT_EQ(off_starts.now(), 1);
  EXPECT_EQ(big_starts.now(), 1);
}

}  // namespace
}  // namespace airlock
