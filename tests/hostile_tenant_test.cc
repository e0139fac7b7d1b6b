// Two users of one host, one of them hostile (uid 61004, mallory, with small quotas in
// tests/vm_test_env.cc): every attack on the other's sessions, on the host's resources and on
// the other's VM is refused with a clear error and an audit record, and the other user goes on
// unaffected.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
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
  EXPECT_NE(r.err.find("only root and read-only operators may read the audit log"),
            std::string::npos)
      << r.err;
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

// uid 61010 is a read-only operator (AIRLOCK_OPERATORS in tests/vm_test_env.cc): it sees every
// tenant's sessions, VMs, timelines and the audit log, never wakes a paused session, and every
// change it tries is refused.
TEST(HostileTenantTest, AReadOnlyOperatorSeesEveryTenantAndChangesNothing) {
  const RunAs kOperator{61010, 61010};
  RunAirlock({"ls"});
  Result r = RunAirlock({"session", "create"}, "", kAlice);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string hers(absl::StripTrailingAsciiWhitespace(r.out));
  ASSERT_EQ(RunAirlock({"exec", hers, "--", "echo", "<b>hi</b>"}, "", kAlice).exit_code, 0);
  r = RunAirlock({"session", "create"}, "", kMallory);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string paused(absl::StripTrailingAsciiWhitespace(r.out));
  ASSERT_EQ(RunAirlock({"pause", paused}, "", kMallory).exit_code, 0);

  r = RunAirlock({"ls", "-a", "--all-tenants", "--json"}, "", kOperator);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json listed = nlohmann::json::parse(r.out);
  std::map<std::string, std::string> tenant_of, state_of;
  for (const nlohmann::json& s : listed) {
    tenant_of[s["id"]] = s["tenant"];
    state_of[s["id"]] = s["state"];
  }
  EXPECT_EQ(tenant_of[hers], "uid:61001");
  EXPECT_EQ(tenant_of[paused], "uid:61004");
  EXPECT_EQ(RunAirlock({"ls", "-q"}, "", kOperator).out, "");  // it owns nothing itself
  r = RunAirlock({"ps", "--all-tenants"}, "", kOperator);
  EXPECT_NE(r.out.find(hers), std::string::npos) << r.out << r.err;
  r = RunAirlock({"log", hers}, "", kOperator);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("<b>hi</b>"), std::string::npos) << r.out;
  r = RunAirlock({"metrics", hers}, "", kOperator);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Looking is not using: a paused session stays paused.
  r = RunAirlock({"metrics", paused}, "", kOperator);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("paused, not running"), std::string::npos) << r.err;
  r = RunAirlock({"ls", "-a", "--all-tenants", "--json"}, "", kOperator);
  EXPECT_NE(r.out.find("\"paused\""), std::string::npos) << r.out;
  r = RunAirlock({"audit", "--verify"}, "", kOperator);
  EXPECT_EQ(r.exit_code, 0) << r.err;

  std::vector<std::vector<std::string>> changes = {
      {"session", "create"},
      {"exec", hers, "--", "true"},
      {"file", "write", hers, "/tmp/x"},
      {"pause", hers},
      {"resume", paused},
      {"fork", hers},
      {"network", "allow", hers, "example.com"},
      {"secret", "set", hers, "K=env:HOME@example.com"},
      {"rm", hers},
      {"image", "rm", "nothing-here"},
  };
  for (const std::vector<std::string>& change : changes) {
    r = RunAirlock(change, "x", kOperator);
    EXPECT_NE(r.exit_code, 0) << change[0];
    EXPECT_NE(r.err.find("read-only operator"), std::string::npos) << change[0] << ": " << r.err;
  }
  // Everyone else sees only their own.
  r = RunAirlock({"ls", "--all-tenants"}, "", kAlice);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("only root and read-only operators"), std::string::npos) << r.err;
  r = RunAirlock({"ls", "-a", "--all-tenants", "-q"});  // root sees every tenant too
  EXPECT_NE(r.out.find(hers), std::string::npos) << r.err;
  EXPECT_EQ(RunAirlock({"exec", hers, "--", "true"}, "", kAlice).exit_code, 0);
  RunAirlock({"rm", hers}, "", kAlice);
  RunAirlock({"rm", paused}, "", kMallory);
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
  // Egress connections: her session opens more than her quota of 40 (one airlockd holds them
  // all, so one tenant must not take every descriptor); the extra ones are refused.
  int sink = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in at = {.sin_family = AF_INET, .sin_port = 0, .sin_addr = {htonl(INADDR_LOOPBACK)}};
  ASSERT_EQ(bind(sink, reinterpret_cast<sockaddr*>(&at), sizeof(at)), 0);
  ASSERT_EQ(listen(sink, 512), 0);  // the kernel completes the handshakes; nobody reads
  socklen_t at_size = sizeof(at);
  getsockname(sink, reinterpret_cast<sockaddr*>(&at), &at_size);
  std::string target = "web.test:" + std::to_string(ntohs(at.sin_port));
  ASSERT_EQ(RunAirlock({"network", "allow", own, target}, "", kMallory).exit_code, 0);
  // (A connect the proxy refuses may first look open to the program: it is reset after.)
  r = RunAirlock({"exec", own, "--", "python3", "-c",
                  "import select, socket, time\n"
                  "held = []\n"
                  "for i in range(60):\n"
                  "    try: held.append(socket.create_connection(('web.test', " +
                      std::to_string(ntohs(at.sin_port)) +
                      "), timeout=20))\n"
                      "    except OSError: pass\n"
                      "time.sleep(2)\n"
                      "ended, _, _ = select.select(held, [], [], 1)  # reset: readable\n"
                      "print(len(held) - len(ended))\n"},
                 "", kMallory);
  EXPECT_EQ(r.out, "40\n") << r.err;
  r = RunAirlock({"network", "log", own}, "", kMallory);
  EXPECT_NE(r.out.find("over the tenant's egress connection quota of 40"), std::string::npos)
      << r.out;
  // The 20 refusals are one line, counted: repeating a denial cannot push out other evidence.
  EXPECT_NE(r.out.find("(20 times, the last at "), std::string::npos) << r.out;
  r = RunAirlock({"quota"}, "", kMallory);
  EXPECT_NE(r.out.find("connections"), std::string::npos) << r.out;
  // The other user still gets what the host has, egress included.
  r = RunAirlock({"run", "--allow", target, "--", "python3", "-c",
                  "import socket; socket.create_connection(('web.test', " +
                      std::to_string(ntohs(at.sin_port)) + "), timeout=20); print('fine')"},
                 "", kAlice);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "fine\n");
  close(sink);
  RunAirlock({"rm", own}, "", kMallory);
}

}  // namespace
}  // namespace airlock
