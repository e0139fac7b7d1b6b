// The life of a session as SessionManager drives it (create, pause, resume, fork, idleness, time
// to live, a VM that dies, airlockd restarting over running VMs), against fake VMs and a fake
// clock: no QEMU, no waiting for timeouts. The same paths run against real VMs in
// tests/snapshot_vm_test.cc and tests/daemon_test.cc; here every branch is cheap to reach.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "src/common/file_util.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/session_manager_testing.h"
#include "src/daemon/session_workspace.h"
#include "src/daemon/state_store.h"
#include "src/testing/fake_clock.h"
#include "src/testing/fake_vm.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

constexpr char kImage[] = "base:1";
const Principal kAlice{1001, 1001};

// A network that records what the daemon asks of it: which egress paths run, with which rules.
class FakeNetwork : public providers::NetworkProvider {
 public:
  class Path : public net::EgressPath {
   public:
    explicit Path(std::shared_ptr<const net::EgressPolicy> policy) : policy_(std::move(policy)) {}
    void Stop() override { stopped_ = true; }
    void SetPolicy(std::shared_ptr<const net::EgressPolicy> policy) override {
      absl::MutexLock lock(&mu_);
      policy_ = std::move(policy);
    }
    void SetSecrets(std::vector<net::ProxySecret>, std::shared_ptr<net::SessionCa>) override {}
    Counters counters() const override { return {.connections = 7}; }
    void Flush() override {}
    bool stopped() const { return stopped_; }
    std::vector<std::string> rules() const {
      absl::MutexLock lock(&mu_);
      std::vector<std::string> out;
      for (const net::EgressRule& r : policy_->session_rules()) out.push_back(r.ToString());
      return out;
    }

   private:
    mutable absl::Mutex mu_;
    std::shared_ptr<const net::EgressPolicy> policy_ ABSL_GUARDED_BY(mu_);
    std::atomic<bool> stopped_{false};
  };

