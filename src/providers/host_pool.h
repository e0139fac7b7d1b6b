// HostPool: hosts a fleet starts when none has room for a new session and releases when they
// have run nothing for a while, so the fleet's size follows its work (down to the hosts that are
// always there). A cloud provider goes here: Start launches an instance whose airlockd joins
// the fleet (etcd, blob store, fleet certificate), Release terminates one. ProcessHostPool is
// the one this machine can run: each "instance" is an airlockd process with a home of its own,
// described in a pool file (ParseHostPool). The policy (when to start, when to release) is the
// fleet's own, in src/daemon/fleet_scaler.h.
#ifndef AIRLOCK_PROVIDERS_HOST_POOL_H_
#define AIRLOCK_PROVIDERS_HOST_POOL_H_

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/providers/host_provider.h"

namespace airlock::providers {

// Thread-safe.
class HostPool {
 public:
  virtual ~HostPool() = default;

  // Starts a host the pool has not started that can hold `vm` (a cloud would choose the
  // instance's size by it); its id. It joins the fleet by itself, a moment later.
  // RESOURCE_EXHAUSTED when every host of the pool runs already, or none left is that large.
  [[nodiscard]] virtual absl::StatusOr<std::string> Start(const VmPlacement& vm) = 0;
  // Stops a host it started, which must run no VM by now (the caller drained it).
  [[nodiscard]] virtual absl::Status Release(const std::string& id) = 0;
  // The hosts it started that run now.
  virtual std::vector<std::string> Started() = 0;
};

// One host a ProcessHostPool may start: its airlockd's argv (argv[0] absolute; its --host-id
// names `id`), its home (AIRLOCK_HOME; airlockd.log and pool.pid are kept there), more of its
// environment, and what it offers the fleet's sessions once it runs (its --capacity-memory and
// --capacity-vcpus, or its machine's), when the pool file says.
struct PoolHost {
  std::string id;
  std::string home;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // KEY=VALUE
  uint64_t memory_bytes = 0;     // 0: not said (it is started for any session)
  uint32_t cpus = 0;             // 0: not said; each backs kVcpuOvercommit sessions' vCPUs
};

struct HostPoolConfig {
  std::vector<PoolHost> hosts;
  // A pool host that has run no session this long is released.
  absl::Duration release_after = absl::Minutes(10);
};

inline constexpr size_t kMaxPoolHosts = 64;

// A pool file: {"release_after_seconds": N, "hosts": [{"id", "home", "argv": [...],
// "env": ["K=V", ...], "memory": "64g", "cpus": 16}, ...]}. INVALID_ARGUMENT saying what is wrong
// and where.
[[nodiscard]] absl::StatusOr<HostPoolConfig> ParseHostPool(std::string_view json);

// Hosts as airlockd processes on this machine, each in a session of its own (they outlive the
// airlockd that started them, as instances outlive their controller, and an airlockd started
// again finds them by their pool.pid).
class ProcessHostPool : public HostPool {
 public:
  explicit ProcessHostPool(std::vector<PoolHost> hosts) : hosts_(std::move(hosts)) {}

  absl::StatusOr<std::string> Start(const VmPlacement& vm) override;
  absl::Status Release(const std::string& id) override;
  std::vector<std::string> Started() override;

 private:
  // The process of a host that runs now (its pool.pid names a live airlockd), or 0.
  pid_t Running(const PoolHost& host) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<PoolHost> hosts_;
  absl::Mutex mu_;
};

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_HOST_POOL_H_
