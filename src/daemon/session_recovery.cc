// SessionManager's recovery: what airlockd does at start with the sessions, VMs and files the
// last one left behind (see Recover in session_manager.h).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/file_util.h"
#include "src/common/log.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/session_workspace.h"  // RunInGuest
#include "src/vm/snapshot.h"
#include "src/vm/vm_launcher.h"

namespace airlock {

namespace {

// What a pooled VM runs once before it waits (see VmPool): commands of the image itself, never a
// user's, each its own argv, with no input and nothing kept. One the image lacks is skipped.
const std::vector<std::vector<std::string>>& PoolWarmUp() {
  static const auto* commands = new std::vector<std::vector<std::string>>{
      {"true"}, {"python3", "-c", "pass"}, {"node", "-e", "0"}};
  return *commands;
}

}  // namespace

absl::Status SessionManager::Recover() {
  absl::StatusOr<std::string> key = LoadOrCreateHostKey(paths_.home + "/host.key");
  if (!key.ok()) return key.status();
  key_ = *key;
  if (absl::Status s = volumes_.Recover(); !s.ok()) return s;
  templates_ = std::make_unique<Templates>(paths_, &hosts_->local(), key_, &counters_);
  absl::StatusOr<std::vector<net::IpAddress>> mine = network_->HostAddresses();
  if (mine.ok()) {
    host_addresses_ = *std::move(mine);
  } else {
    LogWarning(absl::StrCat("the host's addresses are unknown (", mine.status().message(),
                            "); egress still refuses internal ranges"));
  }
  if (use_templates_) {
    pool_ = std::make_unique<VmPool>(
        pool_options_, paths_.home + "/pool",
        [this](const ImageInfo& image, const VmShape& shape, const std::string& runtime_dir,
               const std::string& name, std::string* template_dir) -> absl::StatusOr<LaunchedVm> {
          absl::StatusOr<Templates::Template> tpl = templates_->Get(image, shape);
          if (!tpl.ok()) return tpl.status();
          *template_dir = tpl->dir;
          LaunchOptions options = OptionsForShape(shape, "airlock-pool");
          options.host_cgroup = name;
          options.runtime_dir = runtime_dir;
          options.background = true;
          absl::StatusOr<LaunchedVm> vm =
              RestoreTemplate(hosts_->local(), *tpl, image, options, "");
          if (!vm.ok()) return vm;
          // TCG translates guest code anew in every VM process: run the image's own shell and
          // interpreters once, so that a session's first command finds them translated.
          for (const std::vector<std::string>& argv : PoolWarmUp()) {
            absl::StatusOr<GuestRun> warm = RunInGuest(
                vm->vm->channel(), argv, {"PYTHONDONTWRITEBYTECODE=1"}, 4096, absl::Seconds(30));
            if (!warm.ok()) return warm.status();  // (not found is a GuestRun, not an error)
          }
          return vm;
        },
        [this](const std::string& dir) { hosts_->local().Destroy(dir); });
  }
  // VMs outlive the daemon: a running session whose VM still runs carries on (found again by
  // its runtime directory), and so does one the last daemon was resuming when it stopped. A
  // whole snapshot wins over a VM (the daemon stopped while pausing it: it is paused). Any
  // other session the last daemon was changing cannot come back, and its VM is ended.
  absl::StatusOr<std::vector<SessionRecord>> orphans = store_->sessions().InState(
      {SessionState::kCreating, SessionState::kRunning, SessionState::kPaused});
  if (!orphans.ok()) return orphans.status();
  // Their VMs are looked for all at once: a guest that does not answer costs seconds.
  std::map<std::string, absl::StatusOr<LaunchedVm>> found;
  {
    std::vector<std::thread> threads;
    for (const SessionRecord& s : *orphans) {
      std::string vm_dir = layout_.VmRuntime(s.id);
      if (s.state == SessionState::kCreating || access(vm_dir.c_str(), F_OK) != 0) continue;
      auto [slot, inserted] = found.emplace(s.id, absl::UnknownError("not looked for"));
      threads.emplace_back([this, vm_dir, out = &slot->second] {
        *out = hosts_->local().Reattach(vm_dir, absl::Now() + absl::Seconds(12));
      });
    }
    for (std::thread& t : threads) t.join();
  }
  std::set<std::string> running_on;
  for (const SessionRecord& s : *orphans) {
    std::string snapshot = layout_.Snapshot(s.id);
    std::string vm_dir = layout_.VmRuntime(s.id);
    if (access(layout_.OneShotMarker(s.id).c_str(), F_OK) == 0) {
      // Its one call ended with the last daemon: remove it as that call would have.
      hosts_->local().Destroy(vm_dir);
      LogIfFailed(RemoveTree(layout_.Dir(s.id)),
                  absl::StrCat("session ", s.id, ": files of its ended one-shot run not removed"));
      absl::Status st = store_->sessions().SetState(
          kDaemonPrincipal, s.tenant, s.id, SessionState::kStopped,
          "airlockd stopped while its command ran", 0, "session.recover");
      if (st.ok()) st = store_->sessions().Delete(kDaemonPrincipal, s.tenant, s.id);
      if (!st.ok()) return st;
      continue;
    }
    bool whole = s.state != SessionState::kCreating && OpenSnapshot(snapshot, key_).ok();
    absl::Status vm_lost = absl::NotFoundError("it had no VM");
    if (auto vm = found.find(s.id);
        !whole && vm != found.end() && handoff_ != nullptr && vm->second.ok()) {
      // Another host may have taken the session over from its last published snapshot while
      // this one was down: then that host runs it, and this VM must not go on.
      if (absl::Status claimed = handoff_->ClaimAsItWas(s.id);
          absl::IsFailedPrecondition(claimed)) {
        hosts_->local().Destroy(vm_dir);
        LogWarning(absl::StrCat("session ", s.id, ": ended here: ", claimed.message()));
        LogIfFailed(RemoveTree(layout_.Dir(s.id)),
                    absl::StrCat("session ", s.id, ": files not removed"));
        absl::Status st = store_->sessions().SetState(
            kDaemonPrincipal, s.tenant, s.id, SessionState::kPaused,
            "another host took it over while airlockd was down", 0, "session.recover");
        if (!st.ok()) return st;
        continue;
      }
    }
    if (auto vm = found.find(s.id); !whole && vm != found.end()) {
      vm_lost = vm->second.ok() ? Reattach(s, *std::move(vm->second)) : vm->second.status();
      if (vm_lost.ok()) {
        running_on.insert(s.id);
        continue;
      }
      LogWarning(absl::StrCat("session ", s.id, ": its VM is lost: ", vm_lost.message()));
    }
    hosts_->local().Destroy(vm_dir);
    if (s.state == SessionState::kPaused && whole) continue;
    std::string lost = absl::IsNotFound(vm_lost) ? "the VM and its state were lost"
                                                 : absl::StrCat("the VM could not be found again (",
                                                                vm_lost.message(), ")");
    absl::Status st =
        whole ? store_->sessions().SetState(kDaemonPrincipal, s.tenant, s.id, SessionState::kPaused,
                                            "airlockd stopped just after pausing it", 0,
                                            "session.recover")
              : store_->sessions().SetState(
                    kDaemonPrincipal, s.tenant, s.id, SessionState::kFailed,
                    s.state == SessionState::kCreating
                        ? "airlockd stopped while creating it"
                        : absl::StrCat(s.state == SessionState::kPaused
                                           ? "airlockd stopped while resuming it; "
                                           : "airlockd stopped while the VM was running; ",
                                       lost),
                    0, "session.recover");
    if (!st.ok()) return st;
    if (!whole)
      LogIfFailed(RemoveTree(layout_.Dir(s.id)),
                  absl::StrCat("session ", s.id, ": files not removed"));
    if (whole) {  // the snapshot holds the disk and the memory now
      unlink(layout_.LiveDisk(s.id).c_str());
      unlink(layout_.LiveMemory(s.id).c_str());
    }
  }
  // Half-written snapshots and forks in progress are never loaded: delete them.
  LogIfFailed(RemoveTree(layout_.forks()), "half-made forks not removed");
  LogIfFailed(RemoveTree(layout_.apart()), "half-made snapshots not removed");
  if (DIR* d = opendir(layout_.sessions().c_str())) {
    std::vector<std::string> leftovers;
    std::vector<std::string> stray_vms;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::string dir = layout_.Dir(e->d_name);
      if (DIR* sd = opendir(dir.c_str())) {
        while (dirent* f = readdir(sd)) {
          std::string name = f->d_name;
          if (absl::EndsWith(name, ".tmp") || absl::EndsWith(name, ".old")) {
            leftovers.push_back(dir + "/" + name);
          }
          if (SessionLayout::IsVmRuntime(name) && !running_on.contains(e->d_name)) {
            stray_vms.push_back(dir + "/" + name);
          }
        }
        closedir(sd);
      }
    }
    closedir(d);
    for (const std::string& path : leftovers)
      LogIfFailed(RemoveTree(path), absl::StrCat("leftover ", path, " not removed"));
    // VMs of sessions that were stopped, failed or never recorded as started.
    for (const std::string& path : stray_vms) hosts_->local().Destroy(path);
  }
  watcher_ = std::thread([this] { WatchLoop(); });
  apart_thread_ = std::thread([this] { ApartLoop(); });
  if (handoff_ != nullptr && store_->events() != nullptr) {
    index_thread_ = std::thread([this] { IndexLoop(); });
    fleet_watch_thread_ = std::thread([this] { FleetWatchLoop(); });
  }
  return absl::OkStatus();
}

