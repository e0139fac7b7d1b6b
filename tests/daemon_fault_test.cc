// `kill -9` of airlockd in the middle of work: VMs outlive it, and after a restart every session
// is accounted for (running ones carry on with their files and processes, paused ones are
// paused, the rest failed with the reason), and no VM is left that no session owns.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/common/host_paths.h"
#include "src/common/subprocess.h"
#include "tests/cli_runner.h"

namespace airlock {
namespace {

// Input to a CLI that the kill took with it must not end the test.
const bool kNoSigpipe = signal(SIGPIPE, SIG_IGN) != SIG_ERR;

void KillDaemon() {
  pid_t pid = DaemonPid();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  for (int i = 0; i < 100 && kill(pid, 0) == 0; ++i) usleep(50000);
}

// An airlockd started from a shell (here: by the CLI, with this test's limits) takes the hard
// open-file limit: its sessions' egress connections are all its own descriptors.
TEST(DaemonFaultTest, TheDaemonTakesTheHardOpenFileLimit) {
  ASSERT_EQ(RunAirlock({"ls"}).exit_code, 0);
  // A low soft limit under the hard one, as shells hand out (the hard one stays: raising it
  // back takes a capability a test may not have).
  rlimit before;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  ASSERT_GT(before.rlim_max, 256u);
  rlimit low = {256, before.rlim_max};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  KillDaemon();
  Result r = RunAirlock({"ls"});  // a new airlockd, started with the limits above
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &before), 0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string hard =
      before.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(before.rlim_max);
  std::ifstream limits("/proc/" + std::to_string(DaemonPid()) + "/limits");
  std::string line;
  while (std::getline(limits, line) && line.rfind("Max open files", 0) != 0) {
  }
  // "Max open files  SOFT  HARD  files"
  std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
  ASSERT_EQ(words.size(), 6u) << line;
  EXPECT_EQ(words[3], hard) << line;
  EXPECT_EQ(words[4], hard) << line;
}

// A second airlockd on the same home (a CLI that found the first too busy to answer started
// one) must not touch the first one's sessions: it refuses before it reads any state, and the
// sessions carry on. The CLI, finding the first one alive, waits for it instead.
TEST(DaemonFaultTest, ASecondAirlockdOnTheSameHomeRefusesAndTouchesNothing) {
  Result created = RunAirlock({"session", "create"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id(absl::StripTrailingAsciiWhitespace(created.out));
  std::string daemon = AIRLOCK_BINARY;
  daemon = daemon.substr(0, daemon.rfind('/')) + "/airlockd";
  ProcessOptions options;  // this test's environment: its daemon's home and socket
  for (char** e = environ; *e != nullptr; ++e) options.env.push_back(*e);
  absl::StatusOr<ProcessResult> second = RunProcess({daemon}, options);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->exit_code, 1);
  EXPECT_NE(second->output.find("another airlockd (pid " + std::to_string(DaemonPid()) + ")"),
            std::string::npos)
      << second->output;
  Result r = RunAirlock({"exec", id, "--", "echo", "still here"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "still here\n");
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);
}

std::string SessionLine(const std::string& ls, const std::string& id) {
  size_t at = ls.find(id);
  if (at == std::string::npos) return "";
  return ls.substr(at, ls.find('\n', at) - at);
}

// Session id -> state, from `airlock ls`.
std::map<std::string, std::string> States(const std::string& ls) {
  std::map<std::string, std::string> states;
  for (absl::string_view line : absl::StrSplit(ls, '\n')) {
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() < 3 || words[0] == "ID") continue;
    states[words[0]] = words[2];
  }
  return states;
}

std::string Create() {
  Result r = RunAirlock({"session", "create"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return std::string(absl::StripTrailingAsciiWhitespace(r.out));
}

TEST(DaemonFaultTest, KillDuringExecKeepsTheSessionItsFilesAndItsProcesses) {
  std::string id = Create();
  Airlock exec({"exec", "-i", id, "--", "sh", "-c",
                "echo kept > /tmp/kept; echo started; read line; exec sleep 300"});
  ASSERT_TRUE(exec.ReadUntil([&] { return exec.partial().out == "started\n"; }));
  // Output is stored in batches at most a quarter second old; give this one time to land.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  size_t vms = QemuPids().size();
  EXPECT_TRUE(kNoSigpipe);
  exec.Write("line\n");
  KillDaemon();
  EXPECT_EQ(QemuPids().size(), vms);  // the VM runs on without airlockd
  Result e = exec.Finish();
  EXPECT_EQ(e.exit_code, 125);
  EXPECT_NE(e.err.find("carry on once airlockd is back"), std::string::npos) << e.err;
  Result r = RunAirlock({"ls", "-a"});  // starts a new daemon, which finds the VM again
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(SessionLine(r.out, id).find("running"), std::string::npos) << r.out;
  r = RunAirlock({"exec", id, "--", "cat", "/tmp/kept"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "kept\n");
  // The command whose stream was cut carries on.
  const char* probe =
      "import os\n"
      "def comm(p):\n"
      "    try:\n"
      "        return open('/proc/%s/comm' % p).read().strip()\n"
      "    except OSError:\n"
      "        return ''  # it ended between the listing and the read\n"
      "print('sleepers', sum(1 for p in os.listdir('/proc') if p.isdigit() and\n"
      "      comm(p) == 'sleep'))\n";
  r = RunAirlock({"exec", id, "--", "python3", "-c", probe});
  EXPECT_EQ(r.out, "sleepers 1\n") << r.err;
  r = RunAirlock({"logs", id});
  EXPECT_NE(r.out.find("out started"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("airlockd restarted and found the VM running"), std::string::npos) << r.out;
  // And it pauses and resumes as any other.
  EXPECT_EQ(RunAirlock({"pause", id}).exit_code, 0);
  r = RunAirlock({"exec", id, "--", "cat", "/tmp/kept"});
  EXPECT_EQ(r.out, "kept\n") << r.err;
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);
  EXPECT_EQ(QemuLeftAfterWaiting(), 0);
}

TEST(DaemonFaultTest, KillDuringCreateLeavesTheSessionAccountedFor) {
  RunAirlock({"ls", "-a"});  // make sure a daemon runs
  Result before = RunAirlock({"ls", "-a", "-q"});
  // A VM shape of its own: no template exists yet, so the daemon boots one (slowly enough to
  // be caught in the middle).
  Airlock create({"session", "create", "--memory", "320m"});
  // Wait until the VM is booting, then kill the daemon mid-create.
  for (int i = 0; i < 100 && QemuPids().empty(); ++i) usleep(50000);
  ASSERT_EQ(static_cast<int>(QemuPids().size()), 1);
  KillDaemon();
  Result c = create.Finish();
  EXPECT_NE(c.exit_code, 0);
  Result after = RunAirlock({"ls", "-a"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  // The session the daemon had recorded is there, failed with the reason; its VM was ended.
  int failed = 0;
  for (const auto& [id, state] : States(after.out)) {
    if (before.out.find(id) != std::string::npos) continue;
    EXPECT_EQ(state, "failed") << after.out;
    EXPECT_NE(SessionLine(after.out, id).find("airlockd stopped while creating it"),
              std::string::npos)
        << after.out;
    ++failed;
    RunAirlock({"rm", id});
  }
  EXPECT_EQ(failed, 1) << after.out;
  EXPECT_EQ(QemuLeftAfterWaiting(), 0);
}

TEST(DaemonFaultTest, AOneShotRunGoesWithTheDaemon) {
  RunAirlock({"ls", "-a"});
  Result before = RunAirlock({"ls", "-a", "-q"});
  Airlock run({"run", "--", "sh", "-c", "echo running; sleep 300"});
  ASSERT_TRUE(run.ReadUntil([&] { return run.partial().out == "running\n"; }));
  KillDaemon();
  EXPECT_EQ(run.Finish().exit_code, 125);
  // Its caller is gone: the next daemon removes the session and ends the VM.
  Result after = RunAirlock({"ls", "-a", "-q"});
  EXPECT_EQ(after.out, before.out);
  EXPECT_EQ(QemuLeftAfterWaiting(), 0);
}

// airlockd killed at random moments of every kind of work; after each restart, every session
// is running (and answers), paused, or failed, and every VM belongs to a running session.
TEST(DaemonFaultTest, KillAtRandomMomentsLeavesEverySessionConsistent) {
  std::random_device seed_source;
  unsigned seed = seed_source();
  std::mt19937 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  RunAirlock({"ls", "-a"});
  std::set<std::string> before;
  for (const auto& [id, state] : States(RunAirlock({"ls", "-a"}).out)) before.insert(id);
  std::vector<std::string> ops = {"create", "exec", "pause", "resume", "fork", "rm"};
  std::map<std::string, int> outcomes;
  for (int i = 0; i < 32; ++i) {
    std::vector<std::string> ids;  // running or paused
    for (const auto& [id, state] : States(RunAirlock({"ls", "-a"}).out)) {
      if (!before.contains(id) && (state == "running" || state == "paused")) ids.push_back(id);
    }
    std::string op = ops[rng() % ops.size()];
    if (ids.empty() || (ids.size() < 2 && op == "rm")) op = "create";
    std::string target = ids.empty() ? "" : ids[rng() % ids.size()];
    std::vector<std::string> args;
    if (op == "create") args = {"session", "create"};
    if (op == "exec") args = {"exec", "-i", target, "--", "sh", "-c", "cat > /tmp/in; sleep 1"};
    if (op == "pause" || op == "resume" || op == "rm") args = {op, target};
    if (op == "fork") args = {"fork", target, "-n", "3"};
    SCOPED_TRACE("round " + std::to_string(i) + ": " + op + " " + target);
    Airlock work(args);
    if (op == "exec") work.Write("some input\n");
    usleep(static_cast<useconds_t>(rng() % 1500) * 1000);
    KillDaemon();
    Result done = work.Finish();
    outcomes[op + (done.exit_code == 0 ? " done" : " cut")]++;

    Result ls = RunAirlock({"ls", "-a"});
    ASSERT_EQ(ls.exit_code, 0) << ls.err;
    int running = 0;
    std::vector<std::string> to_remove;
    for (const auto& [id, state] : States(ls.out)) {
      if (before.contains(id)) continue;
      // (stopped: removed, its record kept)
      EXPECT_TRUE(state == "running" || state == "paused" || state == "failed" ||
                  state == "stopped")
          << SessionLine(ls.out, id);
      if (state == "running") {
        ++running;
        Result r = RunAirlock({"exec", id, "--", "true"});
        EXPECT_EQ(r.exit_code, 0) << id << ": " << r.err;
      }
      if (state == "failed") to_remove.push_back(id);
    }
    // (a VM that was just ended may take a moment to go)
    for (int w = 0; w < 50 && static_cast<int>(QemuPids().size()) > running; ++w) usleep(100000);
    EXPECT_EQ(static_cast<int>(QemuPids().size()), running) << ls.out;
    // Keep the host's load bounded: at most four sessions go on to the next round.
    std::vector<std::string> kept;
    for (const auto& [id, state] : States(ls.out)) {
      if (!before.contains(id) && (state == "running" || state == "paused")) kept.push_back(id);
    }
    for (size_t k = 4; k < kept.size(); ++k) to_remove.push_back(kept[k]);
    for (const std::string& id : to_remove) RunAirlock({"rm", id});
  }
  for (const auto& [id, state] : States(RunAirlock({"ls", "-a"}).out)) {
    if (!before.contains(id)) RunAirlock({"rm", id});
  }
  std::ostringstream summary;
  for (const auto& [what, n] : outcomes) summary << what << ": " << n << "\n";
  std::printf("%s", summary.str().c_str());
  EXPECT_EQ(QemuLeftAfterWaiting(), 0);
}

}  // namespace
}  // namespace airlock
