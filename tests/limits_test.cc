// Hostile workloads, each in its own session while a heartbeat session keeps working: every
// attack ends in a clear result for its own session only, airlockd keeps answering, and nothing
// is left on the host afterwards.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/strip.h"
#include "src/common/host_paths.h"
#include "tests/cli_runner.h"

namespace airlock {
namespace {

class LimitsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { heartbeat_ = new std::string(NewSession({})); }
  static void TearDownTestSuite() {
    RunAirlock({"rm", *heartbeat_});
    delete heartbeat_;
    // Nothing of any attacked session is left on the host.
    EXPECT_EQ(QemuLeftAfterWaiting(), 0);
    EXPECT_EQ(CountScratchFiles(), 0);
  }

  static std::string NewSession(const std::vector<std::string>& limits) {
    std::vector<std::string> args = {"session", "create"};
    args.insert(args.end(), limits.begin(), limits.end());
    Result r = RunAirlock(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::string(absl::StripTrailingAsciiWhitespace(r.out));
  }

  // The other session still answers, and so does airlockd.
  static void ExpectUnaffected() {
    Result r = RunAirlock({"exec", *heartbeat_, "--", "echo", "alive"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "alive\n");
    r = RunAirlock({"ls", "-q"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(*heartbeat_), std::string::npos);
  }

  // Runs an attack while checking, from another client, that ls and the heartbeat answer.
  static Result Attack(const std::string& id, const std::vector<std::string>& command,
                       bool discard_stdout = false) {
    std::vector<std::string> args = {"exec", id, "--"};
    args.insert(args.end(), command.begin(), command.end());
    Airlock attack(args);
    if (discard_stdout) attack.DiscardStdout();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ExpectUnaffected();
    return attack.Finish();
  }

  static std::string* heartbeat_;
};
std::string* LimitsTest::heartbeat_ = nullptr;

TEST_F(LimitsTest, ForkBombIsCappedByThePidsLimit) {
  std::string id = NewSession({"--pids", "64"});
  Result r = Attack(id, {"sh", "-c", "bomb() { bomb | bomb & }; bomb; sleep 3; echo survived"});
  // The bomb hits the limit at once; the shell says so (and may itself fail to fork `sleep`,
  // exiting 2). Either way the command ends with the reason, for this session only.
  EXPECT_NE(r.err.find("fork"), std::string::npos) << r.err.substr(0, 500);
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2) << r.exit_code;
  r = RunAirlock({"exec", id, "--", "sh", "-c", "cat /sys/fs/cgroup/airlock/pids.max"});
  // Either it runs (the bomb left room) or it fails to fork with a message: never a hang.
  if (r.exit_code == 0) {
    EXPECT_EQ(r.out, "64\n");
  } else {
    EXPECT_FALSE(r.err.empty());
  }
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);
  ExpectUnaffected();
}

// A command started while the session's commands hold every process their limit allows is
// refused with the reason: it never runs outside the limit, uncounted beside the agent.
TEST_F(LimitsTest, ACommandBeyondThePidsLimitIsRefusedNotRunOutsideIt) {
  std::string id = NewSession({"--pids", "16"});
  // A shell and fifteen sleeps hold the whole limit; the shell says so without a process of its
  // own (a redirection), and the file is read by the agent, not by a command.
  Result r = RunAirlock(
      {"exec", "-d", id, "--", "sh", "-c",
       "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do sleep 600 & done; : > /tmp/full; wait"});
  ASSERT_EQ(r.exit_code, 0) << id << ": " << r.err;
  for (int i = 0; i < 200; ++i) {
    r = RunAirlock({"file", "read", id, "/tmp/full"});
    if (r.exit_code == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunAirlock({"exec", id, "--", "true"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_NE(r.err.find("as many processes as it allows"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--pids"), std::string::npos) << r.err;
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);
  ExpectUnaffected();
}

TEST_F(LimitsTest, MemoryBombIsKilledWithAClearMessage) {
  std::string id = NewSession({"--memory", "256m"});
  Result r = Attack(id, {"python3", "-c", "a = []\nwhile True: a.append(' ' * 10**6)"});
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_NE(r.err.find("out-of-memory"), std::string::npos) << r.err;
  r = RunAirlock({"exec", id, "--", "echo", "session still works"});
  EXPECT_EQ(r.out, "session still works\n");
  RunAirlock({"rm", id});
  ExpectUnaffected();
}

// A command that lives on after a process of it ran out of memory (a build whose compiler
// died) says which process the guest's kernel killed, and so does the session's log.
TEST_F(LimitsTest, AProcessKilledForMemoryInsideACommandIsNamed) {
  std::string id = NewSession({"--memory", "256m"});
  Result r = Attack(id, {"sh", "-c",
                         "python3 -c 'a = []\nwhile True: a.append(\" \" * 10**6)'; "
                         "echo \"the command goes on after $?\""});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "the command goes on after 137\n");
  EXPECT_NE(r.err.find("airlock: out of memory in the guest: the kernel killed "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(" (python3)"), std::string::npos) << r.err;
  r = RunAirlock({"logs", id});
  EXPECT_NE(r.out.find("exit 0: out of memory in the guest: the kernel killed "), std::string::npos)
      << r.out;
  RunAirlock({"rm", id});
  ExpectUnaffected();
}

// Real work is not an attack: a default session that fills its page cache by writing to its
// disk and then uses nearly all its RAM (what `apt-get install` or a build does) is not killed
// by the host. Before issue 44 it was, every time: the host charged its guest RAM twice (the
// template's memory holes, then the private copies) and its disk writes once more.
TEST_F(LimitsTest, AGuestUsingAllItsMemoryAfterFillingItsDiskIsNotKilledByTheHost) {
  std::string id = NewSession({});
  Result r = Attack(id, {"sh", "-c",
                         "dd if=/dev/zero of=/root/f bs=1M count=700 2>/dev/null && python3 -c '"
                         "b = bytearray(380 << 20)\n"
                         "for i in range(0, len(b), 4096): b[i] = 1\n"
                         "print(\"touched\", len(b) >> 20)'"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "touched 380\n");
  r = RunAirlock({"exec", id, "--", "stat", "-c", "%s", "/root/f"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "734003200\n");
  r = RunAirlock({"ls"});
  EXPECT_NE(r.out.find(id), std::string::npos);
  EXPECT_EQ(r.out.find("failed"), std::string::npos) << r.out;
  RunAirlock({"rm", id});
  ExpectUnaffected();
}

TEST_F(LimitsTest, DiskFillStopsAtTheSessionsDiskSize) {
  std::string id = NewSession({"--disk", "64m"});
  Result r =
      Attack(id, {"sh", "-c", "dd if=/dev/zero of=/root/fill bs=1M 2>&1; s=$?; df -m /; exit $s"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("No space left on device"), std::string::npos) << r.out;
  RunAirlock({"rm", id});
  ExpectUnaffected();
}

TEST_F(LimitsTest, CpuSpinEndsAtTheTimeout) {
  std::string id = NewSession({"--cpus", "1"});
  Airlock spin({"exec", "--timeout", "4", id, "--", "sh", "-c", "while :; do :; done"});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ExpectUnaffected();
  Result r = spin.Finish();
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
  RunAirlock({"rm", id});
}

TEST_F(LimitsTest, AGigabyteOfOutputStreamsThroughAndTheLogStaysBounded) {
  std::string id = NewSession({});
  Result r = Attack(id, {"head", "-c", "1073741824", "/dev/zero"}, true);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out_bytes, 1073741824u);
  Airlock logs({"logs", id});
  logs.DiscardStdout();
  Result l = logs.Finish();
  EXPECT_EQ(l.exit_code, 0);
  EXPECT_LT(l.out_bytes, 40u << 20);  // the 16 MiB ring, as text lines
  RunAirlock({"rm", id});
  ExpectUnaffected();
}

TEST_F(LimitsTest, DescriptorExhaustionStaysInsideTheCommand) {
  std::string id = NewSession({});
  Result r = Attack(id, {"python3", "-c",
                         "import os\nfds = []\ntry:\n  while True: fds.append(os.open('/dev/null', "
                         "os.O_RDONLY))\nexcept OSError as e: print(len(fds), e.strerror)"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Too many open files"), std::string::npos) << r.out;
  r = RunAirlock({"exec", id, "--", "echo", "ok"});
  EXPECT_EQ(r.out, "ok\n");
  RunAirlock({"rm", id});
  ExpectUnaffected();
}

}  // namespace
}  // namespace airlock
