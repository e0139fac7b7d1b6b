// SessionManager's watcher: a thread that ends sessions whose VM died or whose time to live
// ran out, pauses idle ones, drops egress grants that expired, and lets VMs stopped for lack of
// disk space go on once there is room.
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/byte_size.h"
#include "src/common/file_util.h"
#include "src/common/log.h"
#include "src/daemon/session_manager.h"

namespace airlock {
namespace {

// Whether every use of the session gives way to a pause (the HTTP gateway's connections): it
// may be paused when idle.
bool OnlyYieldingUses(LiveSession& live) {
  absl::MutexLock lock(&live.yield_mu);
  return live.users <= static_cast<int>(live.yielders.size());
}

// A session's lock, held only if nobody else held it (absl::Mutex has no scoped try-lock): the
// watcher leaves a session that is in use alone.
class TrySessionLock {
 public:
  explicit TrySessionLock(std::shared_ptr<absl::Mutex> mu)
      : mu_(std::move(mu)), held_(mu_->TryLock()) {}
  ~TrySessionLock() {
    if (held_) mu_->Unlock();
  }
  TrySessionLock(const TrySessionLock&) = delete;
  TrySessionLock& operator=(const TrySessionLock&) = delete;
  bool held() const { return held_; }

 private:
  std::shared_ptr<absl::Mutex> mu_;
  bool held_;
};

}  // namespace

std::optional<GuestMetrics> SessionManager::SampleMetrics(const std::string& tenant,
                                                          const std::string& id,
                                                          absl::Duration timeout) {
  TrySessionLock guard(SessionLock(id));
  if (!guard.held()) return std::nullopt;
  std::shared_ptr<LiveSession> live = FindLive(tenant, id);
  if (!live) return std::nullopt;
  absl::StatusOr<GuestMetrics> sample = live->vm->channel().Metrics(absl::Now() + timeout);
  if (!sample.ok()) return std::nullopt;
  return *std::move(sample);
}

void SessionManager::PauseAtTimeToLive(LiveSession& live, const std::string& why) {
  const SessionRecord& r = live.record;
  int64_t now = NowMs();
  if (now < live.ttl_pause_next_ms.load()) return;
  TrySessionLock guard(SessionLock(r.id));
  if (!guard.held() || FindLive(r.tenant, r.id).get() != &live) return;  // the next round
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(r.tenant, r.id);
  // Given more time meanwhile (E2B's setTimeout, connect): not yet.
  if (!record.ok() || record->limits.ttl_seconds == 0 ||
      now < record->created_ms + static_cast<int64_t>(record->limits.ttl_seconds) * 1000) {
    return;
  }
  absl::StatusOr<SessionRecord> paused =
      PauseLocked(kDaemonPrincipal, *record, why, /*at_ttl=*/true);
  if (paused.ok() || FindLive(r.tenant, r.id) == nullptr) return;  // paused, or ended
  // In use (a command runs), or the snapshot failed: tried again in a few seconds, said once.
  live.ttl_pause_next_ms = now + 5000;
  if (live.ttl_pause_said.exchange(true)) return;
  LogRecord event{.unix_ms = NowMs(),
                  .stream = LogStream::kEvent,
                  .data = absl::StrCat(
                      why, ", and it is paused as soon as it can be: ", paused.status().message())};
  LogIfFailed(store_->commands().AppendOutput(r, {event}),
              absl::StrCat("session ", r.id, ": its pause at its TTL not logged"));
}

void SessionManager::Retire(const std::string& id, SessionState state, const std::string& reason) {
  std::shared_ptr<LiveSession> live;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    if (it == live_.end()) return;
    live = std::move(it->second);
    live_.erase(it);
  }
  if (state != SessionState::kFailed) FreezeVolumes(*live);  // a failed VM answers nothing
  live->vm->Kill(absl::UnavailableError(reason));
  ForgetEverywhere(id);
  LogIfFailed(RemoveTree(layout_.Dir(id)), absl::StrCat("session ", id, ": files not removed"));
  secrets_->Forget(id);
  LogIfFailed(store_->sessions().SetState(
                  kDaemonPrincipal, live->record.tenant, id, state, reason, 0,
                  state == SessionState::kFailed ? "session.fail" : "session.expire"),
              absl::StrCat("session ", id, ": its end not recorded"));
  LogRecord event{.unix_ms = NowMs(),
                  .stream = LogStream::kEvent,
                  .data = absl::StrCat("session ", SessionStateName(state), ": ", reason)};
  LogIfFailed(store_->commands().AppendOutput(live->record, {event}),
              absl::StrCat("session ", id, ": its end not logged"));
}

