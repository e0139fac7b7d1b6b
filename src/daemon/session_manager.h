// Owns the sessions of airlockd: starts their VMs (restoring the image's template), pauses them to
// snapshots and resumes them, forks them, and keeps the state store in step with what really
// happens (a VM that dies marks its session failed with the reason, a TTL that passes destroys
// it, an idle session pauses itself).
//
// Its files under $AIRLOCK_HOME are where SessionLayout (session_layout.h) says. Its methods are
// implemented one file per job: session_manager.cc (create, live sessions, removal),
// session_recovery.cc, session_snapshots.cc (pause, resume, fork), session_egress.cc,
// session_fleet.cc and session_watcher.cc; quotas are QuotaAdmission's (quota_admission.h).
//
// Every entry point takes the caller's Principal and only ever touches sessions of that
// principal's tenant (others are NOT_FOUND). Pause, resume, fork and removal of one session are
// serialized. Thread-safe.
#ifndef AIRLOCK_DAEMON_SESSION_MANAGER_H_
#define AIRLOCK_DAEMON_SESSION_MANAGER_H_

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/common/byte_rate.h"
#include "src/common/clock.h"
#include "src/common/host_paths.h"
#include "src/common/sha256.h"
#include "src/common/unique_fd.h"
#include "src/daemon/activity_collector.h"
#include "src/daemon/agent_transcripts.h"
#include "src/daemon/fork_helpers.h"
#include "src/daemon/image_service.h"
#include "src/daemon/quota_admission.h"
#include "src/daemon/quotas.h"
#include "src/daemon/session_events.h"
#include "src/daemon/session_handoff.h"
#include "src/daemon/session_layout.h"
#include "src/daemon/session_secrets.h"
#include "src/daemon/state_store.h"
#include "src/daemon/templates.h"
#include "src/daemon/vm_pool.h"
#include "src/daemon/volumes.h"
#include "src/daemon/workspace_uploads.h"
#include "src/image/image_store.h"
#include "src/image/oci.h"
#include "src/net/egress_policy.h"
#include "src/net/egress_proxy.h"
#include "src/providers/host_provider.h"
#include "src/providers/network_provider.h"
#include "src/vm/vm_driver.h"
#include "src/vm/vm_launcher.h"

namespace airlock {

// A session whose VM runs. Callers of Live() hold a shared_ptr for one operation: while any is
// held the session counts as in use (it will not pause for idleness), and removal never frees a
// VM in use.
struct LiveSession {
  ~LiveSession() {
    if (egress != nullptr) egress->Stop();  // before the VM and its channel go
  }
  SessionRecord record;
  std::unique_ptr<Vm> vm;
  std::shared_ptr<net::EgressPath> egress;  // its DNS and connections (NetworkProvider)
  std::shared_ptr<net::SessionCa> ca;       // set once the session has secrets
  UniqueFd disk;                            // the VM's writable disk (unnamed)
  OciRunConfig run;                // the image's Env, WorkingDir and Entrypoint/Cmd (OCI images)
  AgentPositions agent_positions;  // where its agents' records were read up to
  std::atomic<int> users{0};
  // Uses that give way to a pause or fork (the HTTP gateway's connections), counted in `users`
  // too: each is cut and the pause goes on once they ended (SessionManager::GiveWay).
  absl::Mutex yield_mu;
  std::map<uint64_t, std::function<void()>> yielders ABSL_GUARDED_BY(yield_mu);
  uint64_t next_yielder ABSL_GUARDED_BY(yield_mu) = 0;
  std::atomic<int64_t> egress_expires_ms{0};  // the earliest expiry of its grants; 0: none
  std::atomic<int64_t> last_used_ms{0};
  std::atomic<int64_t> last_drain_try_ms{0};  // when a drain last failed to pause it
  // Its --net-rate over connections into the guest (port-forward, the HTTP gateway), each way.
  std::unique_ptr<ByteRate> ingress_to_guest, ingress_from_guest;
  std::atomic<bool> waiting_for_disk{false};  // its VM is stopped for disk space, and it was said
  std::atomic<bool> ttl_pause_said{false};    // its pause at its TTL was refused, and it was said
  std::atomic<int64_t> ttl_pause_next_ms{0};  // when that pause is tried again
  // Reads the guest's activity record while the VM runs; declared last, so it stops first.
  std::unique_ptr<ActivityCollector> activity;
};

// What airlockd's operator decided about egress for every session.
struct EgressSettings {
  std::shared_ptr<const net::EgressCeiling> ceiling;  // nullptr: the default ceiling
  // An egress connection that carries no byte either way for this long is ended; 0: never.
  int idle_timeout_ms = 10 * 60 * 1000;
  // Every session's egress connections, counted per tenant (the `connections` quota) and in
  // all (what airlockd's open-file limit leaves after a reserve); nullptr: made from that limit.
  std::shared_ptr<net::ConnectionLedger> connections;
};

// What a SessionManager is made with: everything it uses, settled before it starts. Pointers
// are not owned and must outlive it.
struct SessionManagerOptions {
  StateStore* store = nullptr;  // required
  HostPaths paths;
  // Where VMs run (src/providers/host_provider.h); required.
  providers::HostProvider* hosts = nullptr;
  // How sessions' egress leaves; nullptr: LocalNetwork with the host's resolver.
  providers::NetworkProvider* network = nullptr;
  // Hosts of a fleet hand paused sessions to each other (session_handoff.h): a pause publishes
  // the snapshot, a resume claims the session and fetches its snapshot when it was taken
  // elsewhere. nullptr: one host, nothing shared.
  SessionHandoff* handoff = nullptr;
  // What time to live, idle timeouts and egress grants are measured by (tests move a FakeClock).
  Clock* clock = &SystemClock();
  // Off: every new session boots (no template, and so no warm pool).
  bool use_templates = true;
  // Off: no session's guest is asked for its activity record.
  bool activity_record = true;
  VmPoolOptions pool;
  EgressSettings egress;
  // The tenants' quotas (quotas.h): checked before a create, resume or fork, and the pull and
  // log caps.
  Quotas quotas;
  // How secrets are resolved and servers verified; nullptr: no operator CA, nothing shared.
  std::unique_ptr<SessionSecrets> secrets;
  // Whether pulls for other users may reach registries on internal addresses (they never use
  // the host's registry logins).
  bool registry_internal = false;
};

class SessionManager {
 public:
  explicit SessionManager(SessionManagerOptions options);
  ~SessionManager();

