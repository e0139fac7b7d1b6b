#include "src/daemon/session_manager.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "src/common/byte_size.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/hex.h"
#include "src/common/log.h"
#include "src/daemon/session_workspace.h"
#include "src/image/image_store.h"
#include "src/image/registry_client.h"
#include "src/telemetry/tracer.h"
#include "src/vm/snapshot.h"
#include "src/vm/vm_launcher.h"

namespace airlock {

namespace {

// A file's size, 0 if it cannot be read (for the snapshot bytes counted).
uint64_t FileBytes(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

}  // namespace
namespace {

constexpr uint32_t kMaxForks = 64;
// How long after a pause its snapshot's RAM is set apart: a resume that soon is not slowed by
// it (and uses the snapshot as it is).
constexpr absl::Duration kApartDelay = absl::Seconds(3);
// What a pooled VM runs once before it waits (see VmPool): commands of the image itself, never a
// user's, each its own argv, with no input and nothing kept. One the image lacks is skipped.
const std::vector<std::vector<std::string>>& PoolWarmUp() {
  static const auto* commands = new std::vector<std::vector<std::string>>{
      {"true"}, {"python3", "-c", "pass"}, {"node", "-e", "0"}};
  return *commands;
}

LaunchOptions OptionsFor(const SessionRecord& s, const SessionLayout& layout) {
  LaunchOptions options;
  if (s.workspace.present()) options.workspace_path = layout.WorkspaceImage(s.id);
  options.memory_mib = static_cast<uint32_t>(s.limits.memory_bytes >> 20);
  options.vcpus = s.limits.vcpus;
  options.disk_bytes = s.limits.disk_bytes;
  options.pids = s.limits.pids;
  options.host_cgroup = s.id;
  options.hostname = s.hostname;
  options.runtime_dir = layout.VmRuntime(s.id);
  return options;
}

// What one new session counts against its tenant's quotas.
QuotaAmounts NewSession(const SessionLimits& limits) {
  return {.sessions = 1,
          .running = 1,
          .vcpus = limits.vcpus,
          .memory_bytes = limits.memory_bytes,
          .disk_bytes = limits.disk_bytes};
}

providers::VmPlacement PlacementOf(const SessionLimits& limits) {
  return {.vcpus = limits.vcpus, .memory_bytes = limits.memory_bytes};
}

VmShape ShapeOf(const SessionLimits& limits) {
  return {.memory_mib = static_cast<uint32_t>(limits.memory_bytes >> 20),
          .vcpus = limits.vcpus,
          .disk_bytes = limits.disk_bytes};
}

}  // namespace

SessionManager::SessionManager(StateStore* store, HostPaths paths, providers::HostProvider* hosts)
    : store_(store),
      paths_(std::move(paths)),
      layout_(paths_.home),
      hosts_(hosts),
      own_network_(std::make_unique<providers::LocalNetwork>()),
      network_(own_network_.get()) {
  set_egress({});
  absl::StatusOr<std::unique_ptr<SessionSecrets>> secrets = MakeSessionSecrets("");
  secrets_ =
      secrets.ok() ? *std::move(secrets) : std::make_unique<SessionSecrets>(nullptr, nullptr);
}

void SessionManager::set_secrets(std::unique_ptr<SessionSecrets> secrets) {
  secrets_ = std::move(secrets);
}

bool SessionManager::SecretAvailable(const std::string& id, const std::string& name) const {
  return secrets_->Available(id, name);
}

SessionManager::~SessionManager() {
  pool_.reset();  // its VMs are nobody's: they go with airlockd
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  apart_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  if (apart_thread_.joinable()) apart_thread_.join();
}

absl::StatusOr<SessionLimits> SessionManager::ResolveLimits(const SessionLimits& r) {
  SessionLimits l;
  if (r.vcpus != 0) l.vcpus = r.vcpus;
  if (r.memory_bytes != 0) l.memory_bytes = r.memory_bytes;
  if (r.pids != 0) l.pids = r.pids;
  if (r.disk_bytes != 0) l.disk_bytes = r.disk_bytes;
  l.ttl_seconds = r.ttl_seconds;
  l.idle_timeout_seconds = r.idle_timeout_seconds;
  l.net_bytes_per_second = r.net_bytes_per_second;
  if (l.net_bytes_per_second != 0 && l.net_bytes_per_second < 4096) {
    return absl::InvalidArgumentError("a network rate limit must be at least 4 KiB/s (0: none)");
  }
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
  if (l.ttl_seconds > 3650ull * 24 * 3600) {
    return absl::InvalidArgumentError("the time to live must be at most 3650 days (0: none)");
  }
  if (l.idle_timeout_seconds > 30ull * 24 * 3600) {
    return absl::InvalidArgumentError("the idle timeout must be at most 30 days (0: never pause)");
  }
  return l;
}

std::shared_ptr<std::mutex> SessionManager::SessionLock(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::weak_ptr<std::mutex>& slot = session_locks_[id];
  std::shared_ptr<std::mutex> m = slot.lock();
  if (!m) {
    m = std::make_shared<std::mutex>();
    slot = m;
  }
  // Only locks someone holds are kept (a mutex nobody holds is as good as a new one), so an id
  // that names no session costs memory only while its call runs.
  if (session_locks_.size() > 2 * live_.size() + 64) {
    std::erase_if(session_locks_, [](const auto& entry) { return entry.second.expired(); });
  }
  return m;
}

size_t SessionManager::session_lock_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return session_locks_.size();
}

absl::Status SessionManager::Recover() {
  absl::StatusOr<std::string> key = LoadOrCreateHostKey(paths_.home + "/host.key");
  if (!key.ok()) return key.status();
  key_ = *key;
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
  absl::StatusOr<std::vector<SessionRecord>> orphans = store_->SessionsInState(
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
      absl::Status st =
          store_->SetSessionState(kDaemonPrincipal, s.tenant, s.id, SessionState::kStopped,
                                  "airlockd stopped while its command ran", 0, "session.recover");
      if (st.ok()) st = store_->DeleteSession(kDaemonPrincipal, s.tenant, s.id);
      if (!st.ok()) return st;
      continue;
    }
    bool whole = s.state != SessionState::kCreating && OpenSnapshot(snapshot, key_).ok();
    absl::Status vm_lost = absl::NotFoundError("it had no VM");
    if (auto vm = found.find(s.id);
        !whole && vm != found.end() && handoff_ != nullptr && vm->second.ok()) {
      // Another host may have taken the session over from its last published snapshot while
      // this one was down: then that host runs it, and this VM must not go on.
      if (absl::Status claimed = handoff_->Claim(s.id); absl::IsFailedPrecondition(claimed)) {
        hosts_->local().Destroy(vm_dir);
        LogWarning(absl::StrCat("session ", s.id, ": ended here: ", claimed.message()));
        LogIfFailed(RemoveTree(layout_.Dir(s.id)),
                    absl::StrCat("session ", s.id, ": files not removed"));
        absl::Status st = store_->SetSessionState(
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
        whole ? store_->SetSessionState(kDaemonPrincipal, s.tenant, s.id, SessionState::kPaused,
                                        "airlockd stopped just after pausing it", 0,
                                        "session.recover")
              : store_->SetSessionState(
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
    if (whole) unlink(layout_.LiveDisk(s.id).c_str());  // the snapshot holds the disk now
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
  return absl::OkStatus();
}

absl::Status SessionManager::Reattach(const SessionRecord& s, LaunchedVm vm) {
  absl::StatusOr<ImageInfo> image =
      ImageStore(paths_.images).ResolveDigest(s.image, s.image_digest);
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
          store_->SetSessionState(kDaemonPrincipal, s.tenant, s.id, SessionState::kRunning, "",
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
  LogIfFailed(store_->AppendLogs(running, events),
              absl::StrCat("session ", s.id, ": its recovery not logged"));
  if (s.state == SessionState::kPaused) {
    // The last daemon stopped after restoring it, before it was recorded as running: the
    // snapshot is used up (its disk is the VM's now).
    LogIfFailed(RemoveTree(layout_.Snapshot(s.id)),
                absl::StrCat("session ", s.id, ": its used snapshot not removed"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  live_[s.id] = *std::move(live);
  return absl::OkStatus();
}

absl::StatusOr<LaunchedVm> SessionManager::RestoreTemplate(VmDriver& driver,
                                                           const Templates::Template& tpl,
                                                           const ImageInfo& image,
                                                           const LaunchOptions& options,
                                                           const std::string& session) {
  telemetry::Span span("restore");
  if (!session.empty()) span.SetAttribute("airlock.session.id", session);
  absl::Time started = absl::Now();
  absl::StatusOr<UniqueFd> disk = UnnamedFile(paths_.scratch);
  if (!disk.ok()) return disk.status();
  if (absl::Status c = CopyDisk(tpl.files.disk.get(), disk->get()); !c.ok()) return c;
  absl::StatusOr<LaunchedVm> vm =
      RestoreVm(driver, paths_, image, tpl.files, tpl.manifest, *std::move(disk), options);
  if (!vm.ok()) {
    span.SetError(std::string(vm.status().message()));
    return vm;
  }
  counters_.restores++;
  counters_.restore_ms.Record(absl::ToDoubleMilliseconds(absl::Now() - started));
  return vm;
}

std::vector<PooledVmInfo> SessionManager::PooledVms() const {
  return pool_ ? pool_->List() : std::vector<PooledVmInfo>();
}

void SessionManager::DetachAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, live] : live_) live->vm->Detach();
}

absl::StatusOr<std::shared_ptr<LiveSession>> SessionManager::StartVm(SessionRecord& s,
                                                                     const ImageInfo& image) {
  LaunchOptions options = OptionsFor(s, layout_);
  absl::StatusOr<VmDriver*> driver = hosts_->Place(PlacementOf(s.limits));
  if (!driver.ok()) return driver.status();
  absl::StatusOr<LaunchedVm> vm = absl::UnknownError("not started");
  absl::StatusOr<Templates::Template> tpl =
      use_templates_ ? templates_->Get(image, ShapeOf(s.limits))
                     : absl::StatusOr<Templates::Template>(absl::UnavailableError("off"));
  if (tpl.ok() && pool_ && options.workspace_path.empty() && *driver == &hosts_->local()) {
    // A VM of the warm pool (one with a workspace disk to attach is restored instead).
    if (std::optional<LaunchedVm> pooled = pool_->Take(image, ShapeOf(s.limits), tpl->dir)) {
      telemetry::Span span("pool");
      span.SetAttribute("airlock.session.id", s.id);
      absl::Status adopted =
          pooled->vm->Adopt(options.runtime_dir, options.host_cgroup,
                            {.pids_max = options.pids, .hostname = options.hostname},
                            absl::Now() + absl::Seconds(10));
      if (adopted.ok()) {
        vm = *std::move(pooled);
        counters_.pool_takes++;
      } else {
        span.SetError(std::string(adopted.message()));
        LogWarning(absl::StrCat("session ", s.id, ": a pooled VM could not be handed over (",
                                adopted.message(), "); restoring one instead"));
      }
    }
  }
  if (tpl.ok() && !vm.ok()) {
    vm = RestoreTemplate(**driver, *tpl, image, options, s.id);
    // A template that does not restore is made again next time; this session boots.
    if (!vm.ok()) templates_->Discard(tpl->dir);
  }
  if (!vm.ok()) {
    telemetry::Span span("boot");
    span.SetAttribute("airlock.session.id", s.id);
    absl::Time started = absl::Now();
    counters_.boots++;
    vm = LaunchVm(**driver, paths_, image, options);
    if (!vm.ok()) {
      span.SetError(std::string(vm.status().message()));
      return vm.status();
    }
    counters_.boot_ms.Record(absl::ToDoubleMilliseconds(absl::Now() - started));
  }
  s.state = SessionState::kRunning;
  s.pid = vm->vm->pid();
  return MakeLive(s, *std::move(vm), image);
}

namespace {

int64_t EarliestExpiry(const std::vector<EgressGrant>& grants) {
  int64_t earliest = 0;
  for (const EgressGrant& g : grants) {
    if (g.expires_ms != 0 && (earliest == 0 || g.expires_ms < earliest)) earliest = g.expires_ms;
  }
  return earliest;
}

}  // namespace

absl::StatusOr<std::shared_ptr<LiveSession>> SessionManager::MakeLive(const SessionRecord& record,
                                                                      LaunchedVm vm,
                                                                      const ImageInfo& image) {
  auto live = std::make_shared<LiveSession>();
  live->record = record;
  live->vm = std::move(vm.vm);
  live->disk = std::move(vm.disk);
  live->run = image.run;
  live->last_used_ms = NowMs();
  net::EgressProxyOptions options;
  options.bytes_per_second = record.limits.net_bytes_per_second;
  options.ledger = egress_.connections;
  options.tenant = record.tenant;
  options.tenant_connections = quotas_.For(record.tenant).limits.connections;
  options.idle_timeout_ms = egress_.idle_timeout_ms;
  options.upstream_tls = secrets_->upstream_tls();
  if (!record.secrets.empty()) {
    absl::StatusOr<std::shared_ptr<net::SessionCa>> ca =
        secrets_->Ca(layout_.Dir(record.id), record.id);
    if (!ca.ok()) return ca.status();
    live->ca = *ca;
    options.ca = *ca;
    options.secrets = secrets_->ForProxy(record.id, record.secrets);
  }
  SessionRecord owner = record;
  // Denials and connections go to the session's log, where `airlock logs` shows them.
  options.on_events = [this, owner](std::vector<net::NetEvent> events) {
    LogIfFailed(store_->AppendNetEvents(owner, events),
                absl::StrCat("session ", owner.id, ": egress events not stored"));
    std::vector<LogRecord> logs;
    for (const net::NetEvent& e : events) {
      // A secret sent is audited (the daemon acted on the session's behalf): which, and where.
      if (e.kind == "secret" && e.allowed) {
        absl::Status audited =
            store_->Audit(kDaemonPrincipal, owner.tenant, "secret.use", owner.id,
                          absl::StrCat(e.rule, " to ", e.name, ":", e.port, " (", e.reason, ")"));
        LogIfFailed(audited, absl::StrCat("session ", owner.id, ": secret use not audited"));
      }
      if (e.allowed && e.reason.empty()) continue;  // `network log` has those
      LogRecord log;
      log.unix_ms = e.unix_ms;
      log.stream = LogStream::kEvent;
      log.data = net::DescribeNetEvent(e);
      logs.push_back(std::move(log));
    }
    LogIfFailed(store_->AppendLogs(owner, logs),
                absl::StrCat("session ", owner.id, ": egress events not logged"));
  };
  absl::StatusOr<std::shared_ptr<net::EgressPath>> egress = network_->Attach(
      live->vm->channel().shared_from_this(), PolicyFor(record), std::move(options));
  if (!egress.ok()) return egress.status();
  live->egress = *std::move(egress);
  live->egress_expires_ms = EarliestExpiry(record.egress);
  return live;
}

std::shared_ptr<const net::EgressPolicy> SessionManager::PolicyFor(
    const SessionRecord& record) const {
  std::vector<net::EgressRule> rules, denies;
  int64_t now = NowMs();
  for (const EgressGrant& g : record.egress) {
    if (g.expires_ms != 0 && g.expires_ms <= now) continue;
    absl::StatusOr<net::EgressRule> rule = net::ParseEgressRule(
        g.rule, g.deny ? net::RuleContext::kCeilingDeny : net::RuleContext::kSession);
    if (!rule.ok()) continue;  // stored by an older airlockd that read rules differently
    (g.deny ? denies : rules).push_back(*std::move(rule));
  }
  return std::make_shared<const net::EgressPolicy>(std::move(rules), ceiling(), host_addresses_,
                                                   std::move(denies));
}

std::shared_ptr<const net::EgressCeiling> SessionManager::ceiling() const {
  std::lock_guard<std::mutex> lock(egress_mu_);
  if (egress_.ceiling != nullptr) return egress_.ceiling;
  return std::make_shared<const net::EgressCeiling>(net::EgressCeiling::Default());
}

void SessionManager::set_ceiling(std::shared_ptr<const net::EgressCeiling> ceiling) {
  {
    std::lock_guard<std::mutex> lock(egress_mu_);
    egress_.ceiling = std::move(ceiling);
  }
  std::vector<std::shared_ptr<LiveSession>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, live] : live_) all.push_back(live);
  }
  for (const std::shared_ptr<LiveSession>& live : all) {
    absl::StatusOr<SessionRecord> record = store_->GetSession(live->record.tenant, live->record.id);
    if (record.ok() && live->egress != nullptr) live->egress->SetPolicy(PolicyFor(*record));
  }
}

absl::StatusOr<SessionRecord> SessionManager::ChangeEgress(const Principal& who,
                                                           const std::string& id,
                                                           const std::vector<EgressGrant>& add,
                                                           const std::vector<std::string>& remove,
                                                           const std::string& action) {
  return ChangeEgressOf(who, who.Tenant(), id, add, remove, action);
}

absl::StatusOr<SessionRecord> SessionManager::ChangeEgressOf(const Principal& who,
                                                             const std::string& tenant,
                                                             const std::string& id,
                                                             const std::vector<EgressGrant>& add,
                                                             const std::vector<std::string>& remove,
                                                             const std::string& action) {
  // The store answers NOT_FOUND for another tenant's session before anything is locked.
  absl::StatusOr<SessionRecord> record = store_->GetSession(tenant, id);
  if (!record.ok()) return record.status();
  std::shared_ptr<std::mutex> session_lock = SessionLock(id);
  std::lock_guard<std::mutex> guard(*session_lock);
  record = store_->GetSession(tenant, id);
  if (!record.ok()) return record.status();
  if (record->state != SessionState::kRunning && record->state != SessionState::kPaused) {
    return absl::FailedPreconditionError(absl::StrCat("session ", id, " is ",
                                                      SessionStateName(record->state),
                                                      "; its network can no longer change"));
  }
  int64_t now = NowMs();
  std::vector<EgressGrant> grants;
  std::vector<std::string> changed;
  for (const EgressGrant& g : record->egress) {
    if (g.expires_ms == 0 || g.expires_ms > now) {
      grants.push_back(g);
    } else {
      changed.push_back("expired " + g.rule);  // its time ran out: it goes with this change
    }
  }
  for (const std::string& text : remove) {
    // As `network ls` writes it, or any spelling of the same rule ("web.test" for a deny that
    // ls writes "web.test:*").
    auto same = [&](const EgressGrant& g) {
      if (g.rule == text) return true;
      absl::StatusOr<net::EgressRule> parsed = net::ParseEgressRule(
          text, g.deny ? net::RuleContext::kCeilingDeny : net::RuleContext::kSession);
      return parsed.ok() && parsed->ToString() == g.rule;
    };
    auto it = std::find_if(grants.begin(), grants.end(), same);
    if (it == grants.end()) {
      return absl::NotFoundError(absl::StrCat("session ", id, " has no rule ", text,
                                              "; `airlock network ls ", id, "` lists its rules"));
    }
    grants.erase(it);
  }
  for (const EgressGrant& g : add) {
    auto it = std::find_if(grants.begin(), grants.end(), [&](const EgressGrant& h) {
      return h.rule == g.rule && h.deny == g.deny;
    });
    if (it != grants.end()) {
      *it = g;
    } else {
      grants.push_back(g);
    }
    changed.push_back(absl::StrCat(g.deny ? "deny " : "allow ", g.rule));
  }
  for (const std::string& text : remove) changed.push_back("rm " + text);
  if (grants.size() > 256) {
    return absl::InvalidArgumentError("a session holds at most 256 network rules");
  }
  int64_t version = record->egress_version + 1;
  if (absl::Status s = store_->SetEgress(who, record->tenant, id, grants, version, action,
                                         absl::StrJoin(changed, ", "));
      !s.ok()) {
    return s;
  }
  record->egress = grants;
  record->egress_version = version;
  if (std::shared_ptr<LiveSession> live = FindLive(record->tenant, id)) {
    live->egress_expires_ms = EarliestExpiry(grants);
    if (live->egress != nullptr) live->egress->SetPolicy(PolicyFor(*record));
  }
  return *record;
}

net::EgressPath::Counters SessionManager::EgressCounters(const std::string& tenant,
                                                         const std::string& id) {
  std::shared_ptr<LiveSession> live = FindLive(tenant, id);
  if (live == nullptr || live->egress == nullptr) return {};
  return live->egress->counters();
}

void SessionManager::FlushEgressEvents(const Principal& who, const std::string& id) {
  std::shared_ptr<LiveSession> live = FindLive(who.Tenant(), id);
  if (live != nullptr && live->egress != nullptr) live->egress->Flush();
}

absl::StatusOr<SessionRecord> SessionManager::ChangeSecrets(
    const Principal& who, const std::string& id,
    const std::function<absl::StatusOr<std::vector<SecretGrant>>(const SessionRecord&)>& change,
    const std::string& action, const std::string& outcome) {
  // A paused session is resumed: its guest may need the CA installed, its proxy the values.
  absl::StatusOr<std::shared_ptr<LiveSession>> live = Live(who, id);
  if (!live.ok()) return live.status();
  std::shared_ptr<std::mutex> session_lock = SessionLock(id);
  std::lock_guard<std::mutex> guard(*session_lock);
  absl::StatusOr<SessionRecord> record = store_->GetSession(who.Tenant(), id);
  if (!record.ok()) return record.status();
  absl::StatusOr<std::vector<SecretGrant>> grants = change(*record);
  if (!grants.ok()) return grants.status();
  if (!grants->empty() && (*live)->ca == nullptr) {
    absl::StatusOr<std::shared_ptr<net::SessionCa>> ca = secrets_->Ca(layout_.Dir(id), id);
    if (!ca.ok()) return ca.status();
    if (absl::Status s = secrets_->InstallTrust(record->tenant, (*live)->vm->channel(), ca->get());
        !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("installing the session's CA in the guest: ", s.message()));
    }
    (*live)->ca = *ca;
  }
  if (absl::Status s = store_->SetSecrets(who, record->tenant, id, *grants, action, outcome);
      !s.ok()) {
    return s;
  }
  record->secrets = *std::move(grants);
  if ((*live)->egress != nullptr) {
    (*live)->egress->SetSecrets(secrets_->ForProxy(id, record->secrets), (*live)->ca);
  }
  return *record;
}

absl::StatusOr<SessionRecord> SessionManager::SetSecrets(const Principal& who,
                                                         const std::string& id,
                                                         const std::vector<SecretRequest>& add) {
  std::vector<std::string> names;
  for (const SecretRequest& r : add) names.push_back(r.spec.substr(0, r.spec.find('=')));
  return ChangeSecrets(
      who, id,
      [&](const SessionRecord& record) {
        return secrets_->Bind(id, record.tenant, add, record.secrets);
      },
      "secret.set", absl::StrJoin(names, ", "));
}

absl::StatusOr<SessionRecord> SessionManager::RemoveSecrets(const Principal& who,
                                                            const std::string& id,
                                                            const std::vector<std::string>& names) {
  return ChangeSecrets(
      who, id,
      [&](const SessionRecord& record) { return secrets_->Unbind(id, names, record.secrets); },
      "secret.rm", absl::StrJoin(names, ", "));
}

void SessionManager::ExpireEgress(int64_t now) {
  std::vector<std::shared_ptr<LiveSession>> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, live] : live_) {
      int64_t at = live->egress_expires_ms;
      if (at != 0 && at <= now) due.push_back(live);
    }
  }
  for (const std::shared_ptr<LiveSession>& live : due) {
    live->egress_expires_ms = 0;
    absl::StatusOr<SessionRecord> record = store_->GetSession(live->record.tenant, live->record.id);
    if (!record.ok()) continue;
    // A change that adds and removes nothing drops what expired, and tells the proxy.
    absl::StatusOr<SessionRecord> changed =
        ChangeEgressOf(kDaemonPrincipal, record->tenant, record->id, {}, {}, "network.expire");
    LogIfFailed(changed.status(), absl::StrCat("session ", record->id, ": expiring network rules"));
  }
}

