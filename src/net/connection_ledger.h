// Egress connections open through airlockd, counted per tenant and in all: every one is a
// descriptor of the one airlockd process, so one tenant's sessions must never take the
// descriptors every other tenant (and airlockd itself) needs. Each session's EgressProxy takes
// a place here before it dials and gives it back when the connection ends. Thread-safe.
#ifndef AIRLOCK_NET_CONNECTION_LEDGER_H_
#define AIRLOCK_NET_CONNECTION_LEDGER_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace airlock::net {

class ConnectionLedger {
 public:
  // `total`: connections of all tenants together.
  explicit ConnectionLedger(uint64_t total) : total_(total) {}
  // What this process can hold: its open-file limit less a reserve (a quarter, at least 256)
  // for airlockd's own files, sockets, VMs and clients; at least 64.
  static uint64_t TotalForThisProcess();

  // A place for one more connection of `tenant`, whose quota is `tenant_limit`; else
  // RESOURCE_EXHAUSTED saying which limit and how many are open.
  [[nodiscard]] absl::Status Take(const std::string& tenant, uint64_t tenant_limit);
  void Give(const std::string& tenant);
  uint64_t Open(const std::string& tenant) const;
  uint64_t total() const { return total_; }

 private:
  const uint64_t total_;
  mutable absl::Mutex mu_;
  uint64_t open_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, uint64_t> tenants_ ABSL_GUARDED_BY(mu_);  // no zero entries
};

}  // namespace airlock::net

#endif  // AIRLOCK_NET_CONNECTION_LEDGER_H_