absl::Status SessionManager::Reattach(const SessionRecord& s, LaunchedVm vm) {
  absl::StatusOr<ImageInfo> image = images_.Operators().ResolveDigest(s.image, s.image_digest);
  if (!image.ok()) return image.status();
  // Values of shared sources are read again (airlockd held them only in memory).
  absl::Status refreshed = secrets_->Refresh(s.id, s.tenant, s.secrets);
  SessionRecord running = s;
  running.state = SessionState::kRunning;
  running.reason.clear();
  running.pid = vm.vm->pid();
  absl::StatusOr<std::shared_ptr<LiveSession>> live = MakeLive(running, std::move(vm), *image);
  if (!live.ok()) return live.status();
  if (absl::Status st =
          store_->sessions().SetState(kDaemonPrincipal, s.tenant, s.id, SessionState::kRunning, "",
                                      running.pid, "session.reattach");
      !st.ok()) {
    return st;
  }
  std::vector<LogRecord> events = {
      {.unix_ms = NowMs(),
       .stream = LogStream::kEvent,
       .data = "airlockd restarted and found the VM running; commands that were running then "
               "carry on, but their output and input streams were cut"}};
  if (!refreshed.ok()) {
    events.push_back({.unix_ms = NowMs(),
                      .stream = LogStream::kEvent,
                      .data = absl::StrCat("secrets: ", refreshed.message())});
  }
  LogIfFailed(store_->commands().AppendOutput(running, events),
              absl::StrCat("session ", s.id, ": its recovery not logged"));
  if (s.state == SessionState::kPaused) {
    // The last daemon stopped after restoring it, before it was recorded as running: the
    // snapshot is used up (its disk is the VM's now).
    LogIfFailed(RemoveTree(layout_.Snapshot(s.id)),
                absl::StrCat("session ", s.id, ": its used snapshot not removed"));
  }
  absl::MutexLock lock(&mu_);
  live_[s.id] = *std::move(live);
  return absl::OkStatus();
}

}  // namespace airlock