absl::StatusOr<std::vector<providers::HostInfo>> SessionManager::Hosts() {
  absl::StatusOr<std::vector<providers::HostInfo>> hosts = hosts_->Hosts();
  if (!hosts.ok()) return hosts.status();
  for (providers::HostInfo& host : *hosts) {
    if (!host.this_host || !host.sessions.empty()) continue;
    for (const auto& live : LiveSessions(SessionEventHub::kEveryTenant)) {
      host.sessions.push_back(live->record.id);
    }
  }
  return hosts;
}

void SessionManager::set_egress(EgressSettings settings) {
  egress_ = std::move(settings);
  if (egress_.ceiling == nullptr) {
    egress_.ceiling = std::make_shared<const net::EgressCeiling>(net::EgressCeiling::Default());
  }
  if (egress_.connections == nullptr) {
    egress_.connections =
        std::make_shared<net::ConnectionLedger>(net::ConnectionLedger::TotalForThisProcess());
  }
}

absl::StatusOr<std::vector<EgressGrant>> SessionManager::ResolveEgress(
    const std::vector<std::string>& rules, const std::vector<std::string>& presets,
    const std::string& source) const {
  std::vector<EgressGrant> out;
  std::shared_ptr<const net::EgressCeiling> ceiling = this->ceiling();
  auto add = [&](const net::EgressRule& rule, const std::string& from) -> absl::Status {
    std::string why;
    if (!ceiling->Admits(rule, &why)) {
      return absl::PermissionDeniedError(
          absl::StrCat("--allow ", rule.ToString(), ": ", why,
                       " (the operator's egress ceiling; ask them to extend it)"));
    }
    std::string text = rule.ToString();
    for (const EgressGrant& g : out) {
      if (g.rule == text) return absl::OkStatus();
    }
    out.push_back({text, from, 0});
    return absl::OkStatus();
  };
  if (rules.size() + presets.size() > 256) {
    return absl::InvalidArgumentError("at most 256 --allow rules and presets per session");
  }
  for (const std::string& preset : presets) {
    absl::StatusOr<std::vector<net::EgressRule>> expanded = net::PresetRules(preset);
    if (!expanded.ok()) return expanded.status();
    for (const net::EgressRule& rule : *expanded) {
      if (absl::Status s = add(rule, "preset:" + preset); !s.ok()) return s;
    }
  }
  for (const std::string& text : rules) {
    absl::StatusOr<net::EgressRule> rule = net::ParseSessionRule(text);
    if (!rule.ok()) return rule.status();
    if (absl::Status s = add(*rule, source); !s.ok()) return s;
  }
  return out;
}

