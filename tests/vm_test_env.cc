// Every VM test binary runs against its own airlockd: a private AIRLOCK_HOME (sharing the
// host's images and kernel by symlink) and socket, so a daemon left from another build or
// another suite never answers these tests. The daemon is started by the first `airlock` call
// (as a user would see it) and stopped at the end.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "src/common/file_util.h"
#include "src/common/host_paths.h"

namespace airlock {
namespace {

class PrivateDaemon : public ::testing::Environment {
 public:
  void SetUp() override {
    HostPaths host = DefaultHostPaths();
    char tmpl[] = "/tmp/airlock-vmtest-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    chmod(home_.c_str(), 0755);  // other test users must reach the socket
    ASSERT_EQ(symlink(host.images.c_str(), (home_ + "/images").c_str()), 0);
    ASSERT_EQ(mkdir((home_ + "/kernel").c_str(), 0755), 0);
    char real[4096];
    ASSERT_NE(realpath(host.kernel.c_str(), real), nullptr) << "run scripts/setup.sh first";
    ASSERT_EQ(symlink(real, (home_ + "/kernel/vmlinux").c_str()), 0);
    setenv("AIRLOCK_HOME", home_.c_str(), 1);
    setenv("AIRLOCK_SOCKET", (home_ + "/airlockd.sock").c_str(), 1);
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