  // Loads the host key, settles sessions the last daemon left behind (a running session whose
  // VM still runs carries on, one with a whole snapshot is paused, one whose VM is gone failed),
  // ends VMs nobody will use, and starts the watcher.
  [[nodiscard]] absl::Status Recover();

  // With a workspace (an upload taken from WorkspaceUploads), the session sees it at /workspace;
  // its image and manifest go into the session's directory. one_shot: the session lives as
  // long as one call of its caller (`airlock run`), who removes it; if airlockd stops first,
  // the next one removes it (the caller is gone). volumes: the tenant's volumes it attaches
  // (volumes.h), refused if another session holds one in a way that conflicts.
  [[nodiscard]] absl::StatusOr<SessionRecord> Create(
      const Principal& who, const std::string& image, const SessionLimits& limits,
      const std::vector<EgressGrant>& egress = {}, const std::vector<SecretRequest>& secrets = {},
      PendingWorkspace* workspace = nullptr, bool one_shot = false,
      const std::vector<VolumeRequest>& volumes = {});
  // The running session, resumed first if it was paused; FAILED_PRECONDITION naming its state
  // if it is stopped or failed (NOT_FOUND if not the caller's). The session is in use until the
  // returned pointer is released.
  // With `cut`, the use gives way to a pause or fork instead of refusing it: `cut` is called
  // (on the pausing thread) to end it, and the pause waits until the handle is released.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<LiveSession>> Live(
      const Principal& who, const std::string& id, std::function<void()> cut = nullptr);
  // Traffic of a use: the session is not idle.
  void Touch(LiveSession& live) { live.last_used_ms = NowMs(); }
  // A place for one more connection of the tenant's through airlockd (egress, the HTTP
  // gateway), within its `connections` quota and airlockd's descriptors; RESOURCE_EXHAUSTED
  // naming the limit. Give it back with GiveConnection.
  [[nodiscard]] absl::Status TakeConnection(const std::string& tenant);
  void GiveConnection(const std::string& tenant);
  // Snapshots the session to disk and ends its VM. Paused already: no-op.
  [[nodiscard]] absl::StatusOr<SessionRecord> Pause(const Principal& who, const std::string& id);
  [[nodiscard]] absl::StatusOr<SessionRecord> Resume(const Principal& who, const std::string& id);
  // count new sessions from one snapshot of a running or paused session.
  [[nodiscard]] absl::StatusOr<std::vector<SessionRecord>> Fork(const Principal& who,
                                                                const std::string& id,
                                                                uint32_t count);
  // Ends a running or paused session `seconds` from now instead of when its time to live said
  // (0: never), audited; with pause_at_end, whether it is paused rather than stopped then.
  [[nodiscard]] absl::StatusOr<SessionRecord> EndIn(
      const Principal& who, const std::string& id, uint64_t seconds,
      std::optional<bool> pause_at_end = std::nullopt);
  // Destroys the VM and the session's files; the record (and its logs) stay, state stopped.
  [[nodiscard]] absl::Status Remove(const Principal& who, const std::string& id,
                                    const std::string& reason = "removed");
  // At shutdown: pauses every running session that is not in use, so that it survives the
  // daemon and a reboot of the host. Returns how many were paused and how many could not be.
  std::pair<int, int> PauseAll();
  // At shutdown, after PauseAll: the VMs still running run on without airlockd (the next one
  // finds them again; see Recover).
  void DetachAll();
  // The images: the store as each caller sees it, pulls, what sessions use.
  ImageService& images() { return images_; }
  // The tenants' volumes.
  Volumes& volumes() { return volumes_; }
  // A key of its own for `purpose`, derived from the host key (after Recover; the hosts of a
  // fleet share it): what airlockd signs the tokens it hands out with.
  std::string DerivedKey(absl::string_view purpose) const { return HmacSha256(key_, purpose); }
  // Running sessions of the caller's tenant.
  // The tenant's running sessions (SessionEventHub::kEveryTenant: every tenant's).
  std::vector<std::shared_ptr<LiveSession>> LiveSessions(const std::string& tenant);
  // The session if it runs now; never resumes it, and does not count as a use (for root and
  // operators looking at another tenant's session).
  [[nodiscard]] absl::StatusOr<std::shared_ptr<LiveSession>> Running(const std::string& tenant,
                                                                     const std::string& id);
  // What a running session's guest says of its use now, asked under the session's lock so
  // that it never races a pause or a fork of it; nullopt when the session does not run, is
  // being changed (its lock is held), or the guest did not answer within timeout.
  std::optional<GuestMetrics> SampleMetrics(const std::string& tenant, const std::string& id,
                                            absl::Duration timeout);