void SessionManager::ExpirePaused() {
  absl::StatusOr<std::vector<SessionRecord>> paused =
      store_->sessions().InState({SessionState::kPaused});
  if (!paused.ok()) return;
  int64_t now = NowMs();
  for (const SessionRecord& r : *paused) {
    // One paused at its TTL stays paused (it has no TTL until given one).
    if (r.limits.ttl_seconds == 0 || r.limits.pause_at_ttl ||
        now < r.created_ms + static_cast<int64_t>(r.limits.ttl_seconds) * 1000) {
      continue;
    }
    std::shared_ptr<absl::Mutex> session_lock = SessionLock(r.id);
    absl::MutexLock guard(session_lock.get());
    LogIfFailed(RemoveTree(layout_.Dir(r.id)),
                absl::StrCat("session ", r.id, ": files not removed"));
    secrets_->Forget(r.id);
    LogIfFailed(store_->sessions().SetState(
                    kDaemonPrincipal, r.tenant, r.id, SessionState::kStopped,
                    absl::StrCat("its time to live of ", r.limits.ttl_seconds, "s ran out"), 0,
                    "session.expire"),
                absl::StrCat("session ", r.id, ": its expiry not recorded"));
  }
}

uint64_t SessionManager::FreeDiskBytes() const {
  struct statvfs fs;
  if (statvfs(paths_.home.c_str(), &fs) != 0) return 0;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

std::string SessionManager::DiskSpaceHint() const {
  uint64_t free = FreeDiskBytes();
  if (free >= kDiskSpaceToGoOn) return "";
  return absl::StrCat(" (the disk of ", paths_.home, " has ", FormatBytes(free),
                      " free: free some space there)");
}

absl::Status SessionManager::SayDiskSpace(const absl::Status& s) const {
  if (s.ok() || !absl::StrContains(s.message(), strerror(ENOSPC))) return s;
  return absl::Status(s.code(), absl::StrCat(s.message(), DiskSpaceHint()));
}

std::string SessionManager::WhyVmFailed(LiveSession& live, const absl::Status& status) {
  // A VM process that died mid-way shows first as a broken monitor or channel: how it ended
  // says more, if it did (the watcher's wait, as for a channel that closes).
  std::optional<std::string> ended;
  for (int i = 0; i < 20 && !(ended = live.vm->ExitReason()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return ended ? *ended : std::string(status.message());
}

bool SessionManager::WaitsForDiskSpace(LiveSession& live) {
  absl::StatusOr<bool> stopped = live.vm->StoppedForDiskSpace(absl::Now() + absl::Seconds(2));
  return stopped.ok() && *stopped;
}

void SessionManager::GoOnWhenDiskHasSpace(LiveSession& live) {
  const SessionRecord& r = live.record;
  auto note = [&](const std::string& text) {
    LogWarning(absl::StrCat("session ", r.id, ": ", text));
    LogRecord event{.unix_ms = NowMs(), .stream = LogStream::kEvent, .data = text};
    LogIfFailed(store_->commands().AppendOutput(r, {event}),
                absl::StrCat("session ", r.id, ": not logged"));
  };
  absl::StatusOr<bool> stopped = live.vm->StoppedForDiskSpace(absl::Now() + absl::Seconds(2));
  if (!stopped.ok()) return;
  uint64_t free = FreeDiskBytes();
  if (!*stopped) {
    // It went on another way (a failed pause continues the VM, whose write then found room):
    // said all the same, as the wait was.
    if (live.waiting_for_disk.exchange(false)) {
      note(absl::StrCat("the host's disk has space again (", FormatBytes(free),
                        " free): the VM went on"));
    }
    return;
  }
  if (free < kDiskSpaceToGoOn) {
    if (!live.waiting_for_disk.exchange(true)) {
      note(absl::StrCat("the host's disk is full (", FormatBytes(free), " free under ", paths_.home,
                        "): the VM waits, losing nothing, and goes on by itself once there is ",
                        FormatBytes(kDiskSpaceToGoOn), " free"));
    }
    return;
  }
  absl::Status went_on = live.vm->Continue(absl::Now() + absl::Seconds(10));
  if (went_on.ok()) {
    live.waiting_for_disk = false;
    note(absl::StrCat("the host's disk has space again (", FormatBytes(free),
                      " free): the VM went on"));
  }
}

void SessionManager::WatchLoop() {
  for (int round = 0;; ++round) {
    {
      absl::MutexLock lock(&watch_mu_);
      absl::Time until = absl::Now() + absl::Milliseconds(250);
      while (!stopping_ && !watch_cv_.WaitWithDeadline(&watch_mu_, until)) {
      }
      if (stopping_) return;
    }
    std::vector<std::shared_ptr<LiveSession>> all;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [id, live] : live_) all.push_back(live);
    }
    int64_t now = NowMs();
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
        std::string why = absl::StrCat("its time to live of ", r.limits.ttl_seconds, "s ran out");
        if (r.limits.pause_at_ttl) {
          PauseAtTimeToLive(*live, why);
        } else {
          Retire(r.id, SessionState::kStopped, why);
        }
      } else if (OnlyYieldingUses(*live) &&
                 (drain_pauses() ||
                  (r.limits.idle_timeout_seconds > 0 &&
                   now >= live->last_used_ms +
                              static_cast<int64_t>(r.limits.idle_timeout_seconds) * 1000))) {
        // Idle, or its host is being drained (then once no command runs in it: a command's
        // client would lose it, so a drain waits for it to end).
        TrySessionLock guard(SessionLock(r.id));
        if (!guard.held() || !OnlyYieldingUses(*live) || !FindLive(r.tenant, r.id)) continue;
        absl::StatusOr<SessionRecord> record = store_->sessions().Get(r.tenant, r.id);
        if (!record.ok()) continue;
        bool drain = drain_pauses();
        if (drain && now < live->last_drain_try_ms + 5000) continue;
        absl::StatusOr<SessionRecord> paused = PauseLocked(
            kDaemonPrincipal, *record,
            drain ? absl::StrCat("its host ", handoff_ != nullptr ? handoff_->host_id() : "",
                                 " is being drained: resume it on another host")
                  : absl::StrCat("idle for ", absl::FormatDuration(
                                                  absl::Seconds(r.limits.idle_timeout_seconds))));
        if (!paused.ok()) {
          // Try again a timeout (or, draining, five seconds) later.
          live->last_used_ms = NowMs();
          live->last_drain_try_ms = NowMs();
        }
      }
    }
    // VMs are asked whether they wait for disk space (a QMP round trip each, under their
    // session's lock) only while the disk is or was lately short, and every 30 s besides: a
    // disk that filled and emptied between two looks is caught then.
    if (FreeDiskBytes() < 2 * kDiskSpaceToGoOn) disk_short_rounds_ = 40;
    bool ask = round % 120 == 60 || (disk_short_rounds_ > 0 && round % 8 == 4);
    if (disk_short_rounds_ > 0) --disk_short_rounds_;
    if (ask) {
      for (const std::shared_ptr<LiveSession>& live : all) {
        TrySessionLock guard(SessionLock(live->record.id));
        if (!guard.held() || !FindLive(live->record.tenant, live->record.id)) continue;
        GoOnWhenDiskHasSpace(*live);
      }
    }
    ExpireEgress(now);
    if (round % 20 == 0) ExpirePaused();
  }
}

}  // namespace airlock
