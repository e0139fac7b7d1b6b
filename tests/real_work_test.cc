// Real work, as agents do it, must never kill a session: installs from a Debian mirror, a
// Python index and an npm registry (on loopback, through the egress proxy) in a default 512 MiB
// session, ten times in a row, and the session is the same running VM afterwards.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"
#include "tests/loopback_http_server.h"
#include "tests/package_mirror.h"

namespace airlock {
namespace {

// The VM process of a running session, from `airlock ps --json` (0 if not running).
int64_t VmPid(const std::string& id) {
  Result r = RunAirlock({"ps", "--json"});
  nlohmann::json ps = nlohmann::json::parse(r.out, nullptr, false);
  if (!ps.is_array()) return 0;
  for (const nlohmann::json& vm : ps) {
    if (vm.value("session_id", "") == id) return vm.value("pid", int64_t{0});
  }
  return 0;
}

TEST(RealWorkTest, AptAndPipInstallTenTimesInADefaultSessionWithoutAKill) {
  // On a port of its own: suites that run alongside hold loopback's 80 and 443.
  LoopbackHttpServer mirror(DemoIndex(DemoDebianRepository()));
  std::string host = absl::StrCat("web.test:", mirror.port());
  std::string id = CreateSession({"--allow", host});
  int64_t pid = VmPid(id);
  ASSERT_NE(pid, 0) << RunAirlock({"ps", "--json"}).out;
  Result r = RunAirlock({"exec", id, "--", "sh", "-c",
                         absl::StrCat("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/* && "
                                      "echo 'deb [trusted=yes] http://",
                                      host, "/debian ./' > /etc/apt/sources.list.d/mirror.list")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // One command per round, as an agent runs them (and each well within the CLI runner's wait
  // on a busy machine).
  for (int round = 0; round < 10; ++round) {
    r = RunAirlock(
        {"exec", id, "--", "sh", "-c",
         absl::StrCat("set -e\n"
                      "apt-get update -qq\n"
                      "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall "
                      "airlock-hello >/dev/null\n"
                      "airlock-hello\n"
                      "pip install -q --disable-pip-version-check --no-cache-dir "
                      "--force-reinstall --index-url http://",
                      host, "/simple --trusted-host web.test airlock-demo\n",
                      "python3 -c 'import airlock_demo; print(airlock_demo.VALUE)'\n")});
    ASSERT_EQ(r.exit_code, 0) << "round " << round << ": " << r.out << r.err;
    EXPECT_EQ(r.out, "hello from a package\n42\n") << "round " << round;
  }
  // The same VM, still running, still answering: no kill on the way.
  EXPECT_EQ(VmPid(id), pid);
  r = RunAirlock({"exec", id, "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunAirlock({"ls"});
  EXPECT_EQ(r.out.find("failed"), std::string::npos) << r.out;
  RunAirlock({"rm", id});
}

TEST(RealWorkTest, NpmInstallTenTimesInADefaultSessionWithoutAKill) {
  // The registry's packument names its own address, known once the server listens.
  auto paths = std::make_shared<std::map<std::string, std::string>>();
  LoopbackHttpServer registry([paths](const std::string& path) -> std::optional<std::string> {
    auto found = paths->find(path);
    if (found == paths->end()) return std::nullopt;
    return found->second;
  });
  std::string host = absl::StrCat("web.test:", registry.port());
  *paths = DemoNpmRegistry(host);
  // An image with Node.js and npm (scripts/test.sh builds it), in a default 512 MiB session.
  std::string id = CreateSession({"airlock/claude", "--allow", host});
  int64_t pid = VmPid(id);
  ASSERT_NE(pid, 0) << RunAirlock({"ps", "--json"}).out;
  for (int round = 0; round < 10; ++round) {
    Result r =
        RunAirlock({"exec", id, "--", "sh", "-c",
                    absl::StrCat("set -e\n"
                                 "rm -rf /root/app && mkdir /root/app && cd /root/app\n"
                                 "npm install --silent --no-audit --no-fund --cache /tmp/npm-cache "
                                 "--registry http://",
                                 host, "/ airlock-demo-js\n",
                                 "node -e \"console.log(require('airlock-demo-js').VALUE)\"\n")});
    ASSERT_EQ(r.exit_code, 0) << "round " << round << ": " << r.out << r.err;
    EXPECT_EQ(r.out, "42\n") << "round " << round;
  }
  EXPECT_EQ(VmPid(id), pid);
  Result r = RunAirlock({"exec", id, "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  RunAirlock({"rm", id});
}

}  // namespace
}  // namespace airlock
