// FleetScaler: the fleet's size follows its work. When no host has room for a new session, a
// host of the pool (providers::HostPool: a cloud's instances, or airlockd processes here) is
// started and the create goes to it once it has joined; a host of the pool that has run no
// session for the pool's release_after is drained (so nothing lands on it meanwhile) and
// released. Hosts outside the pool are never released. Runs on the airlockd given --host-pool.
#ifndef AIRLOCK_DAEMON_FLEET_SCALER_H_
#define AIRLOCK_DAEMON_FLEET_SCALER_H_

#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/providers/host_pool.h"
#include "src/providers/host_provider.h"

namespace airlock {

class SessionHandoff;

class FleetScaler {
 public:
  // None is owned; each outlives this. hosts: the fleet's (FleetHosts). Starts its loop.
  FleetScaler(SessionHandoff* handoff, providers::HostProvider* hosts, providers::HostPool* pool,
              absl::Duration release_after);
  ~FleetScaler();

  // Starts a host of the pool that can hold `vm` and waits, at most `wait`, until it takes
  // forwarded calls: its id. One start at a time; RESOURCE_EXHAUSTED when every host of the
  // pool runs already, or none left is large enough.
  [[nodiscard]] absl::StatusOr<std::string> StartHost(const providers::VmPlacement& vm,
                                                      absl::Duration wait);

  // A create this host passes to `host` begins and ends (a session being made there holds no
  // claim yet): a pool host is busy while one is under way, and idle only from its end on.
  void CreateBegins(const std::string& host);
  void CreateEnds(const std::string& host);

  // One pass of the loop: a pool host up, running no session (no claim in etcd) and making none
  // for this host since at least release_after is marked draining without its sessions being
  // paused (so nothing new lands on it), checked again, released if still idle, and its drain
  // mark taken away.
  void ReleaseIdle();

 private:
  void Loop();

  SessionHandoff* const handoff_;
  providers::HostProvider* const hosts_;
  providers::HostPool* const pool_;
  const absl::Duration release_after_;
  absl::Mutex start_mu_;  // held while a host starts: a release waits for it
  absl::Mutex mu_;
  std::map<std::string, absl::Time> idle_since_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> creating_ ABSL_GUARDED_BY(mu_);  // creates under way, by host
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_FLEET_SCALER_H_
