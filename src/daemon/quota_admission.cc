#include "src/daemon/quota_admission.h"

#include <utility>
#include <vector>

#include "src/common/log.h"

namespace airlock {

QuotaAdmission::QuotaAdmission(Quotas quotas, StateStore* store,
                               std::function<uint64_t(const std::string&)> image_bytes,
                               std::shared_ptr<net::ConnectionLedger> connections)
    : quotas_(std::move(quotas)),
      store_(store),
      image_bytes_(std::move(image_bytes)),
      connections_(std::move(connections)) {}

QuotaAmounts QuotaAdmission::UsageOf(const std::string& tenant) {
  QuotaAmounts used;
  absl::StatusOr<std::vector<SessionRecord>> sessions = store_->sessions().List(tenant);
  for (const SessionRecord& s : sessions.ok() ? *sessions : std::vector<SessionRecord>()) {
    bool exists = s.state == SessionState::kCreating || s.state == SessionState::kRunning ||
                  s.state == SessionState::kPaused;
    if (!exists) continue;
    used.sessions++;
    used.disk_bytes += s.limits.disk_bytes;
    if (s.state == SessionState::kPaused) continue;
    used.running++;
    used.vcpus += s.limits.vcpus;
    used.memory_bytes += s.limits.memory_bytes;
  }
  used.disk_bytes += store_->volumes().TotalBytes(tenant).value_or(0);
  used.connections = connections_->Open(tenant);
  used.log_bytes = store_->commands().OutputBytes(tenant).value_or(0);
  used.image_bytes = image_bytes_(tenant);
  return used;
}

absl::StatusOr<QuotaReservations::Hold> QuotaAdmission::Admit(const Principal& who,
                                                              const std::string& tenant,
                                                              const QuotaAmounts& adding,
                                                              const std::string& what) {
  absl::StatusOr<QuotaReservations::Hold> hold = reservations_.Admit(
      tenant, quotas_.For(tenant), [&] { return UsageOf(tenant); }, adding);
  if (!hold.ok()) {
    absl::Status audited = store_->audit().Audit(who, tenant, "quota.refuse", what,
                                                 std::string(hold.status().message()));
    LogIfFailed(audited, "quota refusal not audited");
  }
  return hold;
}

}  // namespace airlock
