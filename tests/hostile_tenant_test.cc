// Two users of one host, one of them hostile (uid 61004, mallory, with small quotas in
// tests/vm_test_env.cc): every attack on the other's sessions, on the host's resources and on
// the other's VM is refused with a clear error and an audit record, and the other user goes on
// unaffected.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/strip.h"
#include "tests/cli_runner.h"

namespace airlock {
namespace {

const RunAs kAlice{61001, 61001};
const RunAs kMallory{61004, 61004};

bool Audited(const std::string& row) {
  std::vector<std::string> rows = AuditRows();
  return std::find(rows.begin(), rows.end(), row) != rows.end();
}

TEST(HostileTenantTest, AttacksOnAnotherUsersSessionAreRefusedAndAudited) {
  RunAirlock({"ls"});  // root starts the daemon; users cannot
  Result r = RunAirlock({"session", "create"}, "", kAlice);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string victim(absl::StripTrailingAsciiWhitespace(r.out));
  ASSERT_EQ(RunAirlock({"exec", victim, "--", "sh", "-c", "echo mine > /root/data"}, "", kAlice)
                .exit_code,
            0);
  // Every way mallory could reach it by its id: the session does not exist for her.
  std::vector<std::vector<std::string>> attacks = {
      {"exec", victim, "--", "cat", "/root/data"},
      {"file", "read", victim, "/root/data"},
      {"logs", victim},
      {"pause", victim},
      {"fork", victim},
      {"network", "allow", victim, "example.com"},
      {"secret", "set", victim, "K=env:HOME@example.com"},
      {"diff", victim},
      {"rm", victim},
  };
  for (const std::vector<std::string>& attack : attacks) {
    r = RunAirlock(attack, "", kMallory);
    EXPECT_NE(r.exit_code, 0) << attack[0];
    EXPECT_NE(r.err.find(victim), std::string::npos) << attack[0] << ": " << r.err;
    EXPECT_EQ(r.out.find("mine"), std::string::npos) << attack[0];
  }
  // On alice's record: a denied lookup by mallory, and nothing mallory changed.
  EXPECT_TRUE(Audited("uid:61004 session.lookup " + victim));
  // Nor can mallory's VM reach alice's: another uid, its own PID namespace and root.
  r = RunAirlock({"session", "create"}, "", kMallory);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string own(absl::StripTrailingAsciiWhitespace(r.out));
  pid_t hers = QemuPidOf(victim, kAlice), mine = QemuPidOf(own, kMallory);
  ASSERT_GT(hers, 0);
  ASSERT_GT(mine, 0);
  struct stat st_hers, st_mine;
  ASSERT_EQ(stat(("/proc/" + std::to_string(hers)).c_str(), &st_hers), 0);
  ASSERT_EQ(stat(("/proc/" + std::to_string(mine)).c_str(), &st_mine), 0);
  EXPECT_NE(st_hers.st_uid, st_mine.st_uid);
  pid_t child = fork();
  if (child == 0) {
    uid_t uid = st_mine.st_uid;
    if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      _exit(2);
    }
    bool refused = kill(hers, SIGKILL) != 0 &&
                   open(("/proc/" + std::to_string(hers) + "/mem").c_str(), O_RDONLY) < 0;
    _exit(refused ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // Alice goes on as if nothing happened.
  r = RunAirlock({"exec", victim, "--", "cat", "/root/data"}, "", kAlice);
  EXPECT_EQ(r.out, "mine\n") << r.err;
  // The host's audit log is root's to read: every user's records are in it.
  r = RunAirlock({"audit"}, "", kMallory);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("only root may read the audit log"), std::string::npos) << r.err;
  EXPECT_NE(RunAirlock({"audit", "--verify"}, "", kMallory).exit_code, 0);
  r = RunAirlock({"audit", "--since", "1h"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("session.lookup"), std::string::npos) << r.out;
  r = RunAirlock({"audit", "--verify"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("the chain is whole"), std::string::npos) << r.out;
  RunAirlock({"rm", own}, "", kMallory);
  RunAirlock({"rm", victim}, "", kAlice);
}

TEST(HostileTenantTest, ATenantCannotTakeTheHostsResources) {
  RunAirlock({"ls"});
  // Mallory may hold one running session of at most 1 GiB (tests/vm_test_env.cc).
  Result r = RunAirlock({"session", "create", "--memory", "2g"}, "", kMallory);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("over the memory quota of 1.0GiB"), std::string::npos) << r.err;
  r = RunAirlock({"session", "create"}, "", kMallory);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string own(absl::StripTrailingAsciiWhitespace(r.out));
  r = RunAirlock({"run", "--", "true"}, "", kMallory);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("over the running quota of 1"), std::string::npos) << r.err;
  r = RunAirlock({"fork", own, "-n", "8"}, "", kMallory);
  EXPECT_NE(r.err.find("quota"), std::string::npos) << r.err;
  EXPECT_TRUE(Audited("uid:61004/gid:61004 quota.refuse session.create"));
  EXPECT_TRUE(Audited("uid:61004/gid:61004 quota.refuse session.fork " + own));
  // Ids of any length for sessions that do not exist cost airlockd nothing it keeps.
  for (int i = 0; i < 20; ++i) {
    r = RunAirlock({"pause", std::string(100000, 'a' + i % 26)}, "", kMallory);
    EXPECT_NE(r.exit_code, 0);
  }
  // The other user still gets what the host has.
  r = RunAirlock({"run", "--", "echo", "fine"}, "", kAlice);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "fine\n");
  RunAirlock({"rm", own}, "", kMallory);
}

}  // namespace
}  // namespace airlock
