#include "src/daemon/fork_helpers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/common/log.h"

namespace airlock {

std::string ForkHelperKind::Key() const {
  return absl::StrCat(image.digest, " ", memory_bytes, " ", vcpus, " ", disk_bytes);
}

ForkHelpers::ForkHelpers(ForkHelpersOptions options, Starter start)
    : options_(options), start_(std::move(start)) {
  if (options_.ahead_of_need) thread_ = std::thread([this] { Loop(); });
}

ForkHelpers::~ForkHelpers() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<ForkHelper> ForkHelpers::Take(const ForkHelperKind& kind) {
  std::string key = kind.Key();
  std::optional<ForkHelper> taken;
  {
    absl::MutexLock lock(&mu_);
    last_taken_ = absl::Now();
    // One of this kind on its way is sooner ready than a new one.
    while (!stopping_ && starting_ == key) cv_.Wait(&mu_);
    if (spare_ && spare_kind_ == key) {
      taken = std::move(*spare_);
      spare_.reset();
    }
  }
  if (taken) return *std::move(taken);
  return start_(kind, /*ahead=*/false);
}

void ForkHelpers::Done(const ForkHelperKind& kind) {
  if (!options_.ahead_of_need || kind.memory_bytes > options_.memory_budget_bytes) return;
  absl::MutexLock lock(&mu_);
  last_taken_ = absl::Now();
  wanted_ = kind;
  cv_.Signal();
}

std::optional<std::string> ForkHelpers::Waiting() const {
  absl::MutexLock lock(&mu_);
  if (!spare_) return std::nullopt;
  return spare_kind_;
}

void ForkHelpers::EndUnlocked(std::unique_ptr<ForkHelper> helper) {
  mu_.Unlock();
  helper.reset();  // its QEMU is killed and reaped: not under the lock
  mu_.Lock();
}

void ForkHelpers::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    if (spare_ && absl::Now() >= last_taken_ + options_.idle) {
      EndUnlocked(std::move(spare_));  // nobody forked its kind lately
      continue;
    }
    if (!wanted_) {
      absl::Time wake = spare_ ? last_taken_ + options_.idle : absl::InfiniteFuture();
      cv_.WaitWithDeadline(&mu_, wake);
      continue;
    }
    ForkHelperKind kind = *std::move(wanted_);
    wanted_.reset();
    if (spare_ && spare_kind_ == kind.Key()) continue;
    starting_ = kind.Key();
    EndUnlocked(std::move(spare_));  // of another kind, if any
    mu_.Unlock();
    absl::StatusOr<ForkHelper> started = start_(kind, /*ahead=*/true);
    mu_.Lock();
    starting_.clear();
    cv_.SignalAll();
    if (!started.ok()) {
      LogWarning(
          absl::StrCat("a fork helper ahead of need did not start: ", started.status().message()));
      continue;
    }
    spare_kind_ = kind.Key();
    spare_ = std::make_unique<ForkHelper>(*std::move(started));
  }
  EndUnlocked(std::move(spare_));
}

}  // namespace airlock