absl::StatusOr<SessionRecord> SessionManager::Create(const Principal& who, const std::string& image,
                                                     const SessionLimits& requested,
                                                     const std::vector<EgressGrant>& egress,
                                                     const std::vector<SecretRequest>& secrets,
                                                     PendingWorkspace* workspace, bool one_shot) {
  absl::StatusOr<SessionLimits> limits = ResolveLimits(requested);
  if (!limits.ok()) return limits.status();
  // Held until the session's record shows it (as creating, which counts as running).
  absl::StatusOr<QuotaReservations::Hold> admitted =
      Admit(who, who.Tenant(), NewSession(*limits), "session.create");
  if (!admitted.ok()) return admitted.status();
  std::string name = image.empty() ? kDefaultImage : image;
  // The caller's names: a tenant's pulls tag images for that tenant alone.
  ImageStore images(paths_.images, who.ImageScope());
  // An image not in the store yet is pulled from its registry on first use (and audited: what
  // the daemon fetched, for whom, from where).
  bool had = images.Resolve(name).status().code() != absl::StatusCode::kNotFound;
  // Only a pull adds to the images quota: an image already there costs the create nothing.
  ImagesQuotaCheck within_quota = had ? nullptr : CheckImagesQuotaAfter(who);
  std::optional<telemetry::Span> pull;
  if (!had) {
    pull.emplace("pull");
    pull->SetAttribute("airlock.image", name);
    counters_.image_pulls++;
  }
  absl::StatusOr<ImageInfo> info = images.ResolveOrPull(name, nullptr, RegistryAccessFor(who));
  if (pull && !info.ok()) pull->SetError(std::string(info.status().message()));
  pull.reset();
  if (!had && info.ok()) {
    if (absl::Status s = within_quota(*info); !s.ok()) info = s;
  }
  if (!had && name != kDefaultImage) {
    absl::Status audited =
        store_->Audit(who, who.Tenant(), "image.pull", name,
                      info.ok() ? absl::StrCat("ok; ", info->digest)
                                : absl::StrCat("failed: ", info.status().message()));
    LogIfFailed(audited, absl::StrCat("image pull of ", name, " not audited"));
  }
  if (!info.ok()) return info.status();
  SessionRecord s;
  s.id = RandomHex(6);
  if (s.id.empty()) return absl::InternalError("getrandom failed");
  s.tenant = who.Tenant();
  s.image = name;
  s.image_digest = info->digest;
  s.created_ms = s.last_used_ms = NowMs();
  s.limits = *limits;
  s.hostname = "airlock-" + s.id.substr(0, 8);
  s.egress = egress;
  if (!secrets.empty()) {
    absl::StatusOr<std::vector<SecretGrant>> grants = secrets_->Bind(s.id, s.tenant, secrets, {});
    if (!grants.ok()) return grants.status();
    s.secrets = *std::move(grants);
  }
  if (workspace != nullptr) s.workspace = workspace->base;
  if (absl::Status st =
          admitted->SettleWith(NewSession(*limits), [&] { return store_->CreateSession(who, s); });
      !st.ok()) {
    secrets_->Forget(s.id);
    return st;
  }

  absl::Status installed =
      workspace != nullptr ? InstallWorkspace(s.id, *workspace) : absl::OkStatus();
  if (one_shot && installed.ok()) {
    installed = MakeDirectories(layout_.Dir(s.id), 0700);
    if (installed.ok()) installed = WriteFileAtomically(layout_.OneShotMarker(s.id), "", 0600);
  }
  absl::StatusOr<std::shared_ptr<LiveSession>> live =
      installed.ok() ? StartVm(s, *info) : absl::StatusOr<std::shared_ptr<LiveSession>>(installed);
  if (live.ok() && ((*live)->ca != nullptr || !secrets_->GuestCaFor(s.tenant).empty())) {
    // The template's disk knows nothing of this session's CA, nor of the operator's.
    absl::Status trusted =
        secrets_->InstallTrust(s.tenant, (*live)->vm->channel(), (*live)->ca.get());
    if (!trusted.ok()) {
      live = absl::Status(trusted.code(), absl::StrCat("installing the session's CA in the guest: ",
                                                       trusted.message()));
    }
  }
  if (!live.ok()) {
    secrets_->Forget(s.id);
    LogIfFailed(store_->SetSessionState(who, s.tenant, s.id, SessionState::kFailed,
                                        std::string(live.status().message()), 0, "session.boot"),
                absl::StrCat("session ", s.id, ": its failure not recorded"));
    return live.status();
  }
  if (absl::Status st = store_->SetSessionState(who, s.tenant, s.id, SessionState::kRunning, "",
                                                s.pid, "session.boot");
      !st.ok()) {
    return st;  // the VM is destroyed with `live`
  }
  std::lock_guard<std::mutex> lock(mu_);
  live_[s.id] = *std::move(live);
  return s;
}

