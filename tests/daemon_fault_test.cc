// `kill -9` of airlockd in the middle of work: after a restart every session is accounted for
// (its VM went down with the daemon, so it is failed, with the reason), and no VM is left.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "absl/strings/strip.h"
#include "src/common/host_paths.h"
#include "tests/cli_runner.h"

namespace airlock {
namespace {

void KillDaemon() {
  pid_t pid = DaemonPid();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  for (int i = 0; i < 100 && kill(pid, 0) == 0; ++i) usleep(50000);
  // Its VMs die with it.
  EXPECT_EQ(QemuLeftAfterWaiting(), 0);
}

std::string SessionLine(const std::string& ls, const std::string& id) {
  size_t at = ls.find(id);
  if (at == std::string::npos) return "";
  return ls.substr(at, ls.find('\n', at) - at);
}

TEST(DaemonFaultTest, KillDuringExecLosesNoSession) {
  Result r = RunAirlock({"session", "create"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string id(absl::StripTrailingAsciiWhitespace(r.out));
  Airlock exec({"exec", id, "--", "sh", "-c", "echo started; sleep 300"});
  ASSERT_TRUE(exec.ReadUntil([&] { return exec.partial().out == "started\n"; }));
  // Output is stored in batches at most a quarter second old; give this one time to land.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  KillDaemon();
  Result e = exec.Finish();
  EXPECT_EQ(e.exit_code, 125);
  EXPECT_FALSE(e.err.empty());
  r = RunAirlock({"ls"});  // starts a new daemon
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string line = SessionLine(r.out, id);
  EXPECT_NE(line.find("failed"), std::string::npos) << r.out;
  EXPECT_NE(line.find("airlockd stopped while the VM was running"), std::string::npos) << line;
  r = RunAirlock({"logs", id});
  EXPECT_NE(r.out.find("out started"), std::string::npos) << r.out;
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);
}

TEST(DaemonFaultTest, KillDuringCreateLeavesTheSessionAccountedFor) {
  RunAirlock({"ls"});  // make sure a daemon runs
  Result before = RunAirlock({"ls", "-q"});
  // A VM shape of its own: no template exists yet, so the daemon boots one (slowly enough to
  // be caught in the middle).
  Airlock create({"session", "create", "--memory", "320m"});
  // Wait until the VM is booting, then kill the daemon mid-create.
  for (int i = 0; i < 100 && QemuPids().empty(); ++i) usleep(50000);
  ASSERT_EQ(static_cast<int>(QemuPids().size()), 1);
  KillDaemon();
  Result c = create.Finish();
  EXPECT_NE(c.exit_code, 0);
  Result after = RunAirlock({"ls"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  // The session the daemon had recorded is there, failed with the reason; nothing is running.
  int failed = 0;
  for (size_t at = after.out.find('\n'); at != std::string::npos;
       at = after.out.find('\n', at + 1)) {
    std::string line = after.out.substr(at + 1, after.out.find('\n', at + 1) - at - 1);
    if (line.size() < 12 || before.out.find(line.substr(0, 12)) != std::string::npos) continue;
    EXPECT_NE(line.find("failed"), std::string::npos) << line;
    EXPECT_NE(line.find("airlockd stopped"), std::string::npos) << line;
    ++failed;
    RunAirlock({"rm", line.substr(0, 12)});
  }
  EXPECT_EQ(failed, 1) << after.out;
  EXPECT_EQ(static_cast<int>(QemuPids().size()), 0);
}

}  // namespace
}  // namespace airlock
