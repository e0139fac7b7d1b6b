// Every VM test binary runs against its own airlockd: a private AIRLOCK_HOME and socket, so a
// daemon left from another build or another suite never answers these tests. Its image store
// starts with the host's tagged images (their files hard-linked, or copied across
// filesystems), so tests may import, remove and prune without touching the host's store; the
// kernel is shared by symlink. The daemon is started by the first `airlock` call (as a user
// would see it) and stopped at the end.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "nlohmann/json.hpp"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/common/unique_fd.h"
#include "tests/test_certs.h"

namespace airlock {
namespace {

std::vector<std::string> DirectoryNames(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    closedir(d);
  }
  return names;
}

// A hard link, or a copy where the two paths are on different filesystems.
void LinkOrCopy(const std::string& from, const std::string& to) {
  if (link(from.c_str(), to.c_str()) == 0) return;
  UniqueFd in(open(from.c_str(), O_RDONLY | O_CLOEXEC));
  UniqueFd out(open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  ASSERT_TRUE(in.valid() && out.valid()) << from << " -> " << to << ": " << strerror(errno);
  ssize_t n;
  while ((n = copy_file_range(in.get(), nullptr, out.get(), nullptr, 1 << 30, 0)) > 0) {
  }
  ASSERT_EQ(n, 0) << from << ": " << strerror(errno);
}

// The host's tagged images, as a store of this test's own.
void MirrorImages(const std::string& host, const std::string& mine) {
  ASSERT_EQ(mkdir(mine.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((mine + "/refs").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((mine + "/blobs").c_str(), 0755), 0);
  for (const std::string& ref : DirectoryNames(host + "/refs")) {
    absl::StatusOr<std::string> text = ReadFileToString(host + "/refs/" + ref, 4096);
    ASSERT_TRUE(text.ok()) << text.status();
    nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
    ASSERT_TRUE(j.is_object() && j["digest"].is_string()) << ref;
    std::string key = j["digest"];
    std::string blob = mine + "/blobs/" + key;
    if (mkdir(blob.c_str(), 0755) == 0) {
      for (const std::string& file : DirectoryNames(host + "/blobs/" + key)) {
        LinkOrCopy(host + "/blobs/" + key + "/" + file, blob + "/" + file);
      }
    }
    ASSERT_TRUE(WriteFileAtomically(mine + "/refs/" + ref, *text, 0644).ok());
  }
}

class PrivateDaemon : public ::testing::Environment {
 public:
  void SetUp() override {
    HostPaths host = DefaultHostPaths();
    char tmpl[] = "/tmp/airlock-vmtest-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    chmod(home_.c_str(), 0755);  // other test users must reach the socket
    MirrorImages(host.images, home_ + "/images");
    ASSERT_EQ(mkdir((home_ + "/kernel").c_str(), 0755), 0);
    char real[4096];
    ASSERT_NE(realpath(host.kernel.c_str(), real), nullptr) << "run scripts/setup.sh first";
    ASSERT_EQ(symlink(real, (home_ + "/kernel/vmlinux").c_str()), 0);
    setenv("AIRLOCK_HOME", home_.c_str(), 1);
    setenv("AIRLOCK_SOCKET", (home_ + "/airlockd.sock").c_str(), 1);
    // Egress tests reach servers on the host's loopback under names of their own (and one
    // name that resolves to an internal address the ceiling does not admit).
    ASSERT_TRUE(
        WriteFileAtomically(home_ + "/egress-ceiling", "allow *:*\nallow 127.0.0.1/32:*\n", 0644)
            .ok());
    ASSERT_TRUE(
        WriteFileAtomically(home_ + "/egress-hosts",
                            "127.0.0.1 web.test other.test git.test api.test api.anthropic.com\n"
                            "10.9.9.9 rebind.test\n",
                            0644)
            .ok());
    setenv("AIRLOCK_EGRESS_CEILING", (home_ + "/egress-ceiling").c_str(), 1);
    // The HTTP gateway on a free port of its own (suites run side by side).
    setenv("AIRLOCK_HTTP_LISTEN", "127.0.0.1:0", 1);
    // Tenants with small quotas (SessionTest, HostileTenantTest, DockerfileTest); others have
    // the defaults.
    ASSERT_TRUE(WriteFileAtomically(home_ + "/quotas",
                                    "tenant uid:61003 sessions=2 running=1 forks=1 pull=1k\n"
                                    "tenant uid:61004 running=1 memory=1g forks=2 connections=40\n"
                                    "tenant uid:61011 images=64m\n",
                                    0644)
                    .ok());
    setenv("AIRLOCK_QUOTA_FILE", (home_ + "/quotas").c_str(), 1);
    // A read-only operator over the socket, and one over TCP (OperatorTest, TlsTest).
    setenv("AIRLOCK_OPERATORS", "uid:61010 cert:dashboard", 1);
    // No warm pool: tests count VMs, boots and restores (SnapshotTest turns it on for its own).
    setenv("AIRLOCK_POOL", "0", 1);
    setenv("AIRLOCK_EGRESS_HOSTS", (home_ + "/egress-hosts").c_str(), 1);
    // Servers that secrets are sent to have certificates from a CA of the test's own, which
    // the daemon trusts as an operator's private CA (tests issue from AIRLOCK_TEST_UPSTREAM).
    std::string upstream = home_ + "/upstream";
    ASSERT_EQ(mkdir(upstream.c_str(), 0700), 0);
    MakeTestCa(upstream);
    setenv("AIRLOCK_UPSTREAM_CA", (upstream + "/ca.pem").c_str(), 1);
    setenv("AIRLOCK_TEST_UPSTREAM", upstream.c_str(), 1);
    // A fake 1Password CLI first on the daemon's PATH: `op read op://test/ITEM/FIELD` prints
    // the file op/ITEM (tests write and rotate it); any other reference fails as op does.
    std::string bin = home_ + "/bin", items = home_ + "/op";
    ASSERT_EQ(mkdir(bin.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(items.c_str(), 0700), 0);
    ASSERT_TRUE(
        WriteFileAtomically(bin + "/op",
                            "#!/bin/sh\n"
                            "[ \"$1\" = read ] || exit 2\n"
                            "item=${2#op://test/}; item=${item%%/*}\n"
                            "if [ -f \"" +
                                items + "/$item\" ]; then cat \"" + items +
                                "/$item\"; exit 0; fi\n"
                                "echo \"[ERROR] could not read secret: $2: no such item\" >&2\n"
                                "exit 1\n",
                            0755)
            .ok());
    setenv("PATH", (bin + ":" + getenv("PATH")).c_str(), 1);
    setenv("AIRLOCK_TEST_OP_ITEMS", items.c_str(), 1);
    // airlockd reads that 1Password's github item for root alone (SecretsTest).
    ASSERT_TRUE(WriteFileAtomically(home_ + "/shared-secrets",
                                    "github op://test/github/token@api.test uid:0\n", 0600)
                    .ok());
    setenv("AIRLOCK_SHARED_SECRETS", (home_ + "/shared-secrets").c_str(), 1);
  }
  void TearDown() override {
    std::ifstream pid_file(home_ + "/airlockd.pid");
    pid_t pid = 0;
    if (pid_file >> pid && pid > 0) {
      kill(pid, SIGTERM);
      for (int i = 0; i < 100 && kill(pid, 0) == 0; ++i) usleep(50000);
    }
    RemoveTree(home_).IgnoreError();
  }

 private:
  std::string home_;
};

::testing::Environment* const kPrivateDaemon =
    ::testing::AddGlobalTestEnvironment(new PrivateDaemon);

}  // namespace
}  // namespace airlock