  VmCounters& counters() { return counters_; }
  // The VMs the warm pool holds now (none without a pool).
  std::vector<PooledVmInfo> PooledVms() const;

  // Applies limits from a request: zero fields take defaults; out-of-range values are errors.
  [[nodiscard]] static absl::StatusOr<SessionLimits> ResolveLimits(const SessionLimits& requested);
  // Egress rules and presets from a request, checked against the ceiling: INVALID_ARGUMENT
  // saying what to write instead, PERMISSION_DENIED for what the ceiling never allows.
  [[nodiscard]] absl::StatusOr<std::vector<EgressGrant>> ResolveEgress(
      const std::vector<std::string>& rules, const std::vector<std::string>& presets,
      const std::string& source) const;
  SessionHandoff* handoff() const { return handoff_; }
  // Whether this host has a VM for the session now (any tenant's; no use counted).
  bool RunsHere(const std::string& id);
  // Whether this host is being drained (airlock hosts drain): it takes no new session, resume or
  // fork, and pauses each running session once no command runs in it. Read from the fleet's
  // etcd every two seconds and by RefreshDraining.
  bool draining() const { return draining_.load(); }
  // Draining, and pausing its sessions for it (`airlock hosts drain`; not the host pool's
  // mark while it looks whether the host is idle).
  bool drain_pauses() const { return drain_pauses_.load(); }
  void RefreshDraining();
  // A session as `ls` shows it: with the host that has it ("" outside a fleet).
  struct ListedSession {
    SessionRecord record;
    std::string host;
  };
  // The tenant's sessions (every tenant's for SessionEventHub::kEveryTenant). In a fleet, every
  // host's, from the fleet's index: a session another host took over is shown as that host
  // wrote it; this host's own records fill in what the index lacks (etcd unreachable: this
  // host's alone, each with the reason).
  [[nodiscard]] absl::StatusOr<std::vector<ListedSession>> List(const std::string& tenant);
  // One of them, by id, the same way.
  [[nodiscard]] absl::StatusOr<ListedSession> Find(const std::string& tenant,
                                                   const std::string& id);
  // With a fleet: while the returned token lives, what happens to the sessions the fleet's
  // other hosts have (their state as the fleet's index says, read every second, and their
  // leaving it) is published to the state store's event hub, each event with its host.
  // nullptr without a fleet.
  [[nodiscard]] std::shared_ptr<void> WatchFleet();
  // The hosts VMs run on, each with the sessions it runs (this host's from what runs here).
  [[nodiscard]] absl::StatusOr<std::vector<providers::HostInfo>> Hosts();
  std::string host_id() const { return hosts_->host_id(); }
  // A new operator ceiling (airlockd's SIGHUP): running sessions' proxies apply it at once.
  void set_ceiling(std::shared_ptr<const net::EgressCeiling> ceiling);
  std::shared_ptr<const net::EgressCeiling> ceiling() const;