absl::Status SessionManager::InstallWorkspace(const std::string& id, PendingWorkspace& workspace) {
  std::string dir = layout_.Dir(id);
  if (absl::Status s = MakeDirectories(dir, 0700); !s.ok()) return s;
  std::string image = layout_.WorkspaceImage(id);
  if (absl::Status s = LinkOpenFile(workspace.image.get(), image, "keep the workspace image as");
      !s.ok()) {
    return s;
  }
  return WriteFileAtomically(layout_.WorkspaceManifest(id), workspace.manifest, 0600);
}

absl::Status SessionManager::AdvanceWorkspace(const Principal& who, const SessionRecord& record,
                                              const WorkspaceRecord& base,
                                              const std::string& manifest,
                                              const std::string& outcome) {
  if (absl::Status s = WriteFileAtomically(layout_.WorkspaceManifest(record.id), manifest, 0600);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          store_->SetWorkspace(who, record.tenant, record.id, base, "workspace.sync", outcome);
      !s.ok()) {
    return s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = live_.find(record.id); it != live_.end()) it->second->record.workspace = base;
  return absl::OkStatus();
}

RegistryAccess SessionManager::RegistryAccessFor(const Principal& who) const {
  // Root over the Unix socket is the operator; anyone else gets what the operator allowed.
  bool op = who.IsHostRoot();
  // A tenant's pull may take what is left of its images quota, and no more than one pull may.
  const Quota& quota = quotas_.For(who.Tenant());
  uint64_t images = ImageStore(paths_.images, who.ImageScope()).OwnBytes();
  uint64_t left = quota.limits.image_bytes > images ? quota.limits.image_bytes - images : 0;
  return {.use_credentials = op,
          .internal_addresses = op || registry_internal_,
          .max_bytes = op ? quota.pull_bytes : std::min(quota.pull_bytes, left)};
}

absl::StatusOr<std::vector<std::string>> SessionManager::ImagesInUse() const {
  absl::StatusOr<std::vector<SessionRecord>> sessions = store_->SessionsInState(
      {SessionState::kCreating, SessionState::kRunning, SessionState::kPaused});
  if (!sessions.ok()) return sessions.status();
  std::vector<std::string> digests;
  for (const SessionRecord& s : *sessions) digests.push_back(s.image_digest);
  return digests;
}

SessionManager::ImagesQuotaCheck SessionManager::CheckImagesQuotaAfter(const Principal& who) {
  if (who.IsHostRoot()) return [](const ImageInfo&) { return absl::OkStatus(); };
  ImageStore before(paths_.images, who.ImageScope());
  std::map<std::string, std::string> tags;  // the tenant's own, to digests
  for (const std::string& name : before.OwnNames()) {
    absl::StatusOr<ImageInfo> info = before.Resolve(name);
    if (info.ok()) tags[name] = info->digest;
  }
  uint64_t quota = quotas_.For(who.Tenant()).limits.image_bytes;
  return [this, scope = who.ImageScope(), tags = std::move(tags), was = before.OwnBytes(),
          quota](const ImageInfo& made) -> absl::Status {
    ImageStore images(paths_.images, scope);
    uint64_t now = images.OwnBytes();
    if (now <= quota || now <= was) return absl::OkStatus();
    absl::Status undone;
    if (auto it = tags.find(made.name); it != tags.end()) {
      undone = images.TagDigest(made.name, it->second).status();
    } else {
      // What sessions use stays (Prune frees it later); if that is unknown, the new image does.
      absl::StatusOr<std::vector<std::string>> in_use = ImagesInUse();
      undone = images.Remove(made.name, in_use.ok() ? *in_use : std::vector{made.digest}).status();
    }
    LogIfFailed(undone, absl::StrCat("image ", made.name, " over the images quota not undone"));
    return absl::ResourceExhaustedError(
        absl::StrCat("image ", made.name, " takes ", FormatBytes(made.size_bytes),
                     " on disk, and with your other images that is ", FormatBytes(now),
                     ", over your images quota of ", FormatBytes(quota), "; so it was ",
                     undone.ok() ? "not kept" : "made but could not be taken back",
                     " (airlock quota shows what you use; airlock image rm frees some)"));
  };
}

