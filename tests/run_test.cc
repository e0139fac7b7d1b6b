// `airlock run` end to end: real microVMs (TCG here), driven through the binary a user runs.
// Needs scripts/setup.sh to have built the kernel and the default image.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "src/common/host_paths.h"
#include "tests/cli_runner.h"

namespace airlock {
namespace {

TEST(RunTest, PrintsOutputAndMirrorsTheExitCode) {
  Result r = RunAirlock({"run", "--", "python3", "-c", "print('hi!')"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hi!\n");
  r = RunAirlock({"run", "--", "sh", "-c", "echo to-out; echo to-err >&2; exit 7"});
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.out, "to-out\n");
  EXPECT_EQ(r.err, "to-err\n");
}

// What agents expect to find in the default image, besides Python, git and curl.
TEST(RunTest, TheDefaultImageHasTheToolsAgentsReachFor) {
  Result r = RunAirlock({"run", "--", "sh", "-c",
                         "ps -o comm= -p 1 && free -m >/dev/null && top -bn1 >/dev/null && "
                         "echo '{\"a\": 42}' | jq .a && unzip -v >/dev/null && "
                         "less --version >/dev/null && echo ok"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "init\n42\nok\n") << r.err;
}

TEST(RunTest, ExitCodesForSignalsMissingCommandsAndErrors) {
  Result r = RunAirlock({"run", "--", "sh", "-c", "kill -9 $$"});
  EXPECT_EQ(r.exit_code, 137);
  r = RunAirlock({"run", "--", "no-such-command"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("no-such-command: command not found in the guest"), std::string::npos);
  r = RunAirlock({"run", "--", "/etc/passwd"});
  EXPECT_EQ(r.exit_code, 126) << r.err;
  r = RunAirlock({"run", "-w", "/no/such/dir", "--", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("/no/such/dir"), std::string::npos);
  r = RunAirlock({"run", "no/such-image", "--", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("airlock image ls"), std::string::npos) << r.err;
  r = RunAirlock({"run"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("usage"), std::string::npos);
}

TEST(RunTest, PassesStdinEnvironmentAndWorkdir) {
  Result r = RunAirlock({"run", "--", "cat"}, "hello through stdin\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello through stdin\n");
  std::string big(3 << 20, 'b');  // larger than every window and buffer on the way
  r = RunAirlock({"run", "--", "sh", "-c", "wc -c"}, big);
  EXPECT_EQ(r.out, std::to_string(big.size()) + "\n");
  r = RunAirlock(
      {"run", "-e", "GREETING=hello", "-w", "/tmp", "--", "sh", "-c", "echo $GREETING; pwd"});
  EXPECT_EQ(r.out, "hello\n/tmp\n");
}

TEST(RunTest, StreamsOutputWhileTheCommandRuns) {
  // The command prints a line, then waits for input that the test sends only after it has
  // seen that line: if output were held back until exit, this would never finish.
  Airlock a({"run", "--", "sh", "-c", "echo first; read answer; echo second $answer"});
  ASSERT_TRUE(a.ReadUntil([&] { return a.partial().out.find("first\n") != std::string::npos; }));
  EXPECT_EQ(a.partial().out, "first\n");
  a.Write("go\n");
  Result r = a.Finish();
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "first\nsecond go\n");
}

TEST(RunTest, TimeoutDestroysTheVm) {
  Result r = RunAirlock({"run", "--timeout", "1", "--", "sleep", "300"});
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
  EXPECT_EQ(QemuLeftAfterWaiting(), 0);
}

TEST(RunTest, TheGuestIsItsOwnMachineWithoutNetwork) {
  const char* probe = R"(
import os, socket
print("kernel", os.uname().release)
print("hostname", socket.gethostname())
print("pid1", open("/proc/1/cmdline").read().strip("\0"))
print("nics", ",".join(sorted(os.listdir("/sys/class/net"))))
root = [l.split() for l in open("/proc/mounts") if l.split()[1] == "/"][-1]
print("root", root[2])
for addr in [("127.0.0.1", 9), ("1.1.1.1", 80), ("::1", 9)]:
    s = socket.socket(socket.AF_INET6 if ":" in addr[0] else socket.AF_INET)
    s.settimeout(5)
    try:
        s.connect(addr)
        print("connect", addr[0], "ok")
    except OSError as e:
        print("connect", addr[0], "failed")
open("/written", "w").write("x")
print("wrote", os.path.exists("/written"))
)";
  Result r = RunAirlock({"run", "--", "python3", "-c", probe});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  utsname host;
  uname(&host);
  EXPECT_NE(r.out.find("kernel "), std::string::npos);
  EXPECT_EQ(r.out.find(std::string("kernel ") + host.release + "\n"), std::string::npos);
  EXPECT_NE(r.out.find("hostname airlock-"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pid1 /init\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nics lo\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("root overlay\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("connect 127.0.0.1 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("connect 1.1.1.1 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("connect ::1 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wrote True"), std::string::npos);
  // A write in one run is gone in the next: every VM gets a fresh writable layer.
  r = RunAirlock({"run", "--", "sh", "-c", "test -e /written && echo still-there || echo gone"});
  EXPECT_EQ(r.out, "gone\n");
}

TEST(RunTest, NothingIsLeftOnTheHostAfterManyRuns) {
  int before = static_cast<int>(QemuPids().size());
  ASSERT_EQ(before, 0) << "another VM is running on this host";
  for (int i = 0; i < 20; ++i) {
    Result r = RunAirlock({"run", "--", "true"});
    ASSERT_EQ(r.exit_code, 0) << "run " << i << ": " << r.err;
  }
  EXPECT_EQ(QemuLeftAfterWaiting(), 0);
  EXPECT_EQ(CountScratchFiles(), 0);
}

TEST(RunTest, NothingIsLeftWhenTheClientOrTheVmIsKilledMidway) {
  {
    Airlock a({"run", "--", "sh", "-c", "echo running; sleep 300"});
    ASSERT_TRUE(a.ReadUntil([&] { return a.partial().out == "running\n"; }));
    ASSERT_EQ(static_cast<int>(QemuPids().size()), 1);
    kill(a.pid(), SIGKILL);
    a.Finish();
  }
  EXPECT_EQ(QemuLeftAfterWaiting(), 0);
  {
    Airlock a({"run", "--", "sh", "-c", "echo running; sleep 300"});
    ASSERT_TRUE(a.ReadUntil([&] { return a.partial().out == "running\n"; }));
    // Kill the VM itself: the user gets a clear error, not a hang.
    for (pid_t pid : QemuPids()) kill(pid, SIGKILL);
    Result r = a.Finish();
    EXPECT_EQ(r.exit_code, 125);
    EXPECT_NE(r.err.find("the VM failed"), std::string::npos) << r.err;
  }
  EXPECT_EQ(QemuLeftAfterWaiting(), 0);
  EXPECT_EQ(CountScratchFiles(), 0);
}

TEST(DoctorTest, NamesTheAcceleratorAndWhatIsPresent) {
  Result r = RunAirlock({"doctor"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("accelerator: "), std::string::npos);
  EXPECT_NE(r.out.find("qemu: "), std::string::npos);
  EXPECT_NE(r.out.find(kDefaultImage), std::string::npos);
}

}  // namespace
}  // namespace airlock