  // Adds grants (replacing a grant of the same rule and effect) and removes rules (as their
  // canonical text, allow or deny) of a running or paused session in one new version of its
  // policy, audited as `action`; a running session's proxy applies it at once. NOT_FOUND for
  // a rule to remove that the session does not hold.
  [[nodiscard]] absl::StatusOr<SessionRecord> ChangeEgress(const Principal& who,
                                                           const std::string& id,
                                                           const std::vector<EgressGrant>& add,
                                                           const std::vector<std::string>& remove,
                                                           const std::string& action);
  // Counters of a running session's egress proxy (zero when it is not running).
  net::EgressPath::Counters EgressCounters(const std::string& tenant, const std::string& id);
  // Stores the egress decisions a running session's proxy has made so far (nothing if not running).
  void FlushEgressEvents(const Principal& who, const std::string& id);

  // Binds secrets to a running or paused session (replacing those of the same names, whose
  // placeholders stay), or unbinds them; a running session's proxy applies it at once, and
  // the guest trusts the session's CA from the first secret on. Audited; never a value.
  [[nodiscard]] absl::StatusOr<SessionRecord> SetSecrets(const Principal& who,
                                                         const std::string& id,
                                                         const std::vector<SecretRequest>& add);
  [[nodiscard]] absl::StatusOr<SessionRecord> RemoveSecrets(const Principal& who,
                                                            const std::string& id,
                                                            const std::vector<std::string>& names);
  // Whether airlockd holds the value of a session's secret.
  bool SecretAvailable(const std::string& id, const std::string& name) const;
  // Where its sessions' files are.
  const SessionLayout& layout() const { return layout_; }
  // The session's base advanced (a sync): the new manifest replaces the old, and the record
  // changes with its audit entry in one transaction.
  [[nodiscard]] absl::Status AdvanceWorkspace(const Principal& who, const SessionRecord& record,
                                              const WorkspaceRecord& base,
                                              const std::string& manifest,
                                              const std::string& outcome);
  // The caller's tenant's quotas and what it uses now (`airlock quota`).
  std::pair<Quota, QuotaAmounts> QuotaOf(const Principal& who);
  // Per-session locks kept right now (they go when nobody holds them).
  size_t session_lock_count();
  const SessionSecrets& secrets() const { return *secrets_; }
  // " (the disk of HOME has N free: ...)" when it has less than kDiskSpaceToGoOn; else "": what
  // to add to a failure that may have been the host's disk running full.
  std::string DiskSpaceHint() const;
  // s, and if it is a write that found the host's disk full while it is short, DiskSpaceHint.
  absl::Status SayDiskSpace(const absl::Status& s) const;

