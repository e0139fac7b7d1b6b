// Durable sessions through airlockd, as a user drives them from the CLI.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/common/host_paths.h"
#include "tests/cli_runner.h"

namespace airlock {
namespace {

std::string Create(const std::vector<std::string>& extra = {}, RunAs as = {}) {
  std::vector<std::string> args = {"session", "create"};
  args.insert(args.end(), extra.begin(), extra.end());
  Result r = RunAirlock(args, "", as);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return std::string(absl::StripTrailingAsciiWhitespace(r.out));
}

bool Contains(const std::vector<std::string>& rows, const std::string& row) {
  return std::find(rows.begin(), rows.end(), row) != rows.end();
}

TEST(SessionTest, StateLastsBetweenExecsAndLogsOutliveTheVm) {
  std::string id = Create({"--memory", "384m", "--pids", "128"});
  ASSERT_EQ(id.size(), 12u);
  Result r = RunAirlock({"exec", id, "--", "sh", "-c", "echo kept > /root/state; echo wrote"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote\n");
  r = RunAirlock({"exec", id, "--", "cat", "/root/state"});
  EXPECT_EQ(r.out, "kept\n");
  r = RunAirlock({"exec", "-i", id, "--", "sh", "-c", "read line; echo got $line; exit 3"},
                 "input\n");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "got input\n");
  r = RunAirlock({"exec", "--timeout", "1", id, "--", "sleep", "60"});
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
  r = RunAirlock({"exec", id, "--", "true"});  // the session survives its command's timeout
  EXPECT_EQ(r.exit_code, 0);

  r = RunAirlock({"ls"});
  EXPECT_NE(r.out.find(id + "  airlock/bookworm-python   running"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("384MiB  128"), std::string::npos) << r.out;
  r = RunAirlock({"ls", "-q"});
  EXPECT_NE(r.out.find(id + "\n"), std::string::npos);
  r = RunAirlock({"ps"});
  EXPECT_NE(r.out.find(id), std::string::npos);
  EXPECT_NE(r.out.find("tcg"), std::string::npos) << r.out;
  r = RunAirlock({"metrics", id});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(id), std::string::npos) << r.out;
  // The VM process is confined in a host cgroup of its own (v2, or v1 cpu/memory/pids).
  r = RunAirlock({"ps", "--json"});
  size_t at = r.out.find("\"pid\": ");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::ifstream cgroups("/proc/" + std::to_string(std::stoi(r.out.substr(at + 7))) + "/cgroup");
  std::stringstream membership;
  membership << cgroups.rdbuf();
  EXPECT_NE(membership.str().find("/airlock/" + id), std::string::npos) << membership.str();

  r = RunAirlock({"rm", id});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* dir : {"/sys/fs/cgroup/airlock/", "/sys/fs/cgroup/memory/airlock/"}) {
    EXPECT_NE(access((dir + id).c_str(), F_OK), 0) << dir << id << " is left behind";
  }
  r = RunAirlock({"ls", "-a"});
  EXPECT_NE(r.out.find(id + "  airlock/bookworm-python   stopped"), std::string::npos) << r.out;
  r = RunAirlock({"exec", id, "--", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("is stopped"), std::string::npos) << r.err;
  r = RunAirlock({"logs", id});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("out wrote"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("out got input"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--- exit 3"), std::string::npos) << r.out;
  r = RunAirlock({"logs", "-n", "1", id});
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

TEST(SessionTest, FilesOfAnySizeGoInAndOutWholeAndInPlace) {
  std::string id = Create();
  std::string big(9 << 20, '\0');  // more than one message (1 MiB) and than the old 3 MiB cap
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7919) >> 5);
  Result r = RunAirlock({"file", "write", "--mode", "0640", id, "/srv/new/dir/big"}, big);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunAirlock({"file", "read", id, "/srv/new/dir/big"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out == big) << "read back " << r.out.size() << " bytes of " << big.size();
  // A replaced file keeps its owner, takes the mode asked for, and no temporary is left.
  ASSERT_EQ(RunAirlock({"exec", id, "--", "chown", "65534:65534", "/srv/new/dir/big"}).exit_code,
            0);
  ASSERT_EQ(RunAirlock({"file", "write", id, "/srv/new/dir/big"}, "small\n").exit_code, 0);
  r = RunAirlock(
      {"exec", id, "--", "sh", "-c", "stat -c '%u:%g %a %s' /srv/new/dir/big; ls -A /srv/new/dir"});
  EXPECT_EQ(r.out, "65534:65534 644 6\nbig\n");
  // An empty file is a file.
  ASSERT_EQ(RunAirlock({"file", "write", id, "/srv/empty"}, "").exit_code, 0);
  r = RunAirlock({"file", "read", id, "/srv/empty"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  // What the guest refuses comes back with its reason, and nothing is left behind.
  r = RunAirlock({"file", "write", id, "/srv/empty/under-a-file"}, big);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("Not a directory"), std::string::npos) << r.err;
  r = RunAirlock({"file", "read", id, "/srv/new"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("Is a directory"), std::string::npos) << r.err;
  r = RunAirlock({"file", "write", id, "relative"}, "x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("absolute path"), std::string::npos) << r.err;
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);
}

TEST(SessionTest, LogsFollowStreamsUntilTheSessionStops) {
  std::string id = Create();
  Airlock follow({"logs", "-f", id});
  Result r = RunAirlock({"exec", id, "--", "echo", "live line"});
  ASSERT_EQ(r.exit_code, 0);
  ASSERT_TRUE(follow.ReadUntil(
      [&] { return follow.partial().out.find("out live line") != std::string::npos; }));
  RunAirlock({"rm", id});
  Result f = follow.Finish();  // ends by itself once the session stops
  EXPECT_EQ(f.exit_code, 0) << f.err;
}

TEST(SessionTest, UsersCannotSeeEachOthersSessionsAndEveryActionIsAudited) {
  RunAirlock({"ls"});  // root starts the daemon; users cannot
  RunAs alice{61001, 61001}, bob{61002, 61002};
  std::string a = Create({}, alice);
  ASSERT_FALSE(a.empty());
  Result r = RunAirlock({"exec", a, "--", "id", "-u"}, "", alice);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunAirlock({"ls", "-q"}, "", bob);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find(a), std::string::npos);
  r = RunAirlock({"exec", a, "--", "true"}, "", bob);
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("no session " + a), std::string::npos) << r.err;
  r = RunAirlock({"logs", a}, "", bob);
  EXPECT_NE(r.exit_code, 0);
  r = RunAirlock({"rm", a}, "", bob);
  EXPECT_NE(r.exit_code, 0);
  r = RunAirlock({"ls", "-q"}, "", alice);
  EXPECT_NE(r.out.find(a), std::string::npos);
  r = RunAirlock({"file", "read", a, "/etc/hostname"}, "", alice);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunAirlock({"rm", a}, "", alice);
  EXPECT_EQ(r.exit_code, 0) << r.err;

  std::vector<std::string> audit = AuditRows();
  EXPECT_TRUE(Contains(audit, "uid:61001/gid:61001 session.create " + a));
  EXPECT_TRUE(Contains(audit, "uid:61001/gid:61001 session.exec " + a));
  EXPECT_TRUE(Contains(audit, "uid:61001/gid:61001 file.read " + a));
  EXPECT_TRUE(Contains(audit, "uid:61001/gid:61001 session.remove " + a));
  // Bob's tries are on alice's record as denied lookups (once a minute per session), and he
  // changed nothing.
  EXPECT_TRUE(Contains(audit, "uid:61002 session.lookup " + a));
  for (const std::string& row : audit) {
    if (row == "uid:61002 session.lookup " + a) continue;
    EXPECT_EQ(row.rfind("uid:61002", 0), std::string::npos) << "bob changed something: " << row;
  }
}

// uid 61003 has sessions=2 running=1 forks=1 pull=1k (tests/vm_test_env.cc).
TEST(SessionTest, QuotasRefuseWhatATenantMayNotHoldAndNameTheQuota) {
  RunAs carol{61003, 61003};
  RunAirlock({"ls"});  // root starts the daemon; carol cannot
  Result r = RunAirlock({"session", "create"}, "", carol);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string first = std::string(absl::StripTrailingAsciiWhitespace(r.out));
  // A second running VM is over the running quota; the message says which and how much.
  r = RunAirlock({"session", "create"}, "", carol);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("over the running quota of 1: 1 in use, this needs 1 more"),
            std::string::npos)
      << r.err;
  r = RunAirlock({"fork", first, "-n", "2"}, "", carol);
  EXPECT_NE(r.err.find("over the forks quota of 1 per call"), std::string::npos) << r.err;
  // Paused, the first holds no VM: a second session fits, and then the first cannot resume.
  ASSERT_EQ(RunAirlock({"pause", first}, "", carol).exit_code, 0);
  r = RunAirlock({"session", "create"}, "", carol);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string second = std::string(absl::StripTrailingAsciiWhitespace(r.out));
  r = RunAirlock({"exec", first, "--", "true"}, "", carol);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot run now: over the running quota of 1"), std::string::npos) << r.err;
  // Two sessions exist: a fork of the paused one would be a third.
  r = RunAirlock({"fork", first}, "", carol);
  EXPECT_NE(r.err.find("over the sessions quota of 2"), std::string::npos) << r.err;
  r = RunAirlock({"quota"}, "", carol);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tenant uid:61003"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("running    1           1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sessions   2           2"), std::string::npos) << r.out;
  r = RunAirlock({"quota", "--json"}, "", carol);
  EXPECT_NE(r.out.find("\"name\": \"pull\""), std::string::npos) << r.out;
  // Others are not touched by carol's quota.
  r = RunAirlock({"quota"});
  EXPECT_NE(r.out.find("running    "), std::string::npos);
  EXPECT_EQ(r.out.find("uid:61003"), std::string::npos);
  for (const std::string& id : {first, second}) RunAirlock({"rm", id}, "", carol);
  // Each refusal is on the tenant's audit record, naming what was asked.
  std::vector<std::string> audit = AuditRows();
  EXPECT_TRUE(Contains(audit, "uid:61003/gid:61003 quota.refuse session.create"));
  EXPECT_TRUE(Contains(audit, "uid:61003/gid:61003 quota.refuse session.resume " + first));
}

// A line of /proc/PID/status ("Uid:\t700123\t...") without its name.
std::string StatusLine(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + ":", 0) == 0) {
      return std::string(absl::StripAsciiWhitespace(line.substr(name.size() + 1)));
    }
  }
  return "";
}

TEST(SessionTest, EachVmIsJailedUnderAUidOfItsOwn) {
  std::string a = Create(), b = Create();
  pid_t qa = QemuPidOf(a), qb = QemuPidOf(b);
  ASSERT_GT(qa, 0);
  ASSERT_GT(qb, 0);
  uid_t ua = static_cast<uid_t>(std::stoul(StatusLine(qa, "Uid")));
  uid_t ub = static_cast<uid_t>(std::stoul(StatusLine(qb, "Uid")));
  EXPECT_NE(ua, ub);
  EXPECT_NE(ua, 0u);
  EXPECT_NE(ua, 65534u);
  EXPECT_EQ(StatusLine(qa, "CapEff"), "0000000000000000");
  EXPECT_EQ(StatusLine(qa, "NoNewPrivs"), "1");
  // PID 1 of a namespace of its own.
  std::vector<std::string> nspid = absl::StrSplit(StatusLine(qa, "NSpid"), '\t');
  ASSERT_EQ(nspid.size(), 2u) << StatusLine(qa, "NSpid");
  EXPECT_EQ(nspid[1], "1");
  // Its root holds /usr, three devices and its own /proc; nothing else of the host.
  std::string root = "/proc/" + std::to_string(qa) + "/root";
  EXPECT_EQ(access((root + "/usr/bin").c_str(), F_OK), 0);
  for (const char* host_only : {"/etc", "/var", "/root", "/tmp", "/home", "/dev/sda"}) {
    EXPECT_NE(access((root + host_only).c_str(), F_OK), 0) << host_only;
  }
  // With a's uid, b's QEMU can be neither signalled nor read.
  pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(ua, ua, ua) != 0 || setresuid(ua, ua, ua) != 0) {
      _exit(2);
    }
    bool signal_refused = kill(qb, 0) != 0 && errno == EPERM;
    std::string environ = "/proc/" + std::to_string(qb) + "/environ";
    bool read_refused = open(environ.c_str(), O_RDONLY) < 0;
    _exit(signal_refused && read_refused ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // And the sessions work as ever.
  EXPECT_EQ(RunAirlock({"exec", a, "--", "true"}).exit_code, 0);
  for (const std::string& id : {a, b}) RunAirlock({"rm", id});
}

TEST(SessionTest, AKilledVmMarksItsSessionFailedWithTheReason) {
  std::string id = Create();
  pid_t pid = QemuPidOf(id);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  Result r;
  for (int i = 0; i < 50; ++i) {
    r = RunAirlock({"ls", "-a"});
    if (r.out.find(id + "  airlock/bookworm-python   failed") != std::string::npos) break;
    usleep(100000);
  }
  EXPECT_NE(r.out.find("killed by signal 9"), std::string::npos) << r.out;
  // `ls` shows the sessions that live; `ls -a` the ended ones too.
  EXPECT_EQ(RunAirlock({"ls"}).out.find(id), std::string::npos);
  EXPECT_EQ(RunAirlock({"ls", "-q"}).out.find(id), std::string::npos);
  EXPECT_NE(RunAirlock({"ls", "-a", "--json"}).out.find("\"" + id + "\""), std::string::npos);
  r = RunAirlock({"logs", id});
  EXPECT_NE(r.out.find("killed by signal 9"), std::string::npos) << r.out;
  RunAirlock({"rm", id});
}

TEST(SessionTest, WatchShowsWhatHappensToASessionAsItHappens) {
  std::string id = Create();
  Airlock watch({"watch", id, "--json"});
  auto seen = [&](const std::string& text) {
    return [&watch, text] { return watch.partial().out.find(text) != std::string::npos; };
  };
  // Watch sees nothing from before it began: run commands until it is listening.
  // (It may begin between a command's start and its end: then the next command shows both.)
  auto both = [&] {
    return seen("\"argv\":[\"sh\",\"-c\",\"exit 7\"]")() &&
           watch.partial().out.find("\"exit_code\":7", watch.partial().out.find("\"argv\":[")) !=
               std::string::npos;
  };
  bool listening = false;
  for (int i = 0; i < 30 && !listening; ++i) {
    ASSERT_EQ(RunAirlock({"exec", id, "--", "sh", "-c", "exit 7"}).exit_code, 7);
    listening = watch.ReadUntil(both, std::chrono::seconds(1)) && both();
  }
  ASSERT_TRUE(listening) << watch.partial().out << watch.partial().err;
  EXPECT_TRUE(seen("\"kind\":\"exec_start\"")()) << watch.partial().out;
  EXPECT_TRUE(seen("\"argv\":[\"sh\",\"-c\",\"exit 7\"]")()) << watch.partial().out;
  ASSERT_EQ(RunAirlock({"pause", id}).exit_code, 0);
  EXPECT_TRUE(watch.ReadUntil(seen("\"state\":\"paused\"")) && seen("\"state\":\"paused\"")())
      << watch.partial().out;
  ASSERT_EQ(RunAirlock({"rm", id}).exit_code, 0);
  EXPECT_TRUE(watch.ReadUntil(seen("\"state\":\"stopped\"")) && seen("\"state\":\"stopped\"")())
      << watch.partial().out;
  // Every line is one JSON object about this session.
  for (absl::string_view line : absl::StrSplit(watch.partial().out, '\n', absl::SkipEmpty())) {
    EXPECT_NE(line.find("\"session_id\":\"" + id + "\""), absl::string_view::npos) << line;
  }
  kill(watch.pid(), SIGINT);
  watch.Finish();
  Result bad = RunAirlock({"watch", "not-an-id"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("12 lowercase hex digits"), std::string::npos) << bad.err;
}

TEST(SessionTest, TheTtlEndsTheSession) {
  std::string id = Create({"--ttl", "3s"});
  Result r;
  for (int i = 0; i < 100; ++i) {
    r = RunAirlock({"ls", "-a"});
    if (r.out.find(id + "  airlock/bookworm-python   stopped") != std::string::npos) break;
    usleep(100000);
  }
  EXPECT_NE(r.out.find("time to live of 3s ran out"), std::string::npos) << r.out;
  r = RunAirlock({"exec", id, "--", "true"});
  EXPECT_EQ(r.exit_code, 125);
}

TEST(SessionTest, AClientThatGoesAwayTakesItsCommandButNotTheSession) {
  std::string id = Create();
  {
    Airlock exec({"exec", id, "--", "sh", "-c", "echo started; exec sleep 300"});
    ASSERT_TRUE(exec.ReadUntil([&] { return exec.partial().out == "started\n"; }));
    kill(exec.pid(), SIGKILL);
    exec.Finish();
  }
  const char* probe =
      "import os, time\n"
      "def sleeping():\n"
      "  return [p for p in os.listdir('/proc') if p.isdigit() and\n"
      "          open('/proc/%s/comm' % p).read().strip() == 'sleep']\n"
      "for _ in range(50):\n"
      "  if not sleeping(): break\n"
      "  time.sleep(0.1)\n"
      "print('sleepers', len(sleeping()))\n";
  Result r = RunAirlock({"exec", id, "--", "python3", "-c", probe});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sleepers 0\n");
  RunAirlock({"rm", id});
}

TEST(SessionTest, AirlockdRefusesTcpWithoutMutualTls) {
  std::string daemon = std::string(AIRLOCK_BINARY);
  daemon = daemon.substr(0, daemon.rfind('/')) + "/airlockd";
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], 2);
    execl(daemon.c_str(), daemon.c_str(), "--listen-tcp", "127.0.0.1:0", "--tls-cert", "x.pem",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  char buf[4096];
  ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
  EXPECT_NE(std::string(buf, n > 0 ? n : 0).find("without TLS and a way to know each caller"),
            std::string::npos);
}

TEST(SessionTest, ClearErrors) {
  Result r = RunAirlock({"exec", "0123456789ab", "--", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("no session 0123456789ab"), std::string::npos) << r.err;
  r = RunAirlock({"exec", "nosuchsession", "--", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("\"nosuchsession\" is not a session id"), std::string::npos) << r.err;
  r = RunAirlock({"session", "create", "--memory", "lots"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("512m"), std::string::npos) << r.err;
  r = RunAirlock({"session", "create", "--memory", "64m"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("between 128 MiB"), std::string::npos) << r.err;
  // The limits are airlockd's to check (one place for CLI, MCP and SDKs); the CLI shows its answer.
  r = RunAirlock({"session", "create", "--cpus", "65"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("at most 64 vCPUs"), std::string::npos) << r.err;
  r = RunAirlock({"session", "create", "--pids", "8"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("between 16 and 1000000"), std::string::npos) << r.err;
  r = RunAirlock({"session", "create", "no/such-image"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not in the store"), std::string::npos) << r.err;
  r = RunAirlock({"exec", "x"});
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace airlock