  absl::StatusOr<std::vector<net::IpAddress>> HostAddresses() override {
    return std::vector<net::IpAddress>{};
  }
  absl::StatusOr<std::shared_ptr<net::EgressPath>> Attach(
      std::shared_ptr<GuestChannel>, std::shared_ptr<const net::EgressPolicy> policy,
      net::EgressProxyOptions) override {
    auto path = std::make_shared<Path>(std::move(policy));
    absl::MutexLock lock(&mu_);
    paths_.push_back(path);
    return path;
  }
  std::vector<std::shared_ptr<Path>> paths() {
    absl::MutexLock lock(&mu_);
    return paths_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::shared_ptr<Path>> paths_ ABSL_GUARDED_BY(mu_);
};

class SessionLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tar = dir_.File("rootfs.tar");
    testing::WriteTar(tar, {{.name = "etc/hostname", .data = "base\n"}});
    FakeVmHome home(dir_.path(), kAlice, kImage, tar);
    ASSERT_NE(home.store, nullptr);
    paths_ = home.paths;
    store_ = std::move(home.store);
    StartManager();
  }
  void TearDown() override { sessions_.reset(); }

  // A new SessionManager over the same store, VMs and clock (airlockd starting).
  void StartManager(Quotas quotas = {}) {
    sessions_ =
        std::make_unique<SessionManager>(SessionManagerOptions{.store = store_.get(),
                                                               .paths = paths_,
                                                               .hosts = &host_,
                                                               .network = &network_,
                                                               .clock = &clock_,
                                                               .pool = {.max_per_kind = 0},
                                                               .quotas = std::move(quotas)});
    absl::Status recovered = sessions_->Recover();
    ASSERT_TRUE(recovered.ok()) << recovered;
  }

  SessionRecord Create(SessionLimits limits = {}) {
    absl::StatusOr<SessionLimits> resolved = SessionManager::ResolveLimits(limits);
    EXPECT_TRUE(resolved.ok()) << resolved.status();
    absl::StatusOr<SessionRecord> made = sessions_->Create(kAlice, kImage, *resolved);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *made : SessionRecord{};
  }

  GuestChannel& ChannelOf(const std::string& id) {
    absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Running(kAlice.Tenant(), id);
    EXPECT_TRUE(live.ok()) << live.status();
    return (*live)->vm->channel();
  }

  std::string ReadGuestFile(const std::string& id, const std::string& path) {
    absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(kAlice, id);
    if (!live.ok()) return absl::StrCat("(", live.status().ToString(), ")");
    absl::StatusOr<std::string> content =
        (*live)->vm->channel().ReadFile(path, 1 << 20, absl::Now() + absl::Seconds(10));
    return content.ok() ? *content : absl::StrCat("(", content.status().ToString(), ")");
  }

  void WriteGuestFile(const std::string& id, const std::string& path, const std::string& data) {
    absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(kAlice, id);
    ASSERT_TRUE(live.ok()) << live.status();
    absl::Status written =
        (*live)->vm->channel().WriteFile(path, 0644, data, absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(written.ok()) << written;
  }

  // What a command prints in the session's guest.
  std::string Run(const std::string& id, std::vector<std::string> argv) {
    absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(kAlice, id);
    if (!live.ok()) return absl::StrCat("(", live.status().ToString(), ")");
    absl::StatusOr<GuestRun> run =
        RunInGuest((*live)->vm->channel(), argv, {}, 4096, absl::Seconds(10));
    return run.ok() ? run->output : absl::StrCat("(", run.status().ToString(), ")");
  }

  SessionRecord Get(const std::string& id) {
    absl::StatusOr<SessionRecord> r = store_->sessions().Get(kAlice.Tenant(), id);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : SessionRecord{};
  }

  // The session's record once it is in `state` (the watcher acts every 250 ms, expiry of
  // paused sessions every 5 s); fails the test if that takes more than 30 s.
  SessionRecord AwaitState(const std::string& id, SessionState state) {
    absl::Time deadline = absl::Now() + absl::Seconds(30);
    SessionRecord r;
    do {
      r = Get(id);
      if (r.state == state) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } while (absl::Now() < deadline);
    ADD_FAILURE() << "session " << id << " stayed " << SessionStateName(r.state) << " (" << r.reason
                  << "), not " << SessionStateName(state);
    return r;
  }

  bool Runs(pid_t pid) {
    std::vector<pid_t> pids = driver_.RunningPids();
    return std::find(pids.begin(), pids.end(), pid) != pids.end();
  }

  testing::TempDir dir_;
  HostPaths paths_;
  FakeVmDriver driver_;
  providers::LocalHost host_{&driver_, "test", providers::MachineCapacity()};
  FakeClock clock_;
  FakeNetwork network_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<SessionManager> sessions_;
};

// A pause ends the VM and keeps the guest in a signed snapshot; a resume brings back the same
// guest (its files and memory) in a new VM.
TEST_F(SessionLifecycleTest, PauseEndsTheVmAndResumeBringsBackTheSameGuest) {
  SessionRecord s = Create();
  ASSERT_EQ(s.state, SessionState::kRunning);
  // The first session of an image builds its template (one boot) and restores it.
  EXPECT_EQ(driver_.booted(), 1);
  EXPECT_EQ(Run(s.id, {"boots"}), "booted 1 restored 1\n");
  WriteGuestFile(s.id, "/root/notes.txt", "kept across a pause");

  absl::StatusOr<SessionRecord> paused = sessions_->Pause(kAlice, s.id);
  ASSERT_TRUE(paused.ok()) << paused.status();
  EXPECT_EQ(paused->state, SessionState::kPaused);
  EXPECT_EQ(Get(s.id).state, SessionState::kPaused);
  EXPECT_FALSE(Runs(s.pid)) << "a paused session's VM still runs";
  EXPECT_FALSE(sessions_->Running(kAlice.Tenant(), s.id).ok());
  EXPECT_EQ(access((sessions_->layout().Snapshot(s.id) + "/manifest.json").c_str(), F_OK), 0);
  // Paused already: nothing to do.
  EXPECT_TRUE(sessions_->Pause(kAlice, s.id).ok());

  absl::StatusOr<SessionRecord> resumed = sessions_->Resume(kAlice, s.id);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->state, SessionState::kRunning);
  EXPECT_NE(resumed->pid, s.pid);
  EXPECT_TRUE(Runs(resumed->pid));
  EXPECT_EQ(ReadGuestFile(s.id, "/root/notes.txt"), "kept across a pause");
  EXPECT_EQ(Run(s.id, {"boots"}), "booted 1 restored 2\n");
  EXPECT_EQ(driver_.booted(), 1) << "a resume must restore, never boot";
}

