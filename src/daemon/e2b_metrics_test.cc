#include "src/daemon/e2b_metrics.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

GuestMetrics At(uint64_t busy, uint64_t total) {
  return GuestMetrics{.cpu_busy_ticks = busy,
                      .cpu_total_ticks = total,
                      .ticks_per_second = 100,
                      .vcpus = 2,
                      .memory_total_bytes = 512 << 20,
                      .memory_available_bytes = 384 << 20,
                      .processes = 3,
                      .disk_total_bytes = 1 << 30,
                      .disk_used_bytes = 1 << 20,
                      .uptime_ms = 1000};
}

TEST(E2bMetricsTest, ASampleIsTheCpuUsedBetweenTwoAnswersAndTheLastOnesMemory) {
  absl::Time at = absl::FromUnixSeconds(1764892800);
  std::optional<gateway::e2b::Metric> m = E2bMetrics::Between(At(100, 1000), At(150, 1200), at);
  ASSERT_TRUE(m.has_value());
  EXPECT_DOUBLE_EQ(m->cpu_used_pct, 25.0);
  EXPECT_EQ(m->cpu_count, 2u);
  EXPECT_EQ(m->mem_used, uint64_t{128} << 20);
  EXPECT_EQ(m->mem_total, uint64_t{512} << 20);
  EXPECT_EQ(m->disk_used, uint64_t{1} << 20);
  EXPECT_EQ(m->unix_ms, int64_t{1764892800} * 1000);
  // No time between them, or counters that started anew (a guest that was resumed or
  // rebooted), give no sample rather than a made-up one.
  EXPECT_FALSE(E2bMetrics::Between(At(100, 1000), At(100, 1000), at).has_value());
  EXPECT_FALSE(E2bMetrics::Between(At(100, 1000), At(5, 20), at).has_value());
}

}  // namespace
}  // namespace airlock
