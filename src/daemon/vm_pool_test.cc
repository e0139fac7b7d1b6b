#include "src/daemon/vm_pool.h"

#include <atomic>
#include <set>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace airlock {
namespace {

// A VM that only knows its pid and whether it still exists.
class FakeVm : public Vm {
 public:
  FakeVm(pid_t pid, std::atomic<int>* alive) : pid_(pid), alive_(alive) { ++*alive_; }
  ~FakeVm() override { --*alive_; }
  absl::Status WaitReady(absl::Time) override { return absl::OkStatus(); }
  absl::Status SaveState(int, absl::Time) override { return absl::UnimplementedError("fake"); }
  absl::Status Continue(absl::Time) override { return absl::UnimplementedError("fake"); }
  GuestChannel& channel() override { std::abort(); }
  pid_t pid() const override { return pid_; }
  void Kill(const absl::Status&) override {}
  std::string DiagnosticTail() const override { return ""; }
  std::optional<std::string> ExitReason() override { return std::nullopt; }
  int shared_memory_fd() const override { return -1; }
  std::string accelerator() const override { return "tcg"; }
  std::string vmm_version() const override { return "fake"; }
  absl::Status Adopt(const std::string&, const std::string&, GuestSync, absl::Time) override {
    return absl::OkStatus();
  }
  void Detach() override {}

 private:
  pid_t pid_;
  std::atomic<int>* alive_;
};

class VmPoolTest : public ::testing::Test {
 protected:
  std::unique_ptr<VmPool> MakePool(VmPoolOptions options) {
    options.most_calm_wait = absl::ZeroDuration();  // a busy test host must not hold it up
    return std::make_unique<VmPool>(
        options, "/nonexistent-airlock-pool",
        [this](const ImageInfo& image, const VmShape&, const std::string&, const std::string& name,
               std::string* template_dir) -> absl::StatusOr<LaunchedVm> {
          absl::MutexLock lock(&mu_);
          if (fail_) return absl::UnavailableError("no template");
          names_.insert(name);
          *template_dir = template_dir_;
          ++made_;
          return LaunchedVm{std::make_unique<FakeVm>(1000 + made_, &alive_), UniqueFd()};
        },
        [](const std::string&) {});
  }
  // Waits (up to 20 s) until the pool holds `count` VMs.
  bool WaitForPooled(VmPool& pool, size_t count) {
    for (int i = 0; i < 2000; ++i) {
      if (pool.List().size() == count) return true;
      usleep(10000);
    }
    return false;
  }

