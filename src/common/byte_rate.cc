#include "src/common/byte_rate.h"

#include <algorithm>

namespace airlock {

void ByteRate::Take(uint64_t bytes) {
  if (rate_ == 0 || bytes == 0) return;
  double wait_seconds = 0;
  {
    absl::MutexLock lock(&mu_);
    absl::Time now = clock_->Now();
    double burst = static_cast<double>(rate_);
    available_ = last_ == absl::InfinitePast()
                     ? burst
                     : std::min(burst, available_ + absl::ToDoubleSeconds(now - last_) * burst);
    last_ = now;
    available_ -= static_cast<double>(bytes);
    if (available_ < 0) wait_seconds = -available_ / burst;
  }
  if (wait_seconds > 0) sleep_(absl::Seconds(wait_seconds));
}

}  // namespace airlock
