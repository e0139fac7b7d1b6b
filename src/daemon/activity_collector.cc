#include "src/daemon/activity_collector.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/common/log.h"

namespace airlock {

std::vector<ActivityRecord> StampActivity(std::vector<ActivityRecord> records, int64_t earliest_ms,
                                          int64_t now_ms, int64_t* last_ms) {
  for (ActivityRecord& r : records) {
    int64_t floor = std::min(std::max(earliest_ms, *last_ms), now_ms);
    r.unix_ms = std::clamp(r.unix_ms, floor, now_ms);
    *last_ms = r.unix_ms;
  }
  return records;
}

ActivityCollector::ActivityCollector(StateStore* store, SessionRecord session,
                                     std::shared_ptr<GuestChannel> channel)
    : store_(store), session_(std::move(session)), channel_(std::move(channel)) {
  // Opened before the constructor returns, so before any command of the session starts: the
  // guest reads its frames in order, and records everything after this one.
  absl::StatusOr<std::unique_ptr<GuestActivity>> first = channel_->StartActivity();
  thread_ = std::thread([this, first = std::move(first)]() mutable { Loop(std::move(first)); });
}

ActivityCollector::~ActivityCollector() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (reading_ != nullptr) reading_->Interrupt();
  }
  thread_.join();
}

bool ActivityCollector::Wait(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
  return !stopping_;
}

void ActivityCollector::Loop(std::optional<absl::StatusOr<std::unique_ptr<GuestActivity>>> first) {
  int64_t last_ms = 0;
  absl::Duration retry = absl::Milliseconds(500);
  bool said = false;
  while (Wait(absl::ZeroDuration())) {
    if (!channel_->status().ok()) return;  // the VM is gone: a new one gets its own collector
    absl::StatusOr<std::unique_ptr<GuestActivity>> activity =
        first.has_value() ? *std::move(first) : channel_->StartActivity();
    first.reset();
    absl::Status ended = activity.status();
    if (activity.ok()) {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      reading_ = activity->get();
    }
    // Until the stream ends; a stop interrupts it, and what had come is stored first.
    int drained = 0;
    while (activity.ok()) {
      absl::StatusOr<std::vector<ActivityRecord>> records =
          (*activity)->Next(absl::Now() + absl::Seconds(1));
      if (absl::IsDeadlineExceeded(records.status())) continue;
      if (!records.ok()) {
        ended = records.status();
        break;
      }
      retry = absl::Milliseconds(500);
      LogIfFailed(store_->activity().Append(
                      session_, StampActivity(*std::move(records), session_.created_ms,
                                              absl::ToUnixMillis(absl::Now()), &last_ms)),
                  absl::StrCat("session ", session_.id, ": activity records not stored"));
      // Stopped: what had come is stored (Next gives it before it says interrupted), but a
      // guest that goes on sending does not hold the stop up.
      if (!Wait(absl::ZeroDuration()) && ++drained > kMaxBatchesAfterStop) break;
    }
    {
      absl::MutexLock lock(&mu_);
      reading_ = nullptr;
    }
    if (!channel_->status().ok() || !Wait(absl::ZeroDuration())) return;
    // A snapshot closed the stream, or the guest is busy being snapshotted: open it again.
    // A guest that cannot record (an older guest kernel) is said once, in the record too.
    bool guest_refused = !ended.ok() && !absl::IsUnavailable(ended) &&
                         !absl::IsFailedPrecondition(ended) && !absl::IsCancelled(ended);
    if (guest_refused) {
      if (!said) {
        said = true;
        LogWarning(
            absl::StrCat("session ", session_.id, ": no activity record: ", ended.message()));
        ActivityRecord note{.kind = ActivityKind::kLost,
                            .unix_ms = absl::ToUnixMillis(absl::Now()),
                            .path = std::string(ended.message()).substr(0, kMaxFsPathBytes)};
        LogIfFailed(store_->activity().Append(session_, {note}),
                    absl::StrCat("session ", session_.id, ": activity record not stored"));
      }
      retry = std::min(retry * 2, absl::Minutes(1));
    }
    Wait(retry);
  }
}

}  // namespace airlock