// Using a paused session resumes it (Live), as `airlock exec` on a paused session does.
TEST_F(SessionLifecycleTest, UsingAPausedSessionResumesIt) {
  SessionRecord s = Create();
  WriteGuestFile(s.id, "/tmp/x", "1");
  ASSERT_TRUE(sessions_->Pause(kAlice, s.id).ok());
  EXPECT_EQ(ReadGuestFile(s.id, "/tmp/x"), "1");
  EXPECT_EQ(Get(s.id).state, SessionState::kRunning);
}

// A snapshot changed on disk is refused: the session is not resumed from bytes airlockd did
// not write, and says why.
TEST_F(SessionLifecycleTest, ASnapshotChangedOnDiskIsRefusedAtResume) {
  SessionRecord s = Create();
  ASSERT_TRUE(sessions_->Pause(kAlice, s.id).ok());
  std::string state = sessions_->layout().Snapshot(s.id) + "/state";
  absl::StatusOr<std::string> bytes = ReadFileToString(state, 1 << 20);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::string changed = *bytes;
  changed.back() ^= 1;
  ASSERT_TRUE(WriteFileAtomically(state, changed, 0600).ok());
  absl::StatusOr<SessionRecord> resumed = sessions_->Resume(kAlice, s.id);
  ASSERT_FALSE(resumed.ok());
  EXPECT_NE(resumed.status().message().find("snapshot refused"), std::string::npos)
      << resumed.status();
  EXPECT_EQ(driver_.restored(), 1) << "a VM was started from a changed snapshot";
}

// Forks start from one snapshot of the source: each has its files, its own VM and its own
// hostname, and the source runs on.
TEST_F(SessionLifecycleTest, ForksCarryTheSourcesFilesEachInItsOwnVm) {
  SessionRecord s = Create();
  WriteGuestFile(s.id, "/work/data", "from the source");
  absl::StatusOr<std::vector<SessionRecord>> forks = sessions_->Fork(kAlice, s.id, 2);
  ASSERT_TRUE(forks.ok()) << forks.status();
  ASSERT_EQ(forks->size(), 2u);
  EXPECT_EQ(Get(s.id).state, SessionState::kRunning);
  EXPECT_EQ(ReadGuestFile(s.id, "/work/data"), "from the source");
  std::set<std::string> hostnames = {Run(s.id, {"hostname"})};
  for (const SessionRecord& f : *forks) {
    EXPECT_EQ(f.state, SessionState::kRunning);
    EXPECT_NE(f.id, s.id);
    EXPECT_TRUE(Runs(f.pid));
    EXPECT_EQ(ReadGuestFile(f.id, "/work/data"), "from the source");
    hostnames.insert(Run(f.id, {"hostname"}));
  }
  EXPECT_EQ(hostnames.size(), 3u) << "forks share a hostname";
  // A fork's writes are its own.
  WriteGuestFile((*forks)[0].id, "/work/data", "changed in a fork");
  EXPECT_EQ(ReadGuestFile(s.id, "/work/data"), "from the source");
  EXPECT_EQ(ReadGuestFile((*forks)[1].id, "/work/data"), "from the source");

  // A paused session forks from its snapshot without being resumed.
  ASSERT_TRUE(sessions_->Pause(kAlice, s.id).ok());
  absl::StatusOr<std::vector<SessionRecord>> more = sessions_->Fork(kAlice, s.id, 1);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(ReadGuestFile((*more)[0].id, "/work/data"), "from the source");
  EXPECT_EQ(Get(s.id).state, SessionState::kPaused);
}

