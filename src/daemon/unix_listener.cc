#include "src/daemon/unix_listener.h"

#include <grp.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"

namespace airlock {

void PeerRegistry::Register(int fd, const Principal& who) {
  absl::MutexLock lock(&mu_);
  peers_[fd] = who;
}

std::optional<Principal> PeerRegistry::Lookup(const std::string& peer) const {
  int fd;
  if (peer.rfind("fd:", 0) != 0 || !absl::SimpleAtoi(peer.substr(3), &fd)) return std::nullopt;
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(fd);
  if (it == peers_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Bind(const std::string& path,
                                                                 const std::string& group_name) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  if (absl::Status s = MakeDirectories(DirName(path), 0755); !s.ok()) return s;
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket");
  memcpy(addr.sun_path, path.c_str(), path.size());
  // A socket left by a daemon that died: replace it, unless a daemon still answers there.
  UniqueFd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    return absl::AlreadyExistsError(absl::StrCat("another airlockd is serving ", path));
  }
  unlink(path.c_str());
  mode_t old = umask(0177);
  int r = bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  umask(old);
  if (r != 0) return ErrnoStatus("bind", path);
  if (struct group* g = getgrnam(group_name.c_str())) {
    if (chown(path.c_str(), 0, g->gr_gid) != 0 || chmod(path.c_str(), 0660) != 0) {
      return ErrnoStatus("set permissions of", path);
    }
  }
  if (listen(fd.get(), 128) != 0) return ErrnoStatus("listen", path);
  return std::unique_ptr<UnixListener>(new UnixListener(std::move(fd), path));
}

UnixListener::~UnixListener() { Stop(); }

void UnixListener::Serve(grpc::Server* server, PeerRegistry* registry) {
  thread_ = std::thread([this, server, registry] {
    while (!stopping_) {
      pollfd p = {fd_.get(), POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      int conn = accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (conn < 0) continue;
      ucred cred = {};
      socklen_t len = sizeof(cred);
      if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        close(conn);
        continue;
      }
      registry->Register(conn, Principal{cred.uid, cred.gid});
      grpc::AddInsecureChannelFromFd(server, conn);  // gRPC owns conn from here
    }
  });
}

void UnixListener::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_.valid()) {
    fd_.reset();
    unlink(path_.c_str());
  }
}

}  // namespace airlock
