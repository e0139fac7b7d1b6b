#include "src/daemon/quotas.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace airlock {
namespace {

TEST(QuotasTest, TheFileSetsDefaultsAndPerTenantValues) {
  absl::StatusOr<Quotas> q = Quotas::Parse(
      "# operators' quotas\n"
      "default running=8 memory=16g\n"
      "tenant uid:1000 running=2 pull=512m  # a small one\n"
      "default disk=1t\n");
  ASSERT_TRUE(q.ok()) << q.status();
  const Quota& others = q->For("uid:2000");
  EXPECT_EQ(others.limits.running, 8u);
  EXPECT_EQ(others.limits.memory_bytes, 16ull << 30);
  EXPECT_EQ(others.limits.disk_bytes, 1ull << 40);
  EXPECT_EQ(others.limits.sessions, 64u);  // untouched: the built-in default
  const Quota& small = q->For("uid:1000");
  EXPECT_EQ(small.limits.running, 2u);
  EXPECT_EQ(small.pull_bytes, 512ull << 20);
  EXPECT_EQ(small.limits.memory_bytes, 16ull << 30);  // the defaults, wherever they are written
  EXPECT_EQ(small.limits.disk_bytes, 1ull << 40);
}

TEST(QuotasTest, ABadFileSaysWhichLineAndWhatToWrite) {
  for (const char* text : {"defaults running=1\n", "default running=lots\n", "default cpus=2\n",
                           "tenant running=2\n", "\n\ndefault memory=8x\n"}) {
    absl::StatusOr<Quotas> q = Quotas::Parse(text);
    ASSERT_FALSE(q.ok()) << text;
    EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(q.status().message().find("line "), std::string::npos) << q.status();
    EXPECT_NE(q.status().message().find("write `default KEY=VALUE"), std::string::npos);
  }
  EXPECT_NE(Quotas::Parse("\n\ndefault memory=8x\n").status().message().find("line 3"),
            std::string::npos);
}

TEST(QuotasTest, ACheckNamesTheQuotaItsValueAndTheUse) {
  Quota quota;
  quota.limits.running = 2;
  quota.limits.memory_bytes = 1ull << 30;
  EXPECT_TRUE(Quotas::Check(quota, {.running = 1}, {.running = 1}).ok());
  absl::Status over = Quotas::Check(quota, {.running = 2}, {.running = 1});
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("over the running quota of 2: 2 in use, this needs 1 more"),
            std::string::npos)
      << over;
  over = Quotas::Check(quota, {.memory_bytes = 768ull << 20}, {.memory_bytes = 512ull << 20});
  EXPECT_NE(
      over.message().find("over the memory quota of 1.0GiB: 768MiB in use, this needs 512MiB"),
      std::string::npos)
      << over;
  // What a request does not add is never checked (a tenant over its logs can still resume).
  EXPECT_TRUE(Quotas::Check(quota, {.running = 5}, {.sessions = 1}).ok());
}

TEST(QuotasTest, RequestsUnderWayHoldTheirShareUntilTheStoreShowsIt) {
  Quota quota;
  quota.limits.running = 2;
  QuotaReservations reservations;
  QuotaAmounts stored;  // what the state store shows
  auto usage = [&] { return stored; };
  absl::StatusOr<QuotaReservations::Hold> a = reservations.Admit("t", quota, usage, {.running = 1});
  absl::StatusOr<QuotaReservations::Hold> b = reservations.Admit("t", quota, usage, {.running = 1});
  ASSERT_TRUE(a.ok() && b.ok());
  // Both are under way: a third does not fit, though the store shows nothing yet.
  EXPECT_EQ(reservations.Admit("t", quota, usage, {.running = 1}).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(reservations.Admit("other", quota, usage, {.running = 1}).ok());  // per tenant
  // a's session is in the store now: its hold goes, the total stays.
  stored.running = 1;
  a->Settle({.running = 1});
  EXPECT_EQ(reservations.Held("t").running, 1u);
  EXPECT_FALSE(reservations.Admit("t", quota, usage, {.running = 1}).ok());
  // b failed: its hold goes with it.
  b->Release();
  EXPECT_TRUE(reservations.Admit("t", quota, usage, {.running = 1}).ok());
  EXPECT_EQ(reservations.Held("t").running, 0u);
}

// The moment a request's session shows in the store and its hold goes is one step for every
// other request: none sees it twice (stored and held) and is refused below the quota.
TEST(QuotasTest, ARequestRecordingItsSessionIsNeverCountedTwice) {
  Quota quota;
  quota.limits.running = 2;
  QuotaReservations reservations;
  std::atomic<uint64_t> stored{0};
  auto usage = [&] { return QuotaAmounts{.running = stored.load()}; };
  absl::StatusOr<QuotaReservations::Hold> a = reservations.Admit("t", quota, usage, {.running = 1});
  ASSERT_TRUE(a.ok());
  absl::StatusOr<QuotaReservations::Hold> b = absl::UnknownError("not asked");
  std::thread other;
  absl::Status recorded = a->SettleWith({.running = 1}, [&] {
    stored = 1;
    // Another request asks while this one's record is made and its hold not yet given back.
    other = std::thread([&] { b = reservations.Admit("t", quota, usage, {.running = 1}); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return absl::OkStatus();
  });
  other.join();
  EXPECT_TRUE(recorded.ok());
  EXPECT_TRUE(b.ok()) << b.status();              // 1 stored + 1 asked: within 2
  EXPECT_EQ(reservations.Held("t").running, 1u);  // b's
}

}  // namespace
}  // namespace airlock