QuotaAmounts SessionManager::UsageOf(const std::string& tenant) {
  QuotaAmounts used;
  absl::StatusOr<std::vector<SessionRecord>> sessions = store_->ListSessions(tenant);
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
  used.connections = egress_.connections->Open(tenant);
  used.log_bytes = store_->LogBytes(tenant).value_or(0);
  used.image_bytes = ImageStore(paths_.images, tenant).OwnBytes();
  return used;
}

absl::StatusOr<QuotaReservations::Hold> SessionManager::Admit(const Principal& who,
                                                              const std::string& tenant,
                                                              const QuotaAmounts& adding,
                                                              const std::string& what) {
  absl::StatusOr<QuotaReservations::Hold> hold = reservations_.Admit(
      tenant, quotas_.For(tenant), [&] { return UsageOf(tenant); }, adding);
  if (!hold.ok()) {
    absl::Status audited =
        store_->Audit(who, tenant, "quota.refuse", what, std::string(hold.status().message()));
    LogIfFailed(audited, "quota refusal not audited");
  }
  return hold;
}

std::pair<Quota, QuotaAmounts> SessionManager::QuotaOf(const Principal& who) {
  std::string tenant = who.Tenant();
  return {quotas_.For(tenant), UsageOf(tenant)};
}

void SessionManager::set_quotas(Quotas quotas) {
  quotas_ = std::move(quotas);
  store_->set_tenant_log_cap(
      [this](const std::string& tenant) { return quotas_.For(tenant).limits.log_bytes; });
}

std::shared_ptr<LiveSession> SessionManager::FindLive(const std::string& tenant,
                                                      const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(id);
  if (it != live_.end() && it->second->record.tenant == tenant) return it->second;
  return nullptr;
}

std::shared_ptr<LiveSession> SessionManager::Use(const std::shared_ptr<LiveSession>& live) {
  live->users++;
  live->last_used_ms = NowMs();
  // The handle shares ownership of the session and ends the use when released.
  return std::shared_ptr<LiveSession>(live.get(), [owner = live, clock = clock_](LiveSession* s) {
    s->last_used_ms = clock->NowUnixMs();
    s->users--;
  });
}

absl::StatusOr<std::shared_ptr<LiveSession>> SessionManager::Live(const Principal& who,
                                                                  const std::string& id) {
  // Under the session's lock, so that a use never starts while the session is being paused.
  std::shared_ptr<std::mutex> session_lock = SessionLock(id);
  std::lock_guard<std::mutex> guard(*session_lock);
  if (std::shared_ptr<LiveSession> live = FindLive(who.Tenant(), id)) return Use(live);
  absl::StatusOr<SessionRecord> record = store_->GetSession(who.Tenant(), id);
  if (handoff_ != nullptr) record = TakeOver(who, id, std::move(record));
  if (!record.ok()) return record.status();
  if (record->state == SessionState::kPaused) {
    absl::StatusOr<std::shared_ptr<LiveSession>> live = ResumeLocked(who, *record);
    if (!live.ok()) return live.status();
    return Use(*live);
  }
  return absl::FailedPreconditionError(
      absl::StrCat("session ", id, " is ", SessionStateName(record->state),
                   record->reason.empty() ? "" : " (" + record->reason + ")",
                   "; create a new one with `airlock session create`"));
}

std::vector<std::shared_ptr<LiveSession>> SessionManager::LiveSessions(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<LiveSession>> out;
  for (auto& [id, live] : live_) {
    if (tenant == SessionEventHub::kEveryTenant || live->record.tenant == tenant) {
      out.push_back(live);
    }
  }
  return out;
}

absl::StatusOr<std::shared_ptr<LiveSession>> SessionManager::Running(const std::string& tenant,
                                                                     const std::string& id) {
  if (std::shared_ptr<LiveSession> live = FindLive(tenant, id)) return live;
  absl::StatusOr<SessionRecord> record = store_->GetSession(tenant, id);
  if (!record.ok()) return record.status();
  return absl::FailedPreconditionError(
      absl::StrCat("session ", id, " is ", SessionStateName(record->state), ", not running"));
}

absl::StatusOr<SessionRecord> SessionManager::Pause(const Principal& who, const std::string& id) {
  std::shared_ptr<std::mutex> session_lock = SessionLock(id);
  std::lock_guard<std::mutex> guard(*session_lock);
  absl::StatusOr<SessionRecord> record = store_->GetSession(who.Tenant(), id);
  if (!record.ok()) return record.status();
  if (record->state == SessionState::kPaused) return record;
  return PauseLocked(who, *record, absl::StrCat("paused by ", who.Name()));
}

absl::StatusOr<SnapshotMemoryApart> SessionManager::PrepareMemoryApart(
    const SessionRecord& record, const std::string& dir, const std::string& work_dir) {
  absl::StatusOr<ImageInfo> image =
      ImageStore(paths_.images).ResolveDigest(record.image, record.image_digest);
  if (!image.ok()) return image.status();
  LaunchOptions options = OptionsFor(record, layout_);
  options.host_cgroup = absl::StrCat(record.id, "-apart");
  options.background = true;  // the lowest CPU weight: sessions that run come first
  return PrepareSnapshotMemoryApart(hosts_->local(), paths_, *image, dir, work_dir, key_, options);
}

void SessionManager::LogMemoryApart(const SessionRecord& record, const absl::Status& status) {
  if (status.ok() || absl::IsNotFound(status)) return;  // NOT_FOUND: apart already
  LogRecord event{.unix_ms = NowMs(),
                  .stream = LogStream::kEvent,
                  .data = absl::StrCat("snapshot: its RAM stays in the state, so resuming it "
                                       "copies the RAM: ",
                                       status.message())};
  LogIfFailed(store_->AppendLogs(record, {event}),
              absl::StrCat("session ", record.id, ": a snapshot problem not logged"));
}

void SessionManager::ApartLoop() {
  for (;;) {
    SessionRecord record;
    {
      std::unique_lock<std::mutex> lock(watch_mu_);
      apart_cv_.wait(lock, [this] { return stopping_ || !apart_queue_.empty(); });
      while (!stopping_ && absl::Now() < apart_queue_.front().not_before) {
        apart_cv_.wait_for(
            lock, absl::ToChronoNanoseconds(apart_queue_.front().not_before - absl::Now()));
      }
      if (stopping_) return;
      record = std::move(apart_queue_.front().record);
      apart_queue_.pop_front();
    }
    std::string dir = layout_.Snapshot(record.id);
    telemetry::Span span("snapshot.memory_apart");
    span.SetAttribute("airlock.session.id", record.id);
    // Outside the session's directory, which `rm` may remove meanwhile.
    absl::StatusOr<SnapshotMemoryApart> apart =
        PrepareMemoryApart(record, dir, layout_.Apart(record.id));
    absl::Status status = apart.status();
    if (apart.ok()) {
      // Put in place only while the session is still paused on that very snapshot.
      std::shared_ptr<std::mutex> session_lock = SessionLock(record.id);
      std::lock_guard<std::mutex> guard(*session_lock);
      absl::StatusOr<SessionRecord> now = store_->GetSession(record.tenant, record.id);
      if (now.ok() && now->state == SessionState::kPaused) {
        status = CommitSnapshotMemoryApart(dir, *apart);
      } else {
        RemoveTree(apart->dir).IgnoreError();
        status = absl::OkStatus();  // resumed or removed meanwhile: nothing to do
      }
    }
    if (status.ok() || absl::IsNotFound(status) || absl::IsFailedPrecondition(status)) continue;
    absl::StatusOr<SessionRecord> now = store_->GetSession(record.tenant, record.id);
    if (!now.ok() || now->state != SessionState::kPaused) continue;  // resumed or removed
    span.SetError(std::string(status.message()));
    LogMemoryApart(record, status);
  }
}

