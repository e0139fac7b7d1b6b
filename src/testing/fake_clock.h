// A Clock that stands still until a test moves it (Advance), so that time to live and idle
// timeouts can be tested without waiting for them. Starts at the real time, so that times it
// gives mix with those stamped by the real clock. Thread-safe.
#ifndef AIRLOCK_TESTING_FAKE_CLOCK_H_
#define AIRLOCK_TESTING_FAKE_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/common/clock.h"

namespace airlock {

class FakeClock : public Clock {
 public:
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::Now();
};

}  // namespace airlock

#endif  // AIRLOCK_TESTING_FAKE_CLOCK_H_