// A session nobody uses pauses itself once its idle timeout has passed on the clock; one in
// use does not.
TEST_F(SessionLifecycleTest, AnIdleSessionPausesItselfWhenItsTimeoutPasses) {
  SessionRecord idle = Create({.idle_timeout_seconds = 60});
  SessionRecord busy = Create({.idle_timeout_seconds = 60});
  WriteGuestFile(idle.id, "/root/state", "idle");
  absl::StatusOr<std::shared_ptr<LiveSession>> in_use = sessions_->Live(kAlice, busy.id);
  ASSERT_TRUE(in_use.ok());
  clock_.Advance(absl::Seconds(30));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // two rounds of the watcher
  EXPECT_EQ(Get(idle.id).state, SessionState::kRunning) << "paused before its timeout";

  clock_.Advance(absl::Seconds(31));
  SessionRecord paused = AwaitState(idle.id, SessionState::kPaused);
  EXPECT_NE(paused.reason.find("idle for 1m"), std::string::npos) << paused.reason;
  EXPECT_FALSE(Runs(idle.pid));
  EXPECT_EQ(Get(busy.id).state, SessionState::kRunning) << "a session in use paused";
  in_use->reset();
  EXPECT_EQ(ReadGuestFile(idle.id, "/root/state"), "idle");
}

// When its time to live runs out, a running session is stopped (its VM ended) and so is a
// paused one; a session without one lives on.
TEST_F(SessionLifecycleTest, TimeToLiveEndsRunningAndPausedSessions) {
  SessionRecord running = Create({.ttl_seconds = 120});
  SessionRecord paused = Create({.ttl_seconds = 120});
  SessionRecord forever = Create();
  ASSERT_TRUE(sessions_->Pause(kAlice, paused.id).ok());
  clock_.Advance(absl::Seconds(121));
  SessionRecord r = AwaitState(running.id, SessionState::kStopped);
  EXPECT_EQ(r.reason, "its time to live of 120s ran out");
  EXPECT_FALSE(Runs(running.pid));
  r = AwaitState(paused.id, SessionState::kStopped);
  EXPECT_EQ(r.reason, "its time to live of 120s ran out");
  EXPECT_NE(access(sessions_->layout().Snapshot(paused.id).c_str(), F_OK), 0)
      << "an expired session's snapshot was kept";
  EXPECT_EQ(Get(forever.id).state, SessionState::kRunning);
  EXPECT_FALSE(sessions_->Resume(kAlice, running.id).ok());
}

// One that asked to be paused at its TTL is paused then, keeps no TTL (until given one), and is
// never stopped for it while paused.
TEST_F(SessionLifecycleTest, ASessionThatAskedIsPausedAtItsTimeToLiveNotStopped) {
  SessionRecord s = Create({.ttl_seconds = 120, .pause_at_ttl = true});
  SessionRecord paused_first = Create({.ttl_seconds = 120, .pause_at_ttl = true});
  ASSERT_TRUE(sessions_->Pause(kAlice, paused_first.id).ok());
  clock_.Advance(absl::Seconds(121));
  SessionRecord r = AwaitState(s.id, SessionState::kPaused);
  EXPECT_EQ(r.reason, "its time to live of 120s ran out");
  EXPECT_EQ(r.limits.ttl_seconds, 0u);
  EXPECT_TRUE(r.limits.pause_at_ttl);
  EXPECT_FALSE(Runs(s.pid));
  clock_.Advance(absl::Seconds(600));  // ExpirePaused runs every 20 rounds
  std::this_thread::sleep_for(std::chrono::seconds(6));
  EXPECT_EQ(Get(paused_first.id).state, SessionState::kPaused);
  // Resumed, it runs until given a time again, and is paused then again.
  ASSERT_TRUE(sessions_->Resume(kAlice, s.id).ok());
  absl::StatusOr<SessionRecord> timed = sessions_->EndIn(kAlice, s.id, 60);
  ASSERT_TRUE(timed.ok()) << timed.status();
  EXPECT_TRUE(timed->limits.pause_at_ttl);
  clock_.Advance(absl::Seconds(61));
  AwaitState(s.id, SessionState::kPaused);
  // Asked otherwise, it is stopped at its TTL.
  ASSERT_TRUE(sessions_->Resume(kAlice, s.id).ok());
  ASSERT_TRUE(sessions_->EndIn(kAlice, s.id, 60, false).ok());
  clock_.Advance(absl::Seconds(61));
  AwaitState(s.id, SessionState::kStopped);
}

