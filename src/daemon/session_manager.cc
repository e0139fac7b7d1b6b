#include "src/daemon/session_manager.h"

#include <sys/random.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/image/image_store.h"
#include "src/vm/vm_launcher.h"

namespace airlock {
namespace {

std::string NewSessionId() {
  unsigned char b[6];
  if (getrandom(b, sizeof(b), 0) != sizeof(b)) return "";
  return absl::StrFormat("%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
}

}  // namespace

SessionManager::SessionManager(StateStore* store, HostPaths paths, VmDriver* driver)
    : store_(store), paths_(std::move(paths)), driver_(driver) {}

SessionManager::~SessionManager() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

absl::StatusOr<SessionLimits> SessionManager::ResolveLimits(const SessionLimits& r) {
  SessionLimits l;
  if (r.vcpus != 0) l.vcpus = r.vcpus;
  if (r.memory_bytes != 0) l.memory_bytes = r.memory_bytes;
  if (r.pids != 0) l.pids = r.pids;
  if (r.disk_bytes != 0) l.disk_bytes = r.disk_bytes;
  l.ttl_seconds = r.ttl_seconds;
  if (l.vcpus > 64) return absl::InvalidArgumentError("at most 64 vCPUs");
  if (l.memory_bytes < (128ull << 20) || l.memory_bytes > (64ull << 30)) {
    return absl::InvalidArgumentError("memory must be between 128 MiB and 64 GiB");
  }
  if (l.pids < 16 || l.pids > 1000000) {
    return absl::InvalidArgumentError("the process limit must be between 16 and 1000000");
  }
  if (l.disk_bytes < (32ull << 20) || l.disk_bytes > (1ull << 40)) {
    return absl::InvalidArgumentError("disk must be between 32 MiB and 1 TiB");
  }
  return l;
}

absl::Status SessionManager::Recover() {
  // VMs die with the daemon that started them (they are its children), so a session that was
  // creating or running when the daemon stopped has lost its VM: say so.
  absl::StatusOr<std::vector<SessionRecord>> orphans =
      store_->SessionsInState({SessionState::kCreating, SessionState::kRunning});
  if (!orphans.ok()) return orphans.status();
  for (const SessionRecord& s : *orphans) {
    absl::Status st = store_->SetSessionState(
        kDaemonPrincipal, s.tenant, s.id, SessionState::kFailed,
        "airlockd stopped while the VM was running; the VM and its state were lost", 0,
        "session.recover");
    if (!st.ok()) return st;
  }
  watcher_ = std::thread([this] { WatchLoop(); });
  return absl::OkStatus();
}

absl::StatusOr<SessionRecord> SessionManager::Create(const Principal& who, const std::string& image,
                                                     const SessionLimits& requested) {
  absl::StatusOr<SessionLimits> limits = ResolveLimits(requested);
  if (!limits.ok()) return limits.status();
  std::string name = image.empty() ? kDefaultImage : image;
  absl::StatusOr<ImageInfo> info = ImageStore(paths_.images).Resolve(name);
  if (!info.ok()) return info.status();
  SessionRecord s;
  s.id = NewSessionId();
  if (s.id.empty()) return absl::InternalError("getrandom failed");
  s.tenant = who.Tenant();
  s.image = name;
  s.image_digest = info->digest;
  s.created_ms = s.last_used_ms = NowUnixMs();
  s.limits = *limits;
  s.hostname = "airlock-" + s.id.substr(0, 8);
  if (absl::Status st = store_->CreateSession(who, s); !st.ok()) return st;

  LaunchOptions options;
  options.memory_mib = static_cast<uint32_t>(limits->memory_bytes >> 20);
  options.vcpus = limits->vcpus;
  options.disk_bytes = limits->disk_bytes;
  options.pids = limits->pids;
  options.host_cgroup = s.id;
  options.hostname = s.hostname;
  absl::StatusOr<std::unique_ptr<Vm>> vm = LaunchVm(*driver_, paths_, *info, options);
  if (!vm.ok()) {
    store_
        ->SetSessionState(who, s.tenant, s.id, SessionState::kFailed,
                          std::string(vm.status().message()), 0, "session.boot")
        .IgnoreError();
    return vm.status();
  }
  s.state = SessionState::kRunning;
  s.pid = (*vm)->pid();
  if (absl::Status st = store_->SetSessionState(who, s.tenant, s.id, SessionState::kRunning, "",
                                                s.pid, "session.boot");
      !st.ok()) {
    return st;  // the VM is destroyed with `vm`
  }
  auto live = std::make_shared<LiveSession>();
  live->record = s;
  live->vm = *std::move(vm);
  std::lock_guard<std::mutex> lock(mu_);
  live_[s.id] = std::move(live);
  return s;
}

absl::StatusOr<std::shared_ptr<LiveSession>> SessionManager::Live(const Principal& who,
                                                                  const std::string& id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it != live_.end() && it->second->record.tenant == who.Tenant()) return it->second;
  }
  absl::StatusOr<SessionRecord> record = store_->GetSession(who.Tenant(), id);
  if (!record.ok()) return record.status();
  return absl::FailedPreconditionError(
      absl::StrCat("session ", id, " is ", SessionStateName(record->state),
                   record->reason.empty() ? "" : " (" + record->reason + ")",
                   "; create a new one with `airlock session create`"));
}

