#include "src/testing/local_registry.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "src/common/file_util.h"

namespace airlock::testing {
namespace {

bool Listening(int port) {
  int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to = {};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(static_cast<uint16_t>(port));
  bool up = connect(c, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0;
  close(c);
  return up;
}

}  // namespace

LocalRegistry::LocalRegistry(const std::string& dir) : dir_(dir) {
  EXPECT_TRUE(MakeDirectories(dir, 0755).ok());
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  close(s);
  std::string config = absl::StrCat(
      "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: ", dir,
      "/data\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:", port_, "\n");
  std::string config_path = dir + "/config.yml";
  EXPECT_TRUE(WriteFileAtomically(config_path, config, 0644).ok());
  pid_ = fork();
  if (pid_ == 0) {
    int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    execl("/usr/bin/docker-registry", "docker-registry", "serve", config_path.c_str(), nullptr);
    _exit(127);
  }
  for (int i = 0; i < 200; ++i) {
    if (Listening(port_)) return;
    usleep(50000);
  }
  ADD_FAILURE() << "docker-registry did not start (is it installed? run scripts/setup.sh)";
}

LocalRegistry::~LocalRegistry() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
}

std::string LocalRegistry::Host() const { return absl::StrCat("localhost:", port_); }

std::string LocalRegistry::BlobFile(const std::string& digest) const {
  std::string hex = digest.substr(7);
  return absl::StrCat(dir_, "/data/docker/registry/v2/blobs/sha256/", hex.substr(0, 2), "/", hex,
                      "/data");
}

}  // namespace airlock::testing