// A VM that dies fails its session with how it died.
TEST_F(SessionLifecycleTest, AVmThatDiesFailsItsSessionWithTheReason) {
  SessionRecord s = Create();
  ASSERT_EQ(kill(s.pid, SIGKILL), 0);
  SessionRecord r = AwaitState(s.id, SessionState::kFailed);
  EXPECT_EQ(r.reason, "killed by signal 9");
  absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(kAlice, s.id);
  ASSERT_FALSE(live.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(live.status())) << live.status();
}

// A VM that cannot start leaves no session running and says why.
TEST_F(SessionLifecycleTest, AVmThatCannotStartFailsTheCreateAndLeavesNothingRunning) {
  Create();  // the template exists
  driver_.FailStarts(absl::UnavailableError("no room for the VMM"), 2);
  absl::StatusOr<SessionLimits> limits = SessionManager::ResolveLimits({});
  ASSERT_TRUE(limits.ok());
  absl::StatusOr<SessionRecord> made = sessions_->Create(kAlice, kImage, *limits);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("no room for the VMM"), std::string::npos)
      << made.status();
  EXPECT_EQ(driver_.RunningPids().size(), 1u);
}

// airlockd stops and a new one starts: running VMs run on and are found again (their guests
// untouched), paused sessions stay paused.
TEST_F(SessionLifecycleTest, ANewDaemonFindsRunningVmsAgainAndKeepsPausedSessions) {
  SessionRecord running = Create();
  SessionRecord paused = Create();
  WriteGuestFile(running.id, "/root/a", "still here");
  WriteGuestFile(paused.id, "/root/b", "in the snapshot");
  ASSERT_TRUE(sessions_->Pause(kAlice, paused.id).ok());
  sessions_->DetachAll();
  sessions_.reset();
  EXPECT_TRUE(Runs(running.pid)) << "the VM ended with the daemon";

  StartManager();
  SessionRecord r = Get(running.id);
  EXPECT_EQ(r.state, SessionState::kRunning);
  EXPECT_EQ(r.pid, running.pid);
  EXPECT_EQ(ReadGuestFile(running.id, "/root/a"), "still here");
  EXPECT_EQ(Run(running.id, {"boots"}), "booted 1 restored 1\n");
  EXPECT_EQ(Get(paused.id).state, SessionState::kPaused);
  EXPECT_EQ(ReadGuestFile(paused.id, "/root/b"), "in the snapshot");
}

// Removing a session ends its VM and its files, whether it runs or is paused.
TEST_F(SessionLifecycleTest, RemoveEndsTheVmAndTheFiles) {
  SessionRecord running = Create();
  SessionRecord paused = Create();
  ASSERT_TRUE(sessions_->Pause(kAlice, paused.id).ok());
  for (const SessionRecord& s : {running, paused}) {
    ASSERT_TRUE(sessions_->Remove(kAlice, s.id).ok());
    EXPECT_EQ(Get(s.id).state, SessionState::kStopped);
    EXPECT_NE(access(sessions_->layout().Dir(s.id).c_str(), F_OK), 0);
  }
  EXPECT_FALSE(Runs(running.pid));
  EXPECT_TRUE(driver_.RunningPids().empty());
  EXPECT_TRUE(absl::IsNotFound(sessions_->Remove(Principal{1002, 1002}, running.id)));
}

