#include "src/net/connection_ledger.h"

#include <sys/resource.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace airlock::net {

uint64_t ConnectionLedger::TotalForThisProcess() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return 4096;
  uint64_t limit = files.rlim_cur;
  uint64_t reserve = std::max<uint64_t>(256, limit / 4);
  return limit > reserve + 64 ? limit - reserve : 64;
}

absl::Status ConnectionLedger::Take(const std::string& tenant, uint64_t tenant_limit) {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  uint64_t mine = it == tenants_.end() ? 0 : it->second;
  if (mine >= tenant_limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat("over the tenant's egress connection quota of ", tenant_limit, " (", mine,
                     " open over its sessions)"));
  }
  if (open_ >= total_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("airlockd holds all the egress connections it can (", total_,
                     " over every tenant); try again later"));
  }
  ++open_;
  ++tenants_[tenant];
  return absl::OkStatus();
}

void ConnectionLedger::Give(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return;
  --open_;
  if (--it->second == 0) tenants_.erase(it);
}

uint64_t ConnectionLedger::Open(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second;
}

}  // namespace airlock::net
