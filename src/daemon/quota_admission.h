// Whether a tenant may add what a request adds (sessions, running VMs, vCPUs, memory, disk):
// its quota (quotas.h) against what its sessions hold in the state store, its open egress
// connections, its logs and images, and what requests under way hold already. A refusal is
// audited. Thread-safe.
#ifndef AIRLOCK_DAEMON_QUOTA_ADMISSION_H_
#define AIRLOCK_DAEMON_QUOTA_ADMISSION_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "src/daemon/quotas.h"
#include "src/daemon/state_store.h"
#include "src/net/connection_ledger.h"

namespace airlock {

class QuotaAdmission {
 public:
  // store and connections must outlive this; image_bytes: what a tenant's own images take
  // (ImageService's count, called only when usage is asked for).
  QuotaAdmission(Quotas quotas, StateStore* store,
                 std::function<uint64_t(const std::string& tenant)> image_bytes,
                 std::shared_ptr<net::ConnectionLedger> connections);

  const Quota& For(const std::string& tenant) const { return quotas_.For(tenant); }
  // What the tenant holds now, as the state store, the connection ledger and the image store
  // show it (requests under way not counted).
  QuotaAmounts UsageOf(const std::string& tenant);
  // Checks the quotas with what is held by requests under way; the hold lasts as long as the
  // returned object (or until it is settled). A refusal is audited for `who` as quota.refuse
  // of `what` (the action and its target).
  [[nodiscard]] absl::StatusOr<QuotaReservations::Hold> Admit(const Principal& who,
                                                              const std::string& tenant,
                                                              const QuotaAmounts& adding,
                                                              const std::string& what);

 private:
  const Quotas quotas_;
  StateStore* store_;
  std::function<uint64_t(const std::string&)> image_bytes_;
  std::shared_ptr<net::ConnectionLedger> connections_;
  QuotaReservations reservations_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_QUOTA_ADMISSION_H_