std::vector<std::shared_ptr<LiveSession>> SessionManager::LiveSessions(const Principal& who) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<LiveSession>> out;
  for (auto& [id, live] : live_) {
    if (live->record.tenant == who.Tenant()) out.push_back(live);
  }
  return out;
}

absl::Status SessionManager::Remove(const Principal& who, const std::string& id,
                                    const std::string& reason) {
  absl::StatusOr<SessionRecord> record = store_->GetSession(who.Tenant(), id);
  if (!record.ok()) return record.status();
  std::shared_ptr<LiveSession> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it != live_.end()) {
      live = std::move(it->second);
      live_.erase(it);
    }
  }
  if (live) live->vm->Kill(absl::CancelledError(absl::StrCat("session ", reason)));
  SessionState end =
      record->state == SessionState::kFailed ? SessionState::kFailed : SessionState::kStopped;
  std::string why = end == SessionState::kFailed ? record->reason : reason;
  return store_->SetSessionState(who, record->tenant, id, end, why, 0, "session.remove");
}

void SessionManager::Retire(const std::string& id, SessionState state, const std::string& reason) {
  std::shared_ptr<LiveSession> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it == live_.end()) return;
    live = std::move(it->second);
    live_.erase(it);
  }
  live->vm->Kill(absl::UnavailableError(reason));
  store_
      ->SetSessionState(kDaemonPrincipal, live->record.tenant, id, state, reason, 0,
                        state == SessionState::kFailed ? "session.fail" : "session.expire")
      .IgnoreError();
  LogRecord event{.unix_ms = NowUnixMs(),
                  .stream = LogStream::kEvent,
                  .data = absl::StrCat("session ", SessionStateName(state), ": ", reason)};
  store_->AppendLogs(live->record, {event}).IgnoreError();
}

void SessionManager::WatchLoop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(watch_mu_);
      watch_cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stopping_; });
      if (stopping_) return;
    }
    std::vector<std::shared_ptr<LiveSession>> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, live] : live_) all.push_back(live);
    }
    int64_t now = NowUnixMs();
    for (const std::shared_ptr<LiveSession>& live : all) {
      const SessionRecord& r = live->record;
      if (std::optional<std::string> exit = live->vm->ExitReason()) {
        Retire(r.id, SessionState::kFailed, *exit);
      } else if (absl::Status s = live->vm->channel().status(); !s.ok()) {
        // The channel closes as the process dies: prefer how it died, if it did.
        std::optional<std::string> died;
        for (int i = 0; i < 20 && !(died = live->vm->ExitReason()); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(25));
        }
        Retire(r.id, SessionState::kFailed, died ? *died : std::string(s.message()));
      } else if (r.limits.ttl_seconds > 0 &&
                 now >= r.created_ms + static_cast<int64_t>(r.limits.ttl_seconds) * 1000) {
        Retire(r.id, SessionState::kStopped,
               absl::StrCat("its time to live of ", r.limits.ttl_seconds, "s ran out"));
      }
    }
  }
}

}  // namespace airlock
