// A byte rate limit for connections relayed by threads (a token bucket that may go into debt):
// Take(n) returns once n more bytes fit within bytes_per_second, averaged over a second's
// burst. Shared by every connection of one session in one direction. Thread-safe.
#ifndef AIRLOCK_COMMON_BYTE_RATE_H_
#define AIRLOCK_COMMON_BYTE_RATE_H_

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/common/clock.h"

namespace airlock {

class ByteRate {
 public:
  using Sleep = std::function<void(absl::Duration)>;
  // 0: no limit. Tests give a FakeClock and a sleep that moves it.
  explicit ByteRate(uint64_t bytes_per_second, Clock* clock = &SystemClock(),
                    Sleep sleep = absl::SleepFor)
      : rate_(bytes_per_second), clock_(clock), sleep_(std::move(sleep)) {}
  void Take(uint64_t bytes);

 private:
  const uint64_t rate_;
  Clock* const clock_;
  const Sleep sleep_;
  absl::Mutex mu_;
  double available_ ABSL_GUARDED_BY(mu_) = 0;  // bytes; below zero: owed
  absl::Time last_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace airlock

#endif  // AIRLOCK_COMMON_BYTE_RATE_H_