// Every VM a session runs in gets its egress path from the network provider, with the session's
// rules; a pause stops it, a change of rules reaches the running one.
TEST_F(SessionLifecycleTest, EachVmOfASessionGetsItsEgressPathFromTheNetworkProvider) {
  absl::StatusOr<SessionLimits> limits = SessionManager::ResolveLimits({});
  ASSERT_TRUE(limits.ok());
  absl::StatusOr<std::vector<EgressGrant>> grants =
      sessions_->ResolveEgress({"pypi.org:443"}, {}, "create");
  ASSERT_TRUE(grants.ok()) << grants.status();
  absl::StatusOr<SessionRecord> s = sessions_->Create(kAlice, kImage, *limits, *grants);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(network_.paths().size(), 1u);
  std::vector<std::string> rules = {(*grants)[0].rule};
  EXPECT_EQ(network_.paths()[0]->rules(), rules);
  EXPECT_EQ(sessions_->EgressCounters(kAlice.Tenant(), s->id).connections, 7u);

  ASSERT_TRUE(sessions_->Pause(kAlice, s->id).ok());
  EXPECT_TRUE(network_.paths()[0]->stopped()) << "a paused session's egress runs on";
  ASSERT_TRUE(sessions_->Resume(kAlice, s->id).ok());
  ASSERT_EQ(network_.paths().size(), 2u);
  EXPECT_FALSE(network_.paths()[1]->stopped());
  EXPECT_EQ(network_.paths()[1]->rules(), rules);

  absl::StatusOr<std::vector<EgressGrant>> more =
      sessions_->ResolveEgress({"github.com:443"}, {}, "allow");
  ASSERT_TRUE(more.ok()) << more.status();
  ASSERT_TRUE(sessions_->ChangeEgress(kAlice, s->id, *more, {}, "network.allow").ok());
  rules.push_back((*more)[0].rule);
  EXPECT_EQ(network_.paths()[1]->rules(), rules);
}

// The host provider decides where a VM runs: one too big for every host is refused before
// anything starts, saying what to do; the hosts list shows what runs on this one.
// A burst of creates exactly as large as the running quota all succeed (holds of requests in
// flight and stored sessions are never counted twice), and one more is refused with the quota.
TEST_F(SessionLifecycleTest, ABurstOfCreatesUpToTheRunningQuotaAllSucceed) {
  absl::StatusOr<Quotas> quotas = Quotas::Parse("default running=6 vcpus=64 memory=64g\n");
  ASSERT_TRUE(quotas.ok()) << quotas.status();
  sessions_->DetachAll();
  StartManager(*quotas);
  absl::StatusOr<SessionLimits> limits = SessionManager::ResolveLimits({});
  ASSERT_TRUE(limits.ok());
  std::vector<absl::Status> results(6);
  std::vector<std::thread> creates;
  for (size_t i = 0; i < results.size(); ++i) {
    creates.emplace_back(
        [&, i] { results[i] = sessions_->Create(kAlice, kImage, *limits).status(); });
  }
  for (std::thread& t : creates) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  absl::StatusOr<SessionRecord> extra = sessions_->Create(kAlice, kImage, *limits);
  EXPECT_EQ(extra.status().code(), absl::StatusCode::kResourceExhausted) << extra.status();
  EXPECT_NE(extra.status().message().find("running quota of 6"), std::string::npos)
      << extra.status();
}

TEST_F(SessionLifecycleTest, TheHostProviderPlacesVmsAndListsWhatRunsOnEachHost) {
  providers::LocalHost small(&driver_, "small", {.vcpus = 2, .memory_bytes = 1ull << 30});
  sessions_->DetachAll();
  sessions_ = std::make_unique<SessionManager>(SessionManagerOptions{
      .store = store_.get(), .paths = paths_, .hosts = &small, .pool = {.max_per_kind = 0}});
  ASSERT_TRUE(sessions_->Recover().ok());
  absl::StatusOr<SessionLimits> big = SessionManager::ResolveLimits({.memory_bytes = 2ull << 30});
  ASSERT_TRUE(big.ok());
  absl::StatusOr<SessionRecord> refused = sessions_->Create(kAlice, kImage, *big);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find(
                "a VM of 2.0GiB cannot run on host small, which has 1.0GiB of memory"),
            std::string::npos)
      << refused.status();
  EXPECT_EQ(driver_.booted() + driver_.restored(), 0) << "a VM started for a refused session";

  SessionRecord s = Create({.memory_bytes = 256ull << 20});
  absl::StatusOr<std::vector<providers::HostInfo>> hosts = sessions_->Hosts();
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 1u);
  EXPECT_EQ((*hosts)[0].id, "small");
  EXPECT_TRUE((*hosts)[0].this_host);
  EXPECT_EQ((*hosts)[0].capacity.memory_bytes, 1ull << 30);
  EXPECT_EQ((*hosts)[0].sessions, std::vector<std::string>{s.id});
}

}  // namespace
}  // namespace airlock