absl::StatusOr<SessionRecord> SessionManager::PauseLocked(const Principal& who,
                                                          const SessionRecord& record,
                                                          const std::string& reason) {
  std::shared_ptr<LiveSession> live = FindLive(record.tenant, record.id);
  if (!live) {
    return absl::FailedPreconditionError(absl::StrCat("session ", record.id, " is ",
                                                      SessionStateName(record.state),
                                                      "; only a running session "
                                                      "can be paused"));
  }
  if (live->users > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", record.id,
                     " is in use (a command or stream is open); wait "
                     "for it to end, or stop it, and pause again"));
  }
  SnapshotManifest manifest =
      DescribeVm(paths_, record.id, record.image_digest, record.limits.vcpus,
                 record.limits.memory_bytes, *live->vm);
  telemetry::Span span("snapshot");
  span.SetAttribute("airlock.session.id", record.id);
  absl::StatusOr<SnapshotManifest> taken =
      TakeSnapshot(*live->vm, live->disk.get(), layout_.Snapshot(record.id), manifest, key_,
                   SnapshotDisk::kLink);
  if (!taken.ok()) {
    span.SetError(std::string(taken.status().message()));
    // Nothing was written; the VM goes on if it still can, or waits, whole, for disk space.
    if (!live->vm->Continue(absl::Now() + absl::Seconds(10)).ok() && !WaitsForDiskSpace(*live)) {
      Retire(record.id, SessionState::kFailed,
             absl::StrCat("pausing failed and the VM could not go on: ",
                          WhyVmFailed(*live, taken.status())));
    }
    return absl::Status(taken.status().code(),
                        absl::StrCat("could not pause session ", record.id, ": ",
                                     taken.status().message(), DiskSpaceHint()));
  }
  counters_.snapshots++;
  counters_.snapshot_bytes += FileBytes(layout_.Snapshot(record.id) + "/" + kSnapshotStateFile);
  span.End();
  // A resumed session's disk had a name of its own; the snapshot holds it now.
  unlink(layout_.LiveDisk(record.id).c_str());
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(record.id);
  }
  live->vm->Kill(absl::CancelledError("the session was paused"));
  live.reset();  // the VM process is reaped here unless a watcher holds it for a moment
  if (absl::Status st = store_->SetSessionState(who, record.tenant, record.id,
                                                SessionState::kPaused, reason, 0, "session.pause");
      !st.ok()) {
    return st;
  }
  LogRecord event{.unix_ms = NowMs(),
                  .stream = LogStream::kEvent,
                  .data = absl::StrCat("session paused: ", reason)};
  LogIfFailed(store_->AppendLogs(record, {event}),
              absl::StrCat("session ", record.id, ": its pause not logged"));
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    apart_queue_.push_back({record, absl::Now() + kApartDelay});
  }
  apart_cv_.notify_one();
  absl::StatusOr<SessionRecord> paused = store_->GetSession(record.tenant, record.id);
  if (paused.ok() && handoff_ != nullptr) {
    if (absl::Status st = Publish(*paused); !st.ok()) return st;
  }
  return paused;
}

std::pair<int, int> SessionManager::PauseAll() {
  std::vector<std::shared_ptr<LiveSession>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, live] : live_) all.push_back(live);
  }
  int paused = 0, failed = 0;
  for (const std::shared_ptr<LiveSession>& live : all) {
    std::shared_ptr<std::mutex> session_lock = SessionLock(live->record.id);
    std::lock_guard<std::mutex> guard(*session_lock);
    absl::StatusOr<SessionRecord> record = store_->GetSession(live->record.tenant, live->record.id);
    bool ok = record.ok() && record->state == SessionState::kRunning &&
              PauseLocked(kDaemonPrincipal, *record, "airlockd stopped").ok();
    ++(ok ? paused : failed);
  }
  return {paused, failed};
}

absl::StatusOr<SessionRecord> SessionManager::Resume(const Principal& who, const std::string& id) {
  std::shared_ptr<std::mutex> session_lock = SessionLock(id);
  std::lock_guard<std::mutex> guard(*session_lock);
  absl::StatusOr<SessionRecord> record = store_->GetSession(who.Tenant(), id);
  if (record.ok() && record->state == SessionState::kRunning && FindLive(who.Tenant(), id)) {
    return record;
  }
  if (handoff_ != nullptr) record = TakeOver(who, id, std::move(record));
  if (!record.ok()) return record.status();
  absl::StatusOr<std::shared_ptr<LiveSession>> live = ResumeLocked(who, *record);
  if (!live.ok()) return live.status();
  return (*live)->record;
}

absl::StatusOr<SessionRecord> SessionManager::TakeOver(const Principal& who, const std::string& id,
                                                       absl::StatusOr<SessionRecord> local) {
  if (local.ok() && local->state != SessionState::kPaused) return local;
  if (!local.ok() && !absl::IsNotFound(local.status())) return local;
  absl::StatusOr<SessionHandoff::Published> published = handoff_->Find(id);
  // Never published: it never left this host (or is no session of the caller's at all).
  if (absl::IsNotFound(published.status())) return local;
  if (!published.ok()) return published.status();
  if (published->record.tenant != who.Tenant()) {
    if (!local.ok()) return local;
    return absl::FailedPreconditionError(
        absl::StrCat("session ", id, " was published by another tenant's session"));
  }
  if (absl::Status st = handoff_->Claim(id); !st.ok()) return st;
  std::string dir = layout_.Snapshot(id);
  if (local.ok() && published->host == handoff_->host_id() && access(dir.c_str(), F_OK) == 0) {
    return local;  // its last snapshot was taken here, and is still here
  }
  telemetry::Span span("snapshot.fetch");
  span.SetAttribute("airlock.session.id", id);
  absl::Status st = MakeDirectories(layout_.Dir(id), 0700);
  if (st.ok()) st = handoff_->Fetch(*published, dir);
  if (st.ok()) {
    // A host that never had the session's image takes it from the fleet's blob store.
    ImageStore images(paths_.images);
    const SessionRecord& r = published->record;
    if (absl::IsNotFound(images.ResolveDigest(r.image, r.image_digest).status())) {
      st = handoff_->FetchImage(*published, images);
    }
  }
  if (st.ok()) st = store_->ImportSession(who, published->record, published->host);
  if (!st.ok()) {
    span.SetError(std::string(st.message()));
    LogIfFailed(handoff_->Release(id), absl::StrCat("session ", id, ": not released"));
    return absl::Status(st.code(), absl::StrCat("could not bring session ", id, " from host ",
                                                published->host, ": ", st.message()));
  }
  LogRecord event{.unix_ms = NowMs(),
                  .stream = LogStream::kEvent,
                  .data = absl::StrCat("session moved here from host ", published->host)};
  LogIfFailed(store_->AppendLogs(published->record, {event}),
              absl::StrCat("session ", id, ": its move not logged"));
  return store_->GetSession(who.Tenant(), id);
}

absl::Status SessionManager::Publish(const SessionRecord& record) {
  telemetry::Span span("snapshot.publish");
  span.SetAttribute("airlock.session.id", record.id);
  absl::StatusOr<ImageInfo> image =
      ImageStore(paths_.images).ResolveDigest(record.image, record.image_digest);
  absl::Status st = image.status();
  if (st.ok()) st = handoff_->Publish(record, layout_.Snapshot(record.id), *image);
  if (st.ok()) st = handoff_->Release(record.id);
  if (st.ok()) return st;
  span.SetError(std::string(st.message()));
  LogRecord event{.unix_ms = NowMs(),
                  .stream = LogStream::kEvent,
                  .data = absl::StrCat("snapshot not published: ", st.message())};
  LogIfFailed(store_->AppendLogs(record, {event}),
              absl::StrCat("session ", record.id, ": its snapshot problem not logged"));
  // This host keeps the session (and its claim): it resumes here only.
  return absl::Status(st.code(),
                      absl::StrCat("session ", record.id,
                                   " is paused, but its snapshot could not be published for other "
                                   "hosts (",
                                   st.message(), "); it can be resumed on this host only"));
}

void SessionManager::ForgetEverywhere(const std::string& id) {
  if (handoff_ == nullptr) return;
  LogIfFailed(handoff_->Forget(id), absl::StrCat("session ", id, ": its snapshot still published"));
  LogIfFailed(handoff_->Release(id), absl::StrCat("session ", id, ": not released"));
}

absl::StatusOr<std::shared_ptr<LiveSession>> SessionManager::ResumeLocked(
    const Principal& who, const SessionRecord& record) {
  absl::StatusOr<std::shared_ptr<LiveSession>> live = ResumeHere(who, record);
  // A claim TakeOver made is given back: another host may resume it.
  if (!live.ok() && handoff_ != nullptr) {
    LogIfFailed(handoff_->Release(record.id),
                absl::StrCat("session ", record.id, ": not released"));
  }
  return live;
}

