#include "src/daemon/vm_pool.h"

#include <dirent.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/file_util.h"
#include "src/common/hex.h"
#include "src/common/log.h"
#include "src/common/process_stats.h"

namespace airlock {
namespace {

// After a VM could not be made for the pool, wait this long before the next try.
constexpr absl::Duration kRetryAfterFailure = absl::Seconds(10);

std::string KindKey(const ImageInfo& image, const VmShape& shape) {
  return absl::StrCat(image.digest, " m", shape.memory_mib, " c", shape.vcpus, " d",
                      shape.disk_bytes);
}

uint64_t GuestBytes(const VmShape& shape) { return uint64_t{shape.memory_mib} << 20; }

}  // namespace

uint32_t VmPool::TargetAfterTake(uint32_t target, bool hit, uint32_t max_per_kind) {
  if (hit) return std::min(std::max(target, 1u), max_per_kind);
  return std::min(target + 1, max_per_kind);
}

VmPool::VmPool(VmPoolOptions options, std::string dir, Maker make,
               std::function<void(const std::string&)> destroy)
    : options_(options), dir_(std::move(dir)), make_(std::move(make)) {
  // Pooled VMs of an earlier airlockd: nobody will take them.
  if (DIR* d = opendir(dir_.c_str())) {
    std::vector<std::string> left;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') left.push_back(absl::StrCat(dir_, "/", e->d_name));
    }
    closedir(d);
    for (const std::string& path : left) destroy(path);
  }
  if (options_.max_per_kind > 0) filler_ = std::thread([this] { Fill(); });
}

VmPool::~VmPool() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (filler_.joinable()) filler_.join();
  kinds_.clear();  // destroys the VMs
}

std::optional<LaunchedVm> VmPool::Take(const ImageInfo& image, const VmShape& shape,
                                       const std::string& template_dir) {
  if (options_.max_per_kind == 0) return std::nullopt;
  std::optional<LaunchedVm> taken;
  std::vector<Pooled> stale;
  {
    absl::MutexLock lock(&mu_);
    Kind& kind = kinds_[KindKey(image, shape)];
    kind.image = image;
    kind.shape = shape;
    kind.template_dir = template_dir;
    kind.last_asked = absl::Now();
    while (!kind.ready.empty() && !taken) {
      Pooled pooled = std::move(kind.ready.front());
      kind.ready.erase(kind.ready.begin());
      if (pooled.template_dir == template_dir) {
        taken = std::move(pooled.vm);
      } else {
        stale.push_back(std::move(pooled));
      }
    }
    kind.target = TargetAfterTake(kind.target, taken.has_value(), options_.max_per_kind);
  }
  cv_.SignalAll();
  return taken;  // (stale ones are destroyed here, outside the lock)
}

std::vector<PooledVmInfo> VmPool::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<PooledVmInfo> out;
  for (const auto& [key, kind] : kinds_) {
    for (const Pooled& p : kind.ready) {
      out.push_back({.image = kind.image.name,
                     .shape = kind.shape,
                     .pid = p.vm.vm->pid(),
                     .accelerator = p.vm.vm->accelerator()});
    }
  }
  return out;
}

bool VmPool::HostIsCalm() {
  HostCpuTicks before = ReadHostCpuTicks();
  absl::Time until = absl::Now() + absl::Milliseconds(250);
  while (!stop_ && !cv_.WaitWithDeadline(&mu_, until)) {
  }
  HostCpuTicks after = ReadHostCpuTicks();
  uint64_t total = after.total - before.total;
  return total == 0 || 4 * (after.busy - before.busy) < total;
}

uint64_t VmPool::PooledBytesLocked() const {
  uint64_t bytes = 0;
  for (const auto& [key, kind] : kinds_) bytes += kind.ready.size() * GuestBytes(kind.shape);
  return bytes;
}

void VmPool::Fill() {
  mu_.Lock();
  while (!stop_) {
    // Shrink what nobody asks for and drop what an older template made; then pick one kind
    // below its target that fits the budget.
    std::vector<Pooled> doomed;
    std::string wanted;
    absl::Time now = absl::Now();
    for (auto& [key, kind] : kinds_) {
      if (now - kind.last_asked > options_.idle) kind.target = 0;
      for (auto it = kind.ready.begin(); it != kind.ready.end();) {
        if (it->template_dir != kind.template_dir || kind.ready.size() > kind.target) {
          doomed.push_back(std::move(*it));
          it = kind.ready.erase(it);
        } else {
          ++it;
        }
      }
      if (wanted.empty() && kind.ready.size() < kind.target &&
          PooledBytesLocked() + GuestBytes(kind.shape) <= options_.memory_budget_bytes) {
        wanted = key;
      }
    }
    if (!doomed.empty()) {
      mu_.Unlock();
      doomed.clear();
      mu_.Lock();
      continue;
    }
    if (wanted.empty()) {
      wanted_since_ = absl::InfiniteFuture();
      cv_.WaitWithTimeout(&mu_, absl::Seconds(1));
      continue;
    }
    wanted_since_ = std::min(wanted_since_, now);
    // Sessions come first: wait while the host's CPUs are mostly busy (a VM made now would
    // take their time), though never so long that the pool stays empty.
    if (now - wanted_since_ < options_.most_calm_wait && !HostIsCalm()) continue;
    wanted_since_ = absl::InfiniteFuture();
    ImageInfo image = kinds_[wanted].image;
    VmShape shape = kinds_[wanted].shape;
    std::string name = absl::StrCat("pool-", RandomHex(6));
    std::string runtime_dir = absl::StrCat(dir_, "/", name);
    mu_.Unlock();
    std::string template_dir;
    absl::Time started = absl::Now();
    absl::StatusOr<LaunchedVm> vm = make_(image, shape, runtime_dir, name, &template_dir);
    if (vm.ok()) {
      LogInfo(absl::StrCat(
          "warm pool: a VM of image ", image.name, " ready in ",
          absl::FormatDuration(absl::Trunc(absl::Now() - started, absl::Milliseconds(1)))));
    }
    mu_.Lock();
    if (!vm.ok()) {
      LogWarning(absl::StrCat("warm pool: no VM of image ", image.name,
                              " made: ", vm.status().message(), "; trying again in ",
                              absl::FormatDuration(kRetryAfterFailure)));
      absl::Time until = absl::Now() + kRetryAfterFailure;
      while (!stop_ && !cv_.WaitWithDeadline(&mu_, until)) {
      }
      continue;
    }
    auto kind = kinds_.find(wanted);
    if (stop_ || kind == kinds_.end()) {
      mu_.Unlock();
      vm->vm.reset();
      mu_.Lock();
      continue;
    }
    kind->second.ready.push_back({*std::move(vm), std::move(template_dir)});
  }
  mu_.Unlock();
}

}  // namespace airlock