 private:
  std::shared_ptr<absl::Mutex> SessionLock(const std::string& id) ABSL_LOCKS_EXCLUDED(mu_);
  // A VM stopped for lack of disk space on the host goes on once this much is free.
  static constexpr uint64_t kDiskSpaceToGoOn = 64ull << 20;
  int disk_short_rounds_ = 0;  // the watcher's: rounds left to ask VMs about disk space
  uint64_t FreeDiskBytes() const;
  // Why an operation on the session's VM failed: how its process ended, if it did, else `status`.
  std::string WhyVmFailed(LiveSession& live, const absl::Status& status);
  // Whether the session's VM is stopped, whole, until the host's disk has space.
  bool WaitsForDiskSpace(LiveSession& live);
  // The watcher's: says once that the VM waits for disk space, and lets it go on when there is.
  void GoOnWhenDiskHasSpace(LiveSession& live);
  // Makes a session live again with the VM found after a restart of airlockd (Recover).
  absl::Status Reattach(const SessionRecord& s, LaunchedVm vm);
  // Puts an uploaded workspace into a new session's directory.
  absl::Status InstallWorkspace(const std::string& id, PendingWorkspace& workspace);
  // Starts a VM for a new session record: restored from the image's template, booted if that
  // fails. Fills in the record's pid.
  absl::StatusOr<std::shared_ptr<LiveSession>> StartVm(SessionRecord& record,
                                                       const ImageInfo& image);
  // at_ttl: it is paused because its time to live ran out (pause_at_ttl): its TTL is cleared
  // once it is paused, before it is published (whoever resumes it, anywhere, gives it a new one).
  // just_ended: how long to wait for a use that has just ended (GiveWay): a client's pause.
  absl::StatusOr<SessionRecord> PauseLocked(const Principal& who, const SessionRecord& record,
                                            const std::string& reason, bool at_ttl = false,
                                            absl::Duration just_ended = absl::ZeroDuration());
  // Writes beside the session's snapshot in dir one that keeps the RAM apart
  // (PrepareSnapshotMemoryApart), whose restores map the memory.
  absl::StatusOr<SnapshotMemoryApart> PrepareMemoryApart(const SessionRecord& record,
                                                         const std::string& dir,
                                                         const std::string& work_dir);
  // A snapshot that could not be set apart stays as it was (its restores copy the RAM): the
  // session's log says why.
  void LogMemoryApart(const SessionRecord& record, const absl::Status& status);
  // Sets the RAM of paused sessions' snapshots apart one at a time, off the pause's path and a
  // few seconds after it (kApartDelay), at the lowest CPU weight: a resume that comes first uses
  // the snapshot as it is.
  void ApartLoop();
  // With a fleet: the session's record to resume, made this host's (claimed, and its snapshot
  // fetched if it was taken elsewhere); `local` is this host's record as the store gave it.
  absl::StatusOr<SessionRecord> TakeOver(const Principal& who, const std::string& id,
                                         absl::StatusOr<SessionRecord> local);
  // With a fleet: publishes the snapshot of a session just paused, then lets other hosts have it.
  absl::Status Publish(const SessionRecord& record);
  // With a fleet: the session ended here for good; no host resumes it.
  void ForgetEverywhere(const std::string& id);
  // After this host rejoined its fleet with a new lease: claims each session it runs again, and
  // ends the VM of one another host took over meanwhile (it runs there now).
  void ClaimAgain();
  // With a fleet: keeps the fleet's index of sessions up to date with this host's, from the
  // state store's events (IndexHeld first, and again after events were lost).
  void IndexLoop();
  // With a fleet: while WatchFleet has watchers, reads the fleet's index every second and
  // publishes what changed on other hosts.
  void FleetWatchLoop();
  // Pauses a running session whose time to live ran out and that asked to be paused then (tried
  // again each round while it is in use).
  void PauseAtTimeToLive(LiveSession& live, const std::string& why);
  // Writes the index entry of every session this host holds.
  void IndexHeld();
  // Writes the session's index entry as its record is now (claiming it first if it runs here),
  // or removes it once the session ended.
  void IndexOne(const std::string& tenant, const std::string& id);
  absl::StatusOr<std::shared_ptr<LiveSession>> ResumeLocked(const Principal& who,
                                                            const SessionRecord& record);
  absl::StatusOr<std::shared_ptr<LiveSession>> ResumeHere(const Principal& who,
                                                          const SessionRecord& record);
  // volume_disks: the source's read-write volumes as they were when the snapshot was taken,
  // by slot (-1 for read-only ones), which each fork gets a copy of.
  absl::StatusOr<std::vector<SessionRecord>> ForkFrom(const Principal& who,
                                                      const SessionRecord& source,
                                                      const std::string& snapshot_dir,
                                                      uint32_t count,
                                                      const std::vector<int>& volume_disks);
  // The same from a snapshot's files as OpenSnapshot or TakeForkSnapshot gave them.
  absl::StatusOr<std::vector<SessionRecord>> ForkFromFiles(
      const Principal& who, const SessionRecord& source, const ImageInfo& image,
      const SnapshotFiles& files, const SnapshotManifest& manifest, uint32_t count,
      const std::vector<int>& volume_disks);
  std::shared_ptr<LiveSession> FindLive(const std::string& tenant, const std::string& id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A live session for a VM that is ready: its egress proxy serves the guest from now on.
  absl::StatusOr<std::shared_ptr<LiveSession>> MakeLive(const SessionRecord& record, LaunchedVm vm,
                                                        const ImageInfo& image);
  std::shared_ptr<const net::EgressPolicy> PolicyFor(const SessionRecord& record) const;
  // A handle that marks the session in use while it is held.
  std::shared_ptr<LiveSession> Use(const std::shared_ptr<LiveSession>& live,
                                   std::function<void()> cut = nullptr);
  // Under the session's lock, before a snapshot of it: cuts the uses that give way (Live's
  // `cut`) and waits for them to end; FAILED_PRECONDITION if another use still holds the
  // session after `just_ended` (a client's pause or fork waits so for a command whose last
  // message it has just read, still letting go), saying to `wait_to` once it ended.
  absl::Status GiveWay(LiveSession& live, const std::string& wait_to, absl::Duration just_ended);
  void WatchLoop();
  // Ends a live session that died or expired: state, reason, files.
  void Retire(const std::string& id, SessionState state, const std::string& reason);
  // Ends paused sessions whose time to live ran out.
  void ExpirePaused();

  int64_t NowMs() const { return clock_->NowUnixMs(); }

  StateStore* store_;
  HostPaths paths_;
  SessionLayout layout_;
  Clock* clock_;
  providers::HostProvider* hosts_;
  std::unique_ptr<providers::NetworkProvider> own_network_;
  providers::NetworkProvider* network_;
  std::string key_;  // the host key that signs snapshots
  VmCounters counters_;
  std::unique_ptr<Templates> templates_;
  SessionHandoff* handoff_;
  bool use_templates_;
  bool activity_record_;
  // Restores a VM from a template (counted, with a span); `session` names it in the span.
  absl::StatusOr<LaunchedVm> RestoreTemplate(VmDriver& driver, const Templates::Template& tpl,
                                             const ImageInfo& image, const LaunchOptions& options,
                                             const std::string& session);
  VmPoolOptions pool_options_;
  std::unique_ptr<VmPool> pool_;               // after what its maker uses: it goes first
  std::unique_ptr<ForkHelpers> fork_helpers_;  // the same
  absl::StatusOr<SessionRecord> ChangeEgressOf(const Principal& who, const std::string& tenant,
                                               const std::string& id,
                                               const std::vector<EgressGrant>& add,
                                               const std::vector<std::string>& remove,
                                               const std::string& action);
  // Drops grants whose time ran out from running sessions.
  void ExpireEgress(int64_t now);
  mutable absl::Mutex egress_mu_;  // guards egress_.ceiling
  EgressSettings egress_;
  std::vector<net::IpAddress> host_addresses_;
  std::unique_ptr<SessionSecrets> secrets_;
  QuotaAdmission quotas_;  // after egress_: it counts egress_.connections
  ImageService images_;    // after quotas_ and counters_
  Volumes volumes_;        // after quotas_
  // Before a running session's VM ends for good: its read-write volumes are frozen, so that
  // their disks hold clean filesystems (best effort; a VM that does not answer soon is killed
  // anyway, and the next read-write attachment replays the journal).
  void FreezeVolumes(LiveSession& live);
  // Binds or unbinds secrets of one session (SetSecrets, RemoveSecrets).
  absl::StatusOr<SessionRecord> ChangeSecrets(
      const Principal& who, const std::string& id,
      const std::function<absl::StatusOr<std::vector<SecretGrant>>(const SessionRecord&)>& change,
      const std::string& action, const std::string& outcome);
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<LiveSession>> live_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::weak_ptr<absl::Mutex>> session_locks_ ABSL_GUARDED_BY(mu_);
  absl::Mutex watch_mu_;
  absl::CondVar watch_cv_;
  bool stopping_ ABSL_GUARDED_BY(watch_mu_) = false;
  std::thread watcher_;
  struct ApartJob {
    SessionRecord record;
    absl::Time not_before;
  };
  std::deque<ApartJob> apart_queue_ ABSL_GUARDED_BY(watch_mu_);  // by not_before
  absl::CondVar apart_cv_;
  std::thread apart_thread_;
  std::thread index_thread_;
  int fleet_watchers_ ABSL_GUARDED_BY(watch_mu_) = 0;
  bool fleet_watch_wanted_ ABSL_GUARDED_BY(watch_mu_) = false;  // a first watcher came
  std::thread fleet_watch_thread_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> drain_pauses_{false};
  // FAILED_PRECONDITION saying what a draining host does not do (`what`), and where to go.
  absl::Status DrainingRefusal(const std::string& what) const;
};

// The system principal that acts for airlockd itself (TTL expiry, recovery, VM death, idleness).
inline const Principal kDaemonPrincipal{0, 0};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_SESSION_MANAGER_H_
