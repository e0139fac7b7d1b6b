#include "src/common/byte_rate.h"

#include <gtest/gtest.h>

#include "src/testing/fake_clock.h"

namespace airlock {
namespace {

// A rate with a fake clock whose sleeps move the clock and add up.
struct Rated {
  explicit Rated(uint64_t rate)
      : rate(rate, &clock, [this](absl::Duration d) {
          slept += d;
          clock.Advance(d);
        }) {}
  FakeClock clock;
  absl::Duration slept;
  ByteRate rate;
};

TEST(ByteRateTest, ASecondsWorthPassesAtOnceAndMoreWaitsItsShare) {
  Rated r(1000);
  r.rate.Take(1000);  // the burst
  EXPECT_EQ(r.slept, absl::ZeroDuration());
  for (int i = 0; i < 10; ++i) r.rate.Take(300);
  EXPECT_EQ(r.slept, absl::Seconds(3));
}

TEST(ByteRateTest, IdleTimeRefillsUpToOneSecondsWorth) {
  Rated r(1000);
  r.rate.Take(1000);
  r.clock.Advance(absl::Seconds(60));
  r.rate.Take(1000);
  EXPECT_EQ(r.slept, absl::ZeroDuration());
  r.rate.Take(500);
  EXPECT_EQ(r.slept, absl::Milliseconds(500));
}

TEST(ByteRateTest, ZeroIsNoLimit) {
  Rated r(0);
  r.rate.Take(1ull << 40);
  EXPECT_EQ(r.slept, absl::ZeroDuration());
}

}  // namespace
}  // namespace airlock
