// airlockd's Unix socket: accepts connections itself so that it can read each peer's
// credentials (SO_PEERCRED: uid and gid, never the pid) before handing the connection to gRPC.
// Calls then resolve their Principal from ServerContext::peer() ("fd:N") through PeerRegistry.
#ifndef AIRLOCK_DAEMON_UNIX_LISTENER_H_
#define AIRLOCK_DAEMON_UNIX_LISTENER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/common/unique_fd.h"
#include "src/daemon/operators.h"
#include "src/daemon/records.h"

namespace airlock {

// Credentials of each connection gRPC serves, by descriptor. A descriptor stays open (and so
// cannot be reused by another connection) while any call on it runs. Thread-safe.
class OidcAuthenticator;
class FleetPeers;

class PeerRegistry {
 public:
  void Register(int fd, const Principal& who);
  // The principal behind a gRPC peer string "fd:N"; nullopt for anything else.
  std::optional<Principal> Lookup(const std::string& peer) const;
  // Callers over TCP may name themselves with bearer tokens it verifies (set before serving).
  void set_oidc(std::shared_ptr<OidcAuthenticator> oidc) { oidc_ = std::move(oidc); }
  OidcAuthenticator* oidc() const { return oidc_.get(); }
  // The read-only operators (operators.h; set before serving).
  void set_operators(OperatorList operators) { operators_ = std::move(operators); }
  const OperatorList& operators() const { return operators_; }
  // The fleet's CA (fleet_forward.h): a peer it signed may forward calls for others (set before
  // serving; none outside a fleet that forwards).
  void set_fleet(std::shared_ptr<const FleetPeers> fleet) { fleet_ = std::move(fleet); }
  const FleetPeers* fleet() const { return fleet_.get(); }

 private:
  mutable absl::Mutex mu_;
  std::map<int, Principal> peers_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<OidcAuthenticator> oidc_;
  OperatorList operators_;
  std::shared_ptr<const FleetPeers> fleet_;
};

class UnixListener {
 public:
  // Binds path (replacing a stale socket), mode 0660 with group `group` if it exists (else
  // 0600: root only), and listens.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<UnixListener>> Bind(const std::string& path,
                                                                          const std::string& group);
  ~UnixListener();
  // Accepts connections until Stop(), handing each to server.
  void Serve(grpc::Server* server, PeerRegistry* registry);
  void Stop();

 private:
  UnixListener(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::string path_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_UNIX_LISTENER_H_
