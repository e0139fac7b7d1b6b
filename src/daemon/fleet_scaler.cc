#include "src/daemon/fleet_scaler.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/common/log.h"
#include "src/daemon/session_handoff.h"

namespace airlock {
namespace {

constexpr char kBy[] = "the host pool";
// How long a host takes to see its own drain mark (SessionManager reads it every two seconds).
constexpr absl::Duration kDrainSeen = absl::Seconds(3);

}  // namespace

FleetScaler::FleetScaler(SessionHandoff* handoff, providers::HostProvider* hosts,
                         providers::HostPool* pool, absl::Duration release_after)
    : handoff_(handoff), hosts_(hosts), pool_(pool), release_after_(release_after) {
  thread_ = std::thread([this] { Loop(); });
}

FleetScaler::~FleetScaler() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

absl::StatusOr<std::string> FleetScaler::StartHost(const providers::VmPlacement& vm,
                                                   absl::Duration wait) {
  absl::MutexLock start(&start_mu_);
  absl::StatusOr<std::string> id = pool_->Start(vm);
  if (!id.ok()) return id.status();
  LogInfo(absl::StrCat("host pool: started host ", *id, " for a session no host had room for"));
  {
    absl::MutexLock lock(&mu_);
    idle_since_[*id] = absl::Now();
  }
  absl::Time deadline = absl::Now() + wait;
  while (absl::Now() < deadline) {
    std::vector<std::string> started = pool_->Started();
    if (std::find(started.begin(), started.end(), *id) == started.end()) {
      return absl::UnavailableError(absl::StrCat("host ", *id,
                                                 " of the host pool exited as it started (its "
                                                 "airlockd.log says why)"));
    }
    absl::StatusOr<std::vector<providers::HostInfo>> hosts = hosts_->Hosts();
    if (hosts.ok()) {
      for (const providers::HostInfo& host : *hosts) {
        if (host.id != *id || !host.up || host.capacity.address.empty()) continue;
        // Idle from now: the session it was started for lands in a moment.
        absl::MutexLock lock(&mu_);
        idle_since_[*id] = absl::Now();
        return *id;
      }
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  LogIfFailed(pool_->Release(*id), absl::StrCat("host pool: host ", *id, " not released"));
  return absl::UnavailableError(
      absl::StrCat("host ", *id, " of the host pool was started but did not join the fleet in ",
                   absl::FormatDuration(wait), " (its airlockd.log says why)"));
}

void FleetScaler::CreateBegins(const std::string& host) {
  absl::MutexLock lock(&mu_);
  ++creating_[host];
  idle_since_.erase(host);
}

void FleetScaler::CreateEnds(const std::string& host) {
  absl::MutexLock lock(&mu_);
  if (--creating_[host] <= 0) creating_.erase(host);
  idle_since_.erase(host);  // idle, if it is, from now on
}

void FleetScaler::ReleaseIdle() {
  absl::MutexLock start(&start_mu_);
  std::vector<std::string> started = pool_->Started();
  absl::StatusOr<std::vector<providers::HostInfo>> hosts = hosts_->Hosts();
  if (!hosts.ok()) return;  // etcd unreachable: nothing is known to be idle
  absl::Time now = absl::Now();
  std::vector<std::string> due;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = idle_since_.begin(); it != idle_since_.end();) {
      bool ours = std::find(started.begin(), started.end(), it->first) != started.end();
      it = ours ? std::next(it) : idle_since_.erase(it);
    }
    for (const std::string& id : started) {
      auto host = std::find_if(hosts->begin(), hosts->end(),
                               [&](const providers::HostInfo& h) { return h.id == id; });
      bool busy =
          (host != hosts->end() && host->up && !host->sessions.empty()) || creating_.contains(id);
      if (busy) {
        idle_since_.erase(id);
        continue;
      }
      auto [since, fresh] = idle_since_.emplace(id, now);
      if (!fresh && now - since->second >= release_after_) due.push_back(id);
    }
  }
  for (const std::string& id : due) {
    // Marked first, so that no create or resume lands on it while it goes; its sessions are not
    // paused for it (one that came meanwhile keeps the host).
    if (absl::Status st = handoff_->SetDraining(id, true, kBy, /*pause_sessions=*/false);
        !st.ok()) {
      LogWarning(absl::StrCat("host pool: host ", id, " not drained: ", st.message()));
      continue;
    }
    absl::SleepFor(kDrainSeen);
    absl::StatusOr<std::vector<providers::HostInfo>> again = hosts_->Hosts();
    bool idle = again.ok();
    if (again.ok()) {
      for (const providers::HostInfo& h : *again) idle &= h.id != id || h.sessions.empty();
    }
    {
      absl::MutexLock lock(&mu_);
      idle &= !creating_.contains(id);
    }
    if (idle) {
      LogInfo(absl::StrCat("host pool: releasing host ", id, ", which ran no session for ",
                           absl::FormatDuration(release_after_)));
      LogIfFailed(pool_->Release(id), absl::StrCat("host pool: host ", id, " not released"));
    }
    // Released or busy again, it takes sessions when it runs.
    LogIfFailed(handoff_->SetDraining(id, false, kBy),
                absl::StrCat("host pool: host ", id, " left draining"));
    absl::MutexLock lock(&mu_);
    idle_since_.erase(id);
  }
}

void FleetScaler::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Seconds(2));
    if (stop_) break;
    mu_.Unlock();
    ReleaseIdle();
    mu_.Lock();
  }
}

}  // namespace airlock
