#include "src/daemon/session_manager.h"

#include <sys/random.h>
#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "src/common/byte_size.h"
#include "src/common/file_util.h"
#include "src/common/hex.h"
#include "src/common/log.h"
#include "src/daemon/session_manager_internal.h"
#include "src/daemon/session_workspace.h"
#include "src/image/image_store.h"
#include "src/image/registry_client.h"
#include "src/telemetry/tracer.h"
#include "src/vm/vm_launcher.h"

namespace airlock {

using session_internal::EarliestExpiry;
using session_internal::NewSession;
using session_internal::OptionsFor;
using session_internal::PlacementOf;
using session_internal::ShapeOf;

namespace {

// The operator's settings with what they leave out: the default ceiling, and a connection
// ledger sized by this process's open-file limit.
EgressSettings WithDefaults(EgressSettings settings) {
  if (settings.ceiling == nullptr) {
    settings.ceiling = std::make_shared<const net::EgressCeiling>(net::EgressCeiling::Default());
  }
  if (settings.connections == nullptr) {
    settings.connections =
        std::make_shared<net::ConnectionLedger>(net::ConnectionLedger::TotalForThisProcess());
  }
  return settings;
}

}  // namespace

SessionManager::SessionManager(SessionManagerOptions options)
    : store_(options.store),
      paths_(std::move(options.paths)),
      layout_(paths_.home),
      clock_(options.clock),
      hosts_(options.hosts),
      network_(options.network),
      handoff_(options.handoff),
      use_templates_(options.use_templates),
      activity_record_(options.activity_record),
      pool_options_(options.pool),
      egress_(WithDefaults(std::move(options.egress))),
      secrets_(std::move(options.secrets)),
      // The images quota counts what ImageService, made next, finds; asked only once both are.
      quotas_(
          options.quotas, store_,
          [this](const std::string& tenant) { return images_.ForScope(tenant).OwnBytes(); },
          egress_.connections),
      images_(paths_.images, store_, &quotas_, options.registry_internal, &counters_.image_pulls),
      volumes_(store_, &quotas_, layout_) {
  if (network_ == nullptr) {
    own_network_ = std::make_unique<providers::LocalNetwork>();
    network_ = own_network_.get();
  }
  if (secrets_ == nullptr) {
    absl::StatusOr<std::unique_ptr<SessionSecrets>> secrets = MakeSessionSecrets("");
    secrets_ =
        secrets.ok() ? *std::move(secrets) : std::make_unique<SessionSecrets>(nullptr, nullptr);
  }
  store_->set_tenant_log_cap([quotas = std::move(options.quotas)](const std::string& tenant) {
    return quotas.For(tenant).limits.log_bytes;
  });
  if (handoff_ != nullptr) handoff_->OnRejoined([this] { ClaimAgain(); });
  fork_helpers_ = std::make_unique<ForkHelpers>(
      ForkHelpersOptions{.ahead_of_need = pool_options_.max_per_kind > 0,
                         .memory_budget_bytes = pool_options_.memory_budget_bytes},
      [this](const ForkHelperKind& kind, bool ahead) -> absl::StatusOr<ForkHelper> {
        LaunchOptions options;
        options.memory_mib = static_cast<uint32_t>(kind.memory_bytes >> 20);
        options.vcpus = kind.vcpus;
        options.hostname = "fork-helper";
        options.host_cgroup = "fork-helper-" + RandomHex(4);
        options.background = ahead;  // sessions that run come first
        return StartForkHelper(hosts_->local(), paths_, kind.image, kind.memory_bytes,
                               kind.disk_bytes, options);
      });
}

bool SessionManager::SecretAvailable(const std::string& id, const std::string& name) const {
  return secrets_->Available(id, name);
}

SessionManager::~SessionManager() {
  if (handoff_ != nullptr) handoff_->OnRejoined(nullptr);  // waits for a ClaimAgain running
  pool_.reset();  // its VMs are nobody's: they go with airlockd
  fork_helpers_.reset();
  {
    absl::MutexLock lock(&watch_mu_);
    stopping_ = true;
  }
  watch_cv_.SignalAll();
  apart_cv_.SignalAll();
  if (watcher_.joinable()) watcher_.join();
  if (apart_thread_.joinable()) apart_thread_.join();
  if (index_thread_.joinable()) index_thread_.join();
  if (fleet_watch_thread_.joinable()) fleet_watch_thread_.join();
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
  l.pause_at_ttl = r.pause_at_ttl;
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

std::shared_ptr<absl::Mutex> SessionManager::SessionLock(const std::string& id) {
  absl::MutexLock lock(&mu_);
  std::weak_ptr<absl::Mutex>& slot = session_locks_[id];
  std::shared_ptr<absl::Mutex> m = slot.lock();
  if (!m) {
    m = std::make_shared<absl::Mutex>();
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
  absl::MutexLock lock(&mu_);
  return session_locks_.size();
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
  absl::MutexLock lock(&mu_);
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
  if (tpl.ok() && pool_ && options.workspace_path.empty() && options.volumes.empty() &&
      *driver == &hosts_->local()) {
    // A VM of the warm pool (one with a workspace or volumes to attach is restored instead).
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

absl::StatusOr<std::shared_ptr<LiveSession>> SessionManager::MakeLive(const SessionRecord& record,
                                                                      LaunchedVm vm,
                                                                      const ImageInfo& image) {
  auto live = std::make_shared<LiveSession>();
  live->record = record;
  live->vm = std::move(vm.vm);
  live->disk = std::move(vm.disk);
  live->run = image.run;
  live->last_used_ms = NowMs();
  live->ingress_to_guest = std::make_unique<ByteRate>(record.limits.net_bytes_per_second);
  live->ingress_from_guest = std::make_unique<ByteRate>(record.limits.net_bytes_per_second);
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
    LogIfFailed(store_->net_events().Append(owner, events),
                absl::StrCat("session ", owner.id, ": egress events not stored"));
    std::vector<LogRecord> logs;
    for (const net::NetEvent& e : events) {
      // A secret sent is audited (the daemon acted on the session's behalf): which, and where.
      if (e.kind == "secret" && e.allowed) {
        absl::Status audited = store_->audit().Audit(
            kDaemonPrincipal, owner.tenant, "secret.use", owner.id,
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
    LogIfFailed(store_->commands().AppendOutput(owner, logs),
                absl::StrCat("session ", owner.id, ": egress events not logged"));
  };
  absl::StatusOr<std::shared_ptr<net::EgressPath>> egress = network_->Attach(
      live->vm->channel().shared_from_this(), PolicyFor(record), std::move(options));
  if (!egress.ok()) return egress.status();
  live->egress = *std::move(egress);
  live->egress_expires_ms = EarliestExpiry(record.egress);
  if (activity_record_) {
    live->activity =
        std::make_unique<ActivityCollector>(store_, record, live->vm->channel().shared_from_this());
  }
  return live;
}

absl::StatusOr<SessionRecord> SessionManager::ChangeSecrets(
    const Principal& who, const std::string& id,
    const std::function<absl::StatusOr<std::vector<SecretGrant>>(const SessionRecord&)>& change,
    const std::string& action, const std::string& outcome) {
  // A paused session is resumed: its guest may need the CA installed, its proxy the values.
  absl::StatusOr<std::shared_ptr<LiveSession>> live = Live(who, id);
  if (!live.ok()) return live.status();
  std::shared_ptr<absl::Mutex> session_lock = SessionLock(id);
  absl::MutexLock guard(session_lock.get());
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(who.Tenant(), id);
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
  if (absl::Status s =
          store_->sessions().SetSecrets(who, record->tenant, id, *grants, action, outcome);
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

absl::StatusOr<SessionRecord> SessionManager::Create(const Principal& who, const std::string& image,
                                                     const SessionLimits& requested,
                                                     const std::vector<EgressGrant>& egress,
                                                     const std::vector<SecretRequest>& secrets,
                                                     PendingWorkspace* workspace, bool one_shot,
                                                     const std::vector<VolumeRequest>& volumes) {
  if (draining()) return DrainingRefusal("take new sessions");
  absl::StatusOr<SessionLimits> limits = ResolveLimits(requested);
  if (!limits.ok()) return limits.status();
  absl::StatusOr<std::vector<VolumeAttachment>> attached = volumes_.Resolve(who, volumes);
  if (!attached.ok()) return attached.status();
  // Held until the session's record shows it (as creating, which counts as running).
  absl::StatusOr<QuotaReservations::Hold> admitted =
      quotas_.Admit(who, who.Tenant(), NewSession(*limits), "session.create");
  if (!admitted.ok()) return admitted.status();
  std::string name = image.empty() ? kDefaultImage : image;
  // An image not in the store yet is pulled from its registry on first use (and audited: what
  // the daemon fetched, for whom, from where); the caller's pulls tag images for its tenant alone.
  absl::StatusOr<ImageInfo> info =
      images_.Pull(who, name, {.if_missing = true, .audit = name != kDefaultImage});
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
  s.volumes = *std::move(attached);
  if (absl::Status st = admitted->SettleWith(NewSession(*limits),
                                             [&] { return store_->sessions().Create(who, s); });
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
    LogIfFailed(
        store_->sessions().SetState(who, s.tenant, s.id, SessionState::kFailed,
                                    std::string(live.status().message()), 0, "session.boot"),
        absl::StrCat("session ", s.id, ": its failure not recorded"));
    return live.status();
  }
  // Running and live at once for whoever takes the session's lock (the fleet's index claims a
  // session that runs here when it sees it running).
  std::shared_ptr<absl::Mutex> session_lock = SessionLock(s.id);
  absl::MutexLock guard(session_lock.get());
  if (absl::Status st = store_->sessions().SetState(who, s.tenant, s.id, SessionState::kRunning, "",
                                                    s.pid, "session.boot");
      !st.ok()) {
    return st;  // the VM is destroyed with `live`
  }
  absl::MutexLock lock(&mu_);
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
  if (absl::Status s = store_->sessions().SetWorkspace(who, record.tenant, record.id, base,
                                                       "workspace.sync", outcome);
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  if (auto it = live_.find(record.id); it != live_.end()) it->second->record.workspace = base;
  return absl::OkStatus();
}

std::pair<Quota, QuotaAmounts> SessionManager::QuotaOf(const Principal& who) {
  std::string tenant = who.Tenant();
  return {quotas_.For(tenant), quotas_.UsageOf(tenant)};
}

std::shared_ptr<LiveSession> SessionManager::FindLive(const std::string& tenant,
                                                      const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(id);
  if (it != live_.end() && it->second->record.tenant == tenant) return it->second;
  return nullptr;
}

std::shared_ptr<LiveSession> SessionManager::Use(const std::shared_ptr<LiveSession>& live,
                                                 std::function<void()> cut) {
  live->users++;
  live->last_used_ms = NowMs();
  std::optional<uint64_t> yielder;
  if (cut) {
    absl::MutexLock lock(&live->yield_mu);
    yielder = live->next_yielder++;
    live->yielders[*yielder] = std::move(cut);
  }
  // The handle shares ownership of the session and ends the use when released.
  return std::shared_ptr<LiveSession>(live.get(),
                                      [owner = live, clock = clock_, yielder](LiveSession* s) {
                                        if (yielder.has_value()) {
                                          absl::MutexLock lock(&s->yield_mu);
                                          s->yielders.erase(*yielder);
                                        }
                                        s->last_used_ms = clock->NowUnixMs();
                                        s->users--;
                                      });
}

absl::Status SessionManager::GiveWay(LiveSession& live, const std::string& wait_to,
                                     absl::Duration just_ended) {
  // A use that has just ended may not be released yet: a command's last message reaches its
  // client before the call lets go of the session, so a client that pauses or forks right
  // after gets here first. Such a one is waited for, briefly.
  for (absl::Time until = absl::Now() + just_ended; absl::Now() < until;) {
    {
      absl::MutexLock lock(&live.yield_mu);
      if (live.users <= static_cast<int>(live.yielders.size())) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<std::function<void()>> cuts;
  {
    absl::MutexLock lock(&live.yield_mu);
    if (live.users > static_cast<int>(live.yielders.size())) {
      return absl::FailedPreconditionError(
          absl::StrCat("session ", live.record.id,
                       " is in use (a command or stream is open); wait for it to end, or stop "
                       "it, and ",
                       wait_to, " again"));
    }
    for (auto& [id, cut] : live.yielders) cuts.push_back(cut);
  }
  if (cuts.empty()) return absl::OkStatus();
  for (const std::function<void()>& cut : cuts) cut();
  // Their relays end as soon as the channel's side has been reset: a moment.
  for (int i = 0; i < 500 && live.users > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (live.users > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", live.record.id, " is in use: its HTTP connections did not end; ",
                     wait_to, " again"));
  }
  return absl::OkStatus();
}

absl::Status SessionManager::TakeConnection(const std::string& tenant) {
  return egress_.connections->Take(tenant, quotas_.For(tenant).limits.connections);
}

void SessionManager::GiveConnection(const std::string& tenant) {
  egress_.connections->Give(tenant);
}

absl::StatusOr<std::shared_ptr<LiveSession>> SessionManager::Live(const Principal& who,
                                                                  const std::string& id,
                                                                  std::function<void()> cut) {
  // Under the session's lock, so that a use never starts while the session is being paused.
  std::shared_ptr<absl::Mutex> session_lock = SessionLock(id);
  absl::MutexLock guard(session_lock.get());
  if (std::shared_ptr<LiveSession> live = FindLive(who.Tenant(), id)) {
    return Use(live, std::move(cut));
  }
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(who.Tenant(), id);
  if (handoff_ != nullptr) record = TakeOver(who, id, std::move(record));
  if (!record.ok()) return record.status();
  if (record->state == SessionState::kPaused) {
    absl::StatusOr<std::shared_ptr<LiveSession>> live = ResumeLocked(who, *record);
    if (!live.ok()) return live.status();
    return Use(*live, std::move(cut));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("session ", id, " is ", SessionStateName(record->state),
                   record->reason.empty() ? "" : " (" + record->reason + ")",
                   "; create a new one with `airlock session create`"));
}

absl::StatusOr<SessionRecord> SessionManager::EndIn(const Principal& who, const std::string& id,
                                                    uint64_t seconds,
                                                    std::optional<bool> pause_at_end) {
  std::shared_ptr<absl::Mutex> session_lock = SessionLock(id);
  absl::MutexLock guard(session_lock.get());
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(who.Tenant(), id);
  if (!record.ok()) return record.status();
  if (record->state != SessionState::kRunning && record->state != SessionState::kPaused) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session ", id, " is ", SessionStateName(record->state), "; it has no time left to set"));
  }
  uint64_t ttl = 0;
  if (seconds > 0) {
    int64_t lived_ms = std::max<int64_t>(0, NowMs() - record->created_ms);
    ttl = static_cast<uint64_t>(lived_ms / 1000) + seconds;
  }
  if (absl::Status s = store_->sessions().SetTimeToLive(who, record->tenant, id, ttl, pause_at_end);
      !s.ok()) {
    return s;
  }
  record->limits.ttl_seconds = ttl;
  record->limits.pause_at_ttl = pause_at_end.value_or(record->limits.pause_at_ttl);
  absl::MutexLock lock(&mu_);
  if (auto it = live_.find(id); it != live_.end()) it->second->record.limits = record->limits;
  return *record;
}

std::vector<std::shared_ptr<LiveSession>> SessionManager::LiveSessions(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
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
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(tenant, id);
  if (!record.ok()) return record.status();
  return absl::FailedPreconditionError(
      absl::StrCat("session ", id, " is ", SessionStateName(record->state), ", not running"));
}

absl::Status SessionManager::Remove(const Principal& who, const std::string& id,
                                    const std::string& reason) {
  std::shared_ptr<absl::Mutex> session_lock = SessionLock(id);
  absl::MutexLock guard(session_lock.get());
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(who.Tenant(), id);
  if (!record.ok()) return record.status();
  // With a fleet, only while no other host runs it.
  if (handoff_ != nullptr && record->state != SessionState::kStopped &&
      record->state != SessionState::kFailed) {
    if (absl::Status st = handoff_->Claim(id); !st.ok()) return st;
    // Held here: its entry goes, whichever host wrote it last.
    LogIfFailed(handoff_->Unindex(record->tenant, id, /*whoever_wrote_it=*/true),
                absl::StrCat("fleet index: session ", id, " not removed"));
  }
  std::shared_ptr<LiveSession> live;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    if (it != live_.end()) {
      live = std::move(it->second);
      live_.erase(it);
    }
  }
  if (live) {
    FreezeVolumes(*live);
    live->vm->Kill(absl::CancelledError(absl::StrCat("session ", reason)));
  }
  ForgetEverywhere(id);
  LogIfFailed(RemoveTree(layout_.Dir(id)), absl::StrCat("session ", id, ": files not removed"));
  secrets_->Forget(id);
  SessionState end =
      record->state == SessionState::kFailed ? SessionState::kFailed : SessionState::kStopped;
  std::string why = end == SessionState::kFailed ? record->reason : reason;
  absl::Status status =
      store_->sessions().SetState(who, record->tenant, id, end, why, 0, "session.remove");
  absl::MutexLock lock(&mu_);
  session_locks_.erase(id);  // holders keep theirs alive; the session is gone for new ones
  return status;
}

void SessionManager::FreezeVolumes(LiveSession& live) {
  std::vector<std::string> argv = {"/proc/1/exe", kVolumeFreezeCommand};
  for (const VolumeAttachment& v : live.record.volumes) {
    if (!v.read_only) argv.push_back(v.path);
  }
  if (argv.size() == 2) return;
  absl::StatusOr<GuestRun> frozen =
      RunInGuest(live.vm->channel(), argv, {}, 4096, absl::Seconds(5));
  if (!frozen.ok() || frozen->exit_code != 0) {
    LogWarning(absl::StrCat(
        "session ", live.record.id, ": its volumes were not frozen before its VM ended (",
        frozen.ok() ? frozen->errors + frozen->message : std::string(frozen.status().message()),
        "); the next read-write use replays their journals"));
  }
}

}  // namespace airlock