absl::StatusOr<std::shared_ptr<LiveSession>> SessionManager::ResumeHere(
    const Principal& who, const SessionRecord& record) {
  if (record.state != SessionState::kPaused) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", record.id, " is ", SessionStateName(record.state),
                     record.reason.empty() ? "" : " (" + record.reason + ")",
                     "; only a paused session can be resumed"));
  }
  std::string dir = layout_.Snapshot(record.id);
  SnapshotFiles files;
  telemetry::Span verify("verify");  // the manifest's signature and every file's digest
  verify.SetAttribute("airlock.session.id", record.id);
  absl::StatusOr<SnapshotManifest> manifest = OpenSnapshot(dir, key_, &files, SnapshotUse::kResume);
  if (!manifest.ok()) verify.SetError(std::string(manifest.status().message()));
  verify.End();
  if (!manifest.ok()) {
    // Never loaded: the session cannot come back, and says why.
    std::string why(manifest.status().message());
    LogIfFailed(store_->SetSessionState(who, record.tenant, record.id, SessionState::kFailed, why,
                                        0, "session.resume"),
                absl::StrCat("session ", record.id, ": its failure not recorded"));
    return absl::DataLossError(absl::StrCat("session ", record.id, " cannot be resumed: ", why));
  }
  absl::StatusOr<ImageInfo> image =
      ImageStore(paths_.images).ResolveDigest(record.image, record.image_digest);
  if (!image.ok()) return image.status();
  // Held until the record says running.
  QuotaAmounts adding = NewSession(record.limits);
  adding.sessions = adding.disk_bytes = 0;  // it exists already
  absl::StatusOr<QuotaReservations::Hold> admitted =
      Admit(who, record.tenant, adding, "session.resume " + record.id);
  if (!admitted.ok()) {
    return absl::Status(
        admitted.status().code(),
        absl::StrCat("session ", record.id, " cannot run now: ", admitted.status().message()));
  }
  absl::StatusOr<VmDriver*> driver = hosts_->Place(PlacementOf(record.limits));
  if (!driver.ok()) return driver.status();
  // The VM takes the snapshot's disk over (it becomes the session's live disk), so the
  // snapshot is used up from here on.
  std::string disk_path = absl::StrCat(dir, "/", kSnapshotDiskFile);
  std::string live_path = layout_.LiveDisk(record.id);
  // The disk checked, made writable through its descriptor (never its path again).
  absl::StatusOr<UniqueFd> disk = ReopenFile(files.disk.get(), /*writable=*/true);
  if (!disk.ok()) return disk.status();
  if (rename(disk_path.c_str(), live_path.c_str()) != 0) return ErrnoStatus("rename", disk_path);
  telemetry::Span restore("restore");
  restore.SetAttribute("airlock.session.id", record.id);
  absl::Time restore_started = absl::Now();
  absl::StatusOr<LaunchedVm> vm = RestoreVm(**driver, paths_, *image, files, *manifest,
                                            *std::move(disk), OptionsFor(record, layout_));
  if (!vm.ok()) {
    restore.SetError(std::string(vm.status().message()));
    // Put the disk back so that the snapshot can be tried again (if the guest ran at all, the
    // disk no longer matches and verification will refuse it).
    if (rename(live_path.c_str(), disk_path.c_str()) != 0) {
      LogIfFailed(store_->SetSessionState(who, record.tenant, record.id, SessionState::kFailed,
                                          absl::StrCat("resuming failed: ", vm.status().message()),
                                          0, "session.resume"),
                  absl::StrCat("session ", record.id, ": its failure not recorded"));
    }
    return absl::Status(vm.status().code(), absl::StrCat("could not resume session ", record.id,
                                                         ": ", vm.status().message()));
  }
  counters_.restores++;
  counters_.restore_ms.Record(absl::ToDoubleMilliseconds(absl::Now() - restore_started));
  restore.End();
  // Shared sources are read again: a rotated secret takes effect (its placeholder stays).
  if (absl::Status refreshed = secrets_->Refresh(record.id, record.tenant, record.secrets);
      !refreshed.ok()) {
    LogRecord event{.unix_ms = NowMs(),
                    .stream = LogStream::kEvent,
                    .data = absl::StrCat("secrets: ", refreshed.message())};
    LogIfFailed(
        store_->AppendLogs(record, {event}),
        absl::StrCat("session ", record.id,
                     ": the secrets problem not logged"));  // the resume goes on without the value
  }
  SessionRecord running = record;
  running.state = SessionState::kRunning;
  running.reason.clear();
  running.pid = vm->vm->pid();
  absl::StatusOr<std::shared_ptr<LiveSession>> made = MakeLive(running, *std::move(vm), *image);
  if (!made.ok()) return made.status();
  std::shared_ptr<LiveSession> live = *std::move(made);
  if (absl::Status st = admitted->SettleWith(
          adding,
          [&] {
            return store_->SetSessionState(who, record.tenant, record.id, SessionState::kRunning,
                                           "", live->record.pid, "session.resume");
          });
      !st.ok()) {
    return st;
  }
  LogIfFailed(RemoveTree(dir),
              absl::StrCat("session ", record.id, ": its used snapshot not removed"));
  {
    std::lock_guard<std::mutex> lock(mu_);

    live_[record.id] = live;
  }
  return live;
}

absl::StatusOr<std::vector<SessionRecord>> SessionManager::Fork(const Principal& who,
                                                                const std::string& id,
                                                                uint32_t count) {
  if (count == 0) count = 1;
  if (count > kMaxForks) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxForks, " forks at once"));
  }
  if (uint64_t most = quotas_.For(who.Tenant()).forks_per_call; count > most) {
    absl::Status over = absl::ResourceExhaustedError(
        absl::StrCat("over the forks quota of ", most, " per call: asked for ", count));
    LogIfFailed(store_->Audit(who, who.Tenant(), "quota.refuse", "session.fork " + id,
                              std::string(over.message())),
                "quota refusal not audited");  // the refusal stands either way
    return over;
  }
  std::shared_ptr<std::mutex> session_lock = SessionLock(id);
  std::lock_guard<std::mutex> guard(*session_lock);
  absl::StatusOr<SessionRecord> record = store_->GetSession(who.Tenant(), id);
  if (!record.ok()) return record.status();
  if (record->state == SessionState::kPaused) {
    std::string dir = layout_.Snapshot(id);
    return ForkFrom(who, *record, dir, count);
  }
  std::shared_ptr<LiveSession> live = FindLive(who.Tenant(), id);
  if (!live) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", id, " is ", SessionStateName(record->state),
                     "; only a running or paused session can be forked"));
  }
  if (live->users > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", id,
                     " is in use (a command or stream is open); wait for it to "
                     "end and fork again"));
  }
  // Snapshot the running session with a copy of its disk, then let it go on.
  SnapshotManifest manifest = DescribeVm(paths_, id, record->image_digest, record->limits.vcpus,
                                         record->limits.memory_bytes, *live->vm);
  std::string dir = layout_.Fork(id, RandomHex(4));
  absl::StatusOr<SnapshotManifest> taken =
      TakeSnapshot(*live->vm, live->disk.get(), dir, manifest, key_, SnapshotDisk::kCopy);
  absl::Status resumed = live->vm->Continue(absl::Now() + absl::Seconds(10));
  if (!resumed.ok() && !WaitsForDiskSpace(*live)) {
    Retire(id, SessionState::kFailed,
           absl::StrCat("the VM could not go on after a snapshot for a fork: ",
                        WhyVmFailed(*live, resumed)));
  }
  if (!taken.ok()) {
    LogIfFailed(RemoveTree(dir), absl::StrCat("fork snapshot ", dir, " not removed"));
    return absl::Status(taken.status().code(),
                        absl::StrCat("could not snapshot session ", id, ": ",
                                     taken.status().message(), DiskSpaceHint()));
  }
  counters_.snapshots++;
  counters_.snapshot_bytes += FileBytes(dir + "/" + kSnapshotStateFile);
  // The forks then map the RAM and share the pages they do not write.
  absl::StatusOr<SnapshotMemoryApart> apart = PrepareMemoryApart(*record, dir, dir + ".apart");
  LogMemoryApart(*record, apart.ok() ? CommitSnapshotMemoryApart(dir, *apart) : apart.status());
  absl::StatusOr<std::vector<SessionRecord>> forks = ForkFrom(who, *record, dir, count);
  LogIfFailed(RemoveTree(dir), absl::StrCat("fork snapshot ", dir, " not removed"));
  return forks;
}