  ImageInfo image_{.name = "img", .digest = "sha256:aa"};
  VmShape shape_;
  absl::Mutex mu_;
  std::string template_dir_ ABSL_GUARDED_BY(mu_) = "/t/1";
  bool fail_ ABSL_GUARDED_BY(mu_) = false;
  int made_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> names_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> alive_{0};
};

TEST_F(VmPoolTest, TheTargetFollowsDemandUpToTheMaximum) {
  EXPECT_EQ(VmPool::TargetAfterTake(0, /*hit=*/false, 3), 1u);
  EXPECT_EQ(VmPool::TargetAfterTake(1, false, 3), 2u);
  EXPECT_EQ(VmPool::TargetAfterTake(3, false, 3), 3u);
  EXPECT_EQ(VmPool::TargetAfterTake(0, /*hit=*/true, 3), 1u);
  EXPECT_EQ(VmPool::TargetAfterTake(2, true, 3), 2u);
  EXPECT_EQ(VmPool::TargetAfterTake(5, true, 3), 3u);
}

TEST_F(VmPoolTest, AMissFillsTheKindAndEachVmGoesToOneTakerOnly) {
  auto pool = MakePool({.max_per_kind = 2});
  EXPECT_FALSE(pool->Take(image_, shape_, "/t/1").has_value());  // nothing asked for it yet
  ASSERT_TRUE(WaitForPooled(*pool, 1));
  std::optional<LaunchedVm> first = pool->Take(image_, shape_, "/t/1");
  ASSERT_TRUE(first.has_value());
  for (const PooledVmInfo& pooled : pool->List()) {  // a refill may be there already
    EXPECT_NE(pooled.pid, first->vm->pid());         // handed out, not shared
  }
  ASSERT_TRUE(WaitForPooled(*pool, 1));
  std::optional<LaunchedVm> second = pool->Take(image_, shape_, "/t/1");
  ASSERT_TRUE(second.has_value());
  EXPECT_NE(first->vm->pid(), second->vm->pid());
  // Another shape is another kind: it finds nothing.
  EXPECT_FALSE(pool->Take(image_, VmShape{.memory_mib = 1024}, "/t/1").has_value());
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(names_.size(), static_cast<size_t>(made_));  // every VM its own cgroup name
}

TEST_F(VmPoolTest, AVmOfAnOlderTemplateIsDestroyedNeverHandedOut) {
  auto pool = MakePool({.max_per_kind = 1});
  pool->Take(image_, shape_, "/t/1");
  ASSERT_TRUE(WaitForPooled(*pool, 1));
  {
    absl::MutexLock lock(&mu_);
    template_dir_ = "/t/2";  // a new kernel, agent, QEMU or image: a new template
  }
  EXPECT_FALSE(pool->Take(image_, shape_, "/t/2").has_value());
  ASSERT_TRUE(WaitForPooled(*pool, 1));
  std::optional<LaunchedVm> taken = pool->Take(image_, shape_, "/t/2");
  ASSERT_TRUE(taken.has_value());
  // Once the pool has made its next one, the old one is gone: the one handed out and the new
  // one live. (Counted before the refill, the count raced it.)
  ASSERT_TRUE(WaitForPooled(*pool, 1));
  EXPECT_EQ(alive_.load(), 2);
}

TEST_F(VmPoolTest, AKindNobodyAsksForScalesToZero) {
  auto pool = MakePool({.max_per_kind = 2, .idle = absl::Milliseconds(300)});
  pool->Take(image_, shape_, "/t/1");
  ASSERT_TRUE(WaitForPooled(*pool, 1));
  ASSERT_TRUE(WaitForPooled(*pool, 0));
  EXPECT_EQ(alive_.load(), 0);
}

TEST_F(VmPoolTest, TheMemoryBudgetBoundsThePool) {
  auto pool = MakePool({.max_per_kind = 4, .memory_budget_bytes = 1ull << 30});
  for (int i = 0; i < 4; ++i) pool->Take(image_, shape_, "/t/1");  // target 4 x 512 MiB
  ASSERT_TRUE(WaitForPooled(*pool, 2));
  usleep(1500000);
  EXPECT_EQ(pool->List().size(), 2u);
}

TEST_F(VmPoolTest, ZeroMeansNoPoolAndStoppingDestroysEveryVm) {
  auto none = MakePool({.max_per_kind = 0});
  EXPECT_FALSE(none->Take(image_, shape_, "/t/1").has_value());
  usleep(300000);
  {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(made_, 0);
  }
  auto pool = MakePool({.max_per_kind = 2});
  pool->Take(image_, shape_, "/t/1");
  ASSERT_TRUE(WaitForPooled(*pool, 1));
  pool.reset();
  EXPECT_EQ(alive_.load(), 0);
}

TEST_F(VmPoolTest, AFailureToMakeOneIsRetriedLater) {
  {
    absl::MutexLock lock(&mu_);
    fail_ = true;
  }
  auto pool = MakePool({.max_per_kind = 1});
  pool->Take(image_, shape_, "/t/1");
  usleep(500000);
  EXPECT_EQ(pool->List().size(), 0u);
  pool.reset();  // stops while it waits to retry, at once
}

}  // namespace
}  // namespace airlock
