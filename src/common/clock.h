// Clock: where the daemon reads the time of day for what it decides by time (a session's time to
// live, its idle timeout, egress grants that expire). SystemClock() is the real one; tests use
// FakeClock (src/testing/fake_clock.h) to move time on without waiting. Timeouts of single
// operations (a deadline for a guest's answer) stay on absl::Now(): they bound real waits.
#ifndef AIRLOCK_COMMON_CLOCK_H_
#define AIRLOCK_COMMON_CLOCK_H_

#include <cstdint>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace airlock {

// Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  int64_t NowUnixMs() const { return absl::ToUnixMillis(Now()); }
};

// absl::Now(); one object for the whole process, never destroyed.
inline Clock& SystemClock() {
  class Real : public Clock {
   public:
    absl::Time Now() const override { return absl::Now(); }
  };
  static Real* const clock = new Real;
  return *clock;
}

}  // namespace airlock

#endif  // AIRLOCK_COMMON_CLOCK_H_
