#include "src/testing/etcd_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "src/common/file_util.h"
#include "src/common/unique_fd.h"
#include "src/testing/test_util.h"

namespace airlock::testing {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

// A port nothing listens on now. etcd binds it a moment later; if another process took it in
// between, etcd exits and TryStart is called again.
int FreePort() {
  UniqueFd s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr = Loopback(0);
  socklen_t size = sizeof(addr);
  if (!s.valid() || bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(s.get(), reinterpret_cast<sockaddr*>(&addr), &size) != 0) {
    return 0;
  }
  return ntohs(addr.sin_port);
}

bool Accepts(int port) {
  UniqueFd s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr = Loopback(port);
  return s.valid() && connect(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

}  // namespace

EtcdServer::EtcdServer(const std::string& etcd, const std::string& dir) : dir_(dir) {
  if (access(etcd.c_str(), X_OK) != 0) {
    ADD_FAILURE() << "etcd (" << etcd
                  << ") is missing: run scripts/test.sh (it installs Debian's etcd-server) or "
                     "apt-get install etcd-server";
    return;
  }
  EXPECT_TRUE(MakeDirectories(dir, 0700).ok());
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (TryStart(etcd)) return;
  }
  ADD_FAILURE() << "etcd did not start; its output:\n" << Log();
}

bool EtcdServer::TryStart(const std::string& etcd) {
  client_port_ = FreePort();
  int peer_port = FreePort();
  std::string client = absl::StrCat("http://127.0.0.1:", client_port_);
  std::string peer = absl::StrCat("http://127.0.0.1:", peer_port);
  std::string data = absl::StrCat(dir_, "/data");
  std::string log = absl::StrCat(dir_, "/etcd.log");
  std::vector<std::string> argv = {etcd,
                                   "--name",
                                   "test",
                                   "--data-dir",
                                   data,
                                   "--listen-client-urls",
                                   client,
                                   "--advertise-client-urls",
                                   client,
                                   "--listen-peer-urls",
                                   peer,
                                   "--initial-advertise-peer-urls",
                                   peer,
                                   "--initial-cluster",
                                   absl::StrCat("test=", peer),
                                   "--initial-cluster-state",
                                   "new"};
  // No ETCD_* settings from the environment of whoever runs the tests.
  char* no_env[] = {nullptr};
  pid_ = StartLogged(argv, log, no_env);
  if (pid_ < 0) return false;
  for (int i = 0; i < 400; ++i) {
    if (Log().find("ready to serve client requests") != std::string::npos &&
        Accepts(client_port_)) {
      return true;
    }
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) break;
    usleep(25000);
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  (void)RemoveTree(data);  // a fresh cluster for the next try
  return false;
}

EtcdServer::~EtcdServer() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string EtcdServer::Endpoint() const { return absl::StrCat("http://127.0.0.1:", client_port_); }

std::string EtcdServer::Log() const {
  return ReadFileToString(dir_ + "/etcd.log", 64 << 20).value_or("");
}

}  // namespace airlock::testing
