// Per-tenant quotas: how much one tenant's sessions may hold at once on this host. airlockd
// checks them before it creates, resumes or forks a session, and a request over one fails with
// RESOURCE_EXHAUSTED naming the quota, its value and what is in use (`airlock quota` shows them).
//
// The operator's file (`airlockd --quota-file FILE`, one rule per line, `#` comments):
//   default sessions=64 running=16 vcpus=32 memory=32g disk=512g logs=1g images=32g forks=16
//           pull=8g connections=1024
//   tenant uid:1000 running=4 memory=8g
// `default` changes what every tenant gets; `tenant NAME` what one tenant gets on top of that.
#ifndef AIRLOCK_DAEMON_QUOTAS_H_
#define AIRLOCK_DAEMON_QUOTAS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace airlock {

// Amounts of what quotas limit: the quota itself, what is in use, or what a request adds.
struct QuotaAmounts {
  uint64_t sessions = 0;      // sessions that exist: creating, running or paused
  uint64_t running = 0;       // of those, with a VM (creating or running)
  uint64_t vcpus = 0;         // of the running ones
  uint64_t memory_bytes = 0;  // of the running ones
  uint64_t disk_bytes = 0;    // the writable disks of every session that exists, and volumes
  uint64_t log_bytes = 0;     // command output stored, over all the tenant's sessions
  uint64_t image_bytes = 0;   // images the tenant's own pulls named (their root filesystems)
  uint64_t connections = 0;   // egress connections open through airlockd's proxy
};

struct Quota {
  QuotaAmounts limits{.sessions = 64,
                      .running = 16,
                      .vcpus = 32,
                      .memory_bytes = 32ull << 30,
                      .disk_bytes = 512ull << 30,
                      .log_bytes = 1ull << 30,
                      .image_bytes = 32ull << 30,
                      .connections = 1024};
  uint64_t forks_per_call = 16;      // sessions one fork request makes
  uint64_t pull_bytes = 8ull << 30;  // what one image pull may download
};

class Quotas {
 public:
  Quotas() = default;
  // Parses the operator's file (format above); INVALID_ARGUMENT naming the line and what to write.
  [[nodiscard]] static absl::StatusOr<Quotas> Parse(absl::string_view text);
  [[nodiscard]] static absl::StatusOr<Quotas> Load(const std::string& path);

  const Quota& For(const std::string& tenant) const;

  // OK if `in_use + adding` stays within every limit of `quota`; else RESOURCE_EXHAUSTED saying
  // which quota, its value, what is in use and what the request asked for.
  [[nodiscard]] static absl::Status Check(const Quota& quota, const QuotaAmounts& in_use,
                                          const QuotaAmounts& adding);

 private:
  Quota defaults_;
  std::map<std::string, Quota> tenants_;
};

// What requests still under way (admitted, not yet visible in the state store) hold per tenant,
// so that two requests at once cannot both take the last of a quota. Thread-safe.
class QuotaReservations {
 public:
  // An admitted request's share; it gives back what it holds when it goes.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept { *this = std::move(other); }
    Hold& operator=(Hold&& other) noexcept;
    ~Hold() { Release(); }
    // The part the state store now shows (the sessions' records exist) is no longer held.
    void Settle(const QuotaAmounts& visible);
    // Runs `record`, which makes `visible` show in the state store (a session's record, a
    // state that now counts as running), and on success settles it in the same step, under the
    // lock Admit checks under: no request in between counts it twice, once held and once in
    // the store (a burst of creates was refused below its quota so). Returns record's status.
    absl::Status SettleWith(const QuotaAmounts& visible,
                            const std::function<absl::Status()>& record);
    void Release();

   private:
    friend class QuotaReservations;
    QuotaReservations* owner_ = nullptr;
    std::string tenant_;
    QuotaAmounts held_;
  };

  // Under one lock: usage() (what the state store shows) plus what is held, checked with
  // `adding`; on success the request holds `adding` until its Hold goes.
  [[nodiscard]] absl::StatusOr<Hold> Admit(const std::string& tenant, const Quota& quota,
                                           const std::function<QuotaAmounts()>& usage,
                                           const QuotaAmounts& adding);
  QuotaAmounts Held(const std::string& tenant);

 private:
  void Give(const std::string& tenant, const QuotaAmounts& amounts);
  void GiveLocked(const std::string& tenant, const QuotaAmounts& amounts)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Mutex mu_;
  std::map<std::string, QuotaAmounts> held_ ABSL_GUARDED_BY(mu_);
};

// Each quota for people and the API: its name in the file, limit, use, and what it counts.
struct QuotaLine {
  std::string name;
  uint64_t limit = 0;
  uint64_t used = 0;
  bool bytes = false;
  bool per_request = false;  // forks and pull: a cap on one request, nothing in use
  std::string what;
};
std::vector<QuotaLine> DescribeQuota(const Quota& quota, const QuotaAmounts& used);

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_QUOTAS_H_
