// Faults of the host under a session. The host's disk runs full under $AIRLOCK_HOME (a private
// airlockd whose home is a small tmpfs, the test daemon's images and kernel by symlink): a
// pause or fork that finds no space is refused with what to do, its partial snapshot goes, and
// the session runs on; a guest whose disk writes find no space waits, whole, and goes on by
// itself once space is freed, with every file it had. The VM process killed while a pause
// saves it: the session fails with how the VM ended, and no part of a snapshot stays to be
// loaded. A resume that finds no room for the RAM it will write is refused, never half done.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "tests/cli_runner.h"
#include "tests/loopback_http_server.h"
#include "tests/small_home.h"

namespace airlock {
namespace {

// Output of `airlock exec ID -- ARGS` once it is `want`, or the last one after ~60 s.
std::string ExecUntil(const std::string& id, const std::vector<std::string>& args,
                      const std::string& want) {
  std::vector<std::string> command = {"exec", id, "--"};
  command.insert(command.end(), args.begin(), args.end());
  std::string out;
  for (int i = 0; i < 60 && out != want; ++i) {
    out = RunAirlock(command).out;
    if (out != want) sleep(1);
  }
  return out;
}

TEST(HostFaultTest, AFullHostDiskStopsNothingForGoodAndLosesNothing) {
  SmallHome home(768);
  std::string id = CreateSession({});
  ASSERT_FALSE(id.empty());
  // The host's disk runs full, then the guest writes 48 MiB and syncs them (a command left
  // running: a pause waits for no such command): the VM waits, whole, rather than being ended,
  // and says so. A pause meanwhile is refused with what to do and ends nothing.
  Result r = RunAirlock({"exec", id, "--", "sh", "-c", "echo kept > /root/kept && sync"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  home.Fill(16);
  r = RunAirlock({"exec", "-d", id, "--", "dd", "if=/dev/urandom", "of=/root/big", "bs=1M",
                  "count=48", "conv=fsync"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int i = 0; i < 60 && home.Log().find("the VM waits, losing nothing") == std::string::npos;
       ++i) {
    usleep(500000);
  }
  EXPECT_NE(home.Log().find("the VM waits, losing nothing"), std::string::npos) << home.Log();
  r = RunAirlock({"pause", id});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("free some space there"), std::string::npos) << r.err;
  // Space again: it goes on by itself, with everything it wrote.
  home.Free();
  EXPECT_EQ(ExecUntil(id, {"cat", "/root/kept"}, "kept\n"), "kept\n") << home.Log();
  // Said once the watcher looks (every 2 s while the disk was short lately), however it went on.
  for (int i = 0; i < 60 && home.Log().find("the VM went on") == std::string::npos; ++i) {
    usleep(500000);
  }
  EXPECT_NE(home.Log().find("the VM went on"), std::string::npos) << home.Log();
  EXPECT_EQ(ExecUntil(id, {"sh", "-c", "sync && stat -c %s /root/big"}, "50331648\n"),
            "50331648\n");

  // No room for a snapshot itself: the pause and the fork are refused and say what to do, the
  // space their partial snapshots took is given back, and the session runs on.
  home.Fill(16);
  r = RunAirlock({"pause", id});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("free some space there"), std::string::npos) << r.err;
  r = RunAirlock({"fork", id});
  EXPECT_NE(r.exit_code, 0);
  struct statvfs fs;
  ASSERT_EQ(statvfs(home.path().c_str(), &fs), 0);
  EXPECT_GE(static_cast<int64_t>(fs.f_bavail) * fs.f_frsize, int64_t{12} << 20);
  EXPECT_EQ(ExecUntil(id, {"cat", "/root/kept"}, "kept\n"), "kept\n");
  // Nor for a workspace's upload: refused with where and what to do, and nothing of it stays.
  std::string workspace = home.path() + "-workspace";
  ASSERT_EQ(mkdir(workspace.c_str(), 0755), 0);
  std::string noise(40 << 20, '\0');  // that nothing can compress
  uint64_t x = 88172645463325252ull;
  for (char& c : noise) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  ASSERT_TRUE(WriteFileAtomically(workspace + "/big.bin", noise, 0644).ok());
  int64_t before = home.FreeBytes();
  r = RunAirlock({"session", "create", "--workspace", workspace});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("free some space there"), std::string::npos) << r.err;
  EXPECT_GE(home.FreeBytes(), before - (1 << 20));
  EXPECT_TRUE(ListDirectory(home.path() + "/tmp").empty());
  ASSERT_TRUE(RemoveTree(workspace).ok());
  home.Free();
  ASSERT_EQ(RunAirlock({"pause", id}).exit_code, 0);
  EXPECT_EQ(ExecUntil(id, {"cat", "/root/kept"}, "kept\n"), "kept\n");
}

// A resumed session's RAM is a file on the host's disk (its snapshot's memory file, which its VM
// writes into from then on). The resume takes the room for all of it first, or is refused with
// what to do and the session stays paused; once resumed, a full disk never ends the VM for a
// page of its RAM (it would die of SIGBUS).
TEST(HostFaultTest, AResumeTakesRoomForTheRamOrIsRefusedAndTheVmNeverLacksIt) {
  // A disk's filesystem: on a tmpfs the RAM set apart fills its holes as it is read anyway.
  SmallHome home(1536, /*shared_images=*/true, SmallDisk::kExt4);
  std::string id = CreateSession({"--idle-timeout", "0"});
  ASSERT_FALSE(id.empty());
  Result r = RunAirlock({"exec", id, "--", "sh", "-c", "echo kept > /root/kept && sync"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(RunAirlock({"pause", id}).exit_code, 0);
  std::string memory = home.path() + "/sessions/" + id + "/snapshot/memory";
  for (int i = 0; i < 600 && access(memory.c_str(), F_OK) != 0; ++i) usleep(100000);
  ASSERT_EQ(access(memory.c_str(), F_OK), 0) << "the snapshot never kept its RAM apart";

  home.Fill(64);
  r = RunAirlock({"resume", id});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("reserve disk space for the guest's RAM (512 MiB)"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("free some space there"), std::string::npos) << r.err;
  EXPECT_NE(RunAirlock({"ls", "-a"}).out.find("paused"), std::string::npos);
  home.Free();
  r = RunAirlock({"resume", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // The disk full again (what is left is for airlockd's records): the guest takes 200 MiB of RAM
  // it never used, and runs on.
  home.Fill(16);
  r = RunAirlock({"exec", id, "--", "python3", "-c",
                  "b = bytearray(200 << 20)\n"
                  "for i in range(0, len(b), 4096): b[i] = 1\n"
                  "print(b.count(1))"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "51200\n") << r.err;
  EXPECT_EQ(RunAirlock({"exec", id, "--", "cat", "/root/kept"}).out, "kept\n");
  home.Free();
}

// The pid of a running session's VM, from `airlock ps --json` (0: none).
pid_t VmPid(const std::string& id) {
  nlohmann::json ps = nlohmann::json::parse(RunAirlock({"ps", "--json"}).out, nullptr, false);
  if (!ps.is_array()) return 0;
  for (const nlohmann::json& vm : ps) {
    if (vm.value("session_id", "") == id) return vm.value("pid", 0);
  }
  return 0;
}

TEST(HostFaultTest, AVmKilledWhileItIsSavedFailsItsSessionWithHowItEnded) {
  std::string id = CreateSession({});
  // 250 MiB of guest RAM written with random bytes (freed again, but not zero: saved whole),
  // so that saving it takes a while.
  Result r =
      RunAirlock({"exec", id, "--", "python3", "-c", "import os; b = os.urandom(250 << 20)"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  pid_t pid = VmPid(id);
  ASSERT_GT(pid, 0);
  // Killed a moment after the pause starts: while it saves the VM, or (on a fast host) just
  // before; either way the session fails with how the VM ended.
  Airlock pause({"pause", id});
  usleep(150000);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  r = pause.Finish();
  EXPECT_NE(r.exit_code, 0);
  r = RunAirlock({"ls", "-a"});
  std::string line;
  for (absl::string_view l : absl::StrSplit(r.out, '\n')) {
    if (absl::StartsWith(l, id)) line = std::string(l);
  }
  EXPECT_NE(line.find("failed"), std::string::npos) << r.out;
  EXPECT_NE(line.find("killed by signal 9"), std::string::npos) << r.out;
  // Nothing of a snapshot is left to load, and the session says so when used.
  struct stat st;
  EXPECT_NE(stat((DefaultHostPaths().home + "/sessions/" + id + "/snapshot").c_str(), &st), 0);
  r = RunAirlock({"exec", id, "--", "true"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("is failed"), std::string::npos) << r.err;
  RunAirlock({"rm", id});
}

}  // namespace
}  // namespace airlock