absl::StatusOr<std::vector<SessionRecord>> SessionManager::ForkFrom(const Principal& who,
                                                                    const SessionRecord& source,
                                                                    const std::string& dir,
                                                                    uint32_t count) {
  SnapshotFiles files;
  absl::StatusOr<SnapshotManifest> manifest = OpenSnapshot(dir, key_, &files);
  if (!manifest.ok()) return manifest.status();
  absl::StatusOr<ImageInfo> image =
      ImageStore(paths_.images).ResolveDigest(source.image, source.image_digest);
  if (!image.ok()) return image.status();
  const UniqueFd& from = files.disk;
  QuotaAmounts each = NewSession(source.limits), all;
  for (uint32_t i = 0; i < count; ++i) {
    all.sessions += each.sessions;
    all.running += each.running;
    all.vcpus += each.vcpus;
    all.memory_bytes += each.memory_bytes;
    all.disk_bytes += each.disk_bytes;
  }
  // Held until every fork's record exists (as creating, which counts as running).
  absl::StatusOr<QuotaReservations::Hold> admitted =
      Admit(who, who.Tenant(), all, "session.fork " + source.id);
  if (!admitted.ok()) {
    return absl::Status(admitted.status().code(),
                        absl::StrCat("cannot make ", count, " forks of ", source.id, ": ",
                                     admitted.status().message()));
  }
  std::vector<SessionRecord> made;
  auto undo = [&](const absl::Status& why) {
    for (const SessionRecord& s : made)
      LogIfFailed(Remove(who, s.id, "its fork failed"),
                  absl::StrCat("fork ", s.id, " not removed after a sibling failed"));
    return absl::Status(why.code(),
                        absl::StrCat("could not fork session ", source.id, ": ", why.message()));
  };
  // Records and disk copies first (cheap), then the restores in parallel: they spend most of
  // their time starting QEMU and waiting for the guest.
  std::vector<SessionRecord> records;
  std::vector<absl::StatusOr<UniqueFd>> disks;
  for (uint32_t i = 0; i < count; ++i) {
    SessionRecord s = source;
    s.id = RandomHex(6);
    if (s.id.empty()) return undo(absl::InternalError("getrandom failed"));
    s.hostname = "airlock-" + s.id.substr(0, 8);
    s.state = SessionState::kCreating;
    s.reason.clear();
    s.pid = 0;
    s.created_ms = s.last_used_ms = NowMs();
    if (absl::Status st = admitted->SettleWith(each, [&] { return store_->CreateSession(who, s); });
        !st.ok()) {
      return undo(st);
    }
    records.push_back(s);
    made.push_back(s);
    if (s.workspace.present()) {
      // The base is read-only: every fork shares the parent's image (and copies its manifest).
      if (absl::Status st = MakeDirectories(layout_.Dir(s.id), 0700); !st.ok()) return undo(st);
      for (auto file : {&SessionLayout::WorkspaceImage, &SessionLayout::WorkspaceManifest}) {
        std::string from = (layout_.*file)(source.id), to = (layout_.*file)(s.id);
        if (link(from.c_str(), to.c_str()) != 0) return undo(ErrnoStatus("link", to));
      }
    }
    if (!s.secrets.empty()) {
      // The fork's guest trusts its parent's CA and holds its placeholders.
      secrets_->CopyValues(source.id, s.id);
      if (absl::Status st = SessionSecrets::CopyCa(layout_.Dir(source.id), layout_.Dir(s.id));
          !st.ok()) {
        return undo(st);
      }
    }
    absl::StatusOr<UniqueFd> disk = UnnamedFile(paths_.scratch);
    if (disk.ok()) {
      if (absl::Status c = CopyDisk(from.get(), disk->get()); !c.ok()) disk = c;
    }
    disks.push_back(std::move(disk));
  }
  std::vector<absl::StatusOr<LaunchedVm>> vms;
  for (uint32_t i = 0; i < count; ++i) vms.emplace_back(absl::UnknownError("not started"));
  {
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < count; ++i) {
      threads.emplace_back([&, i] {
        if (!disks[i].ok()) {
          vms[i] = disks[i].status();
          return;
        }
        absl::StatusOr<VmDriver*> driver = hosts_->Place(PlacementOf(records[i].limits));
        if (!driver.ok()) {
          vms[i] = driver.status();
          return;
        }
        vms[i] = RestoreVm(**driver, paths_, *image, files, *manifest, *std::move(disks[i]),
                           OptionsFor(records[i], layout_));
      });
    }
    for (std::thread& t : threads) t.join();
  }
  absl::Status first_error;
  for (uint32_t i = 0; i < count; ++i) {
    SessionRecord& s = records[i];
    if (!vms[i].ok()) {
      LogIfFailed(
          store_->SetSessionState(who, s.tenant, s.id, SessionState::kFailed,
                                  std::string(vms[i].status().message()), 0, "session.fork"),
          absl::StrCat("fork ", s.id, ": its failure not recorded"));
      if (first_error.ok()) first_error = vms[i].status();
      continue;
    }
    counters_.restores++;
    s.state = SessionState::kRunning;
    s.pid = vms[i]->vm->pid();
    absl::StatusOr<std::shared_ptr<LiveSession>> made = MakeLive(s, *std::move(vms[i]), *image);
    if (!made.ok()) {
      LogIfFailed(store_->SetSessionState(who, s.tenant, s.id, SessionState::kFailed,
                                          std::string(made.status().message()), 0, "session.fork"),
                  absl::StrCat("fork ", s.id, ": its failure not recorded"));
      if (first_error.ok()) first_error = made.status();
      continue;
    }
    std::shared_ptr<LiveSession> live = *std::move(made);
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_[s.id] = std::move(live);
    }
    absl::Status st = store_->SetSessionState(who, s.tenant, s.id, SessionState::kRunning, "",
                                              s.pid, absl::StrCat("session.fork from ", source.id));
    if (!st.ok() && first_error.ok()) first_error = st;
  }
  if (!first_error.ok()) return undo(first_error);
  made = records;
  return made;
}

absl::Status SessionManager::Remove(const Principal& who, const std::string& id,
                                    const std::string& reason) {
  std::shared_ptr<std::mutex> session_lock = SessionLock(id);
  std::lock_guard<std::mutex> guard(*session_lock);
  absl::StatusOr<SessionRecord> record = store_->GetSession(who.Tenant(), id);
  if (!record.ok()) return record.status();
  // With a fleet, only while no other host runs it.
  if (handoff_ != nullptr && record->state != SessionState::kStopped &&
      record->state != SessionState::kFailed) {
    if (absl::Status st = handoff_->Claim(id); !st.ok()) return st;
  }
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
  ForgetEverywhere(id);
  LogIfFailed(RemoveTree(layout_.Dir(id)), absl::StrCat("session ", id, ": files not removed"));
  secrets_->Forget(id);
  SessionState end =
      record->state == SessionState::kFailed ? SessionState::kFailed : SessionState::kStopped;
  std::string why = end == SessionState::kFailed ? record->reason : reason;
  absl::Status status =
      store_->SetSessionState(who, record->tenant, id, end, why, 0, "session.remove");
  std::lock_guard<std::mutex> lock(mu_);
  session_locks_.erase(id);  // holders keep theirs alive; the session is gone for new ones
  return status;
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
  ForgetEverywhere(id);
  LogIfFailed(RemoveTree(layout_.Dir(id)), absl::StrCat("session ", id, ": files not removed"));
  secrets_->Forget(id);
  LogIfFailed(
      store_->SetSessionState(kDaemonPrincipal, live->record.tenant, id, state, reason, 0,
                              state == SessionState::kFailed ? "session.fail" : "session.expire"),
      absl::StrCat("session ", id, ": its end not recorded"));
  LogRecord event{.unix_ms = NowMs(),
                  .stream = LogStream::kEvent,
                  .data = absl::StrCat("session ", SessionStateName(state), ": ", reason)};
  LogIfFailed(store_->AppendLogs(live->record, {event}),
              absl::StrCat("session ", id, ": its end not logged"));
}

void SessionManager::ExpirePaused() {
  absl::StatusOr<std::vector<SessionRecord>> paused =
      store_->SessionsInState({SessionState::kPaused});
  if (!paused.ok()) return;
  int64_t now = NowMs();
  for (const SessionRecord& r : *paused) {
    if (r.limits.ttl_seconds == 0 ||
        now < r.created_ms + static_cast<int64_t>(r.limits.ttl_seconds) * 1000) {
      continue;
    }
    std::shared_ptr<std::mutex> session_lock = SessionLock(r.id);
    std::lock_guard<std::mutex> guard(*session_lock);
    LogIfFailed(RemoveTree(layout_.Dir(r.id)),
                absl::StrCat("session ", r.id, ": files not removed"));
    secrets_->Forget(r.id);
    LogIfFailed(store_->SetSessionState(
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
  if (!WaitsForDiskSpace(live)) return;
  const SessionRecord& r = live.record;
  auto note = [&](const std::string& text) {
    LogWarning(absl::StrCat("session ", r.id, ": ", text));
    LogRecord event{.unix_ms = NowMs(), .stream = LogStream::kEvent, .data = text};
    LogIfFailed(store_->AppendLogs(r, {event}), absl::StrCat("session ", r.id, ": not logged"));
  };
  uint64_t free = FreeDiskBytes();
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
      std::unique_lock<std::mutex> lock(watch_mu_);
      watch_cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stopping_; });
      if (stopping_) return;
    }
    std::vector<std::shared_ptr<LiveSession>> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
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
        Retire(r.id, SessionState::kStopped,
               absl::StrCat("its time to live of ", r.limits.ttl_seconds, "s ran out"));
      } else if (r.limits.idle_timeout_seconds > 0 && live->users == 0 &&
                 now >= live->last_used_ms +
                            static_cast<int64_t>(r.limits.idle_timeout_seconds) * 1000) {
        std::shared_ptr<std::mutex> session_lock = SessionLock(r.id);
        std::unique_lock<std::mutex> guard(*session_lock, std::try_to_lock);
        if (!guard.owns_lock() || live->users > 0 || !FindLive(r.tenant, r.id)) continue;
        absl::StatusOr<SessionRecord> record = store_->GetSession(r.tenant, r.id);
        if (!record.ok()) continue;
        absl::StatusOr<SessionRecord> paused = PauseLocked(
            kDaemonPrincipal, *record,
            absl::StrCat("idle for ",
                         absl::FormatDuration(absl::Seconds(r.limits.idle_timeout_seconds))));
        if (!paused.ok()) live->last_used_ms = NowMs();  // try again a timeout later
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
        std::shared_ptr<std::mutex> session_lock = SessionLock(live->record.id);
        std::unique_lock<std::mutex> guard(*session_lock, std::try_to_lock);
        if (!guard.owns_lock() || !FindLive(live->record.tenant, live->record.id)) continue;
        GoOnWhenDiskHasSpace(*live);
      }
    }
    ExpireEgress(now);
    if (round % 20 == 0) ExpirePaused();
  }
}

}  // namespace airlock
