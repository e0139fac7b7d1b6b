// One TCP connection to a port in a session's guest, relayed between a client (the ForwardPort
// call; the gRPC handler only adapts its stream to PortForwardClient) and the session's channel
// (GuestChannel::ConnectGuestPort). Both directions keep their flow control end to end: bytes
// from the guest are granted back only once the client took them, and the client's bytes go to
// the guest within its window. The connection keeps the session in use (awake), and is audited
// when it ends with its bytes and duration.
#ifndef AIRLOCK_DAEMON_PORT_FORWARD_H_
#define AIRLOCK_DAEMON_PORT_FORWARD_H_

#include <string>

#include "absl/status/status.h"
#include "proto/airlock/v1/airlock.pb.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"

namespace airlock {

// The client end of one forwarded connection: the gRPC stream, or a test's.
class PortForwardClient {
 public:
  virtual ~PortForwardClient() = default;
  // The client's next message after the start; false once it half-closed or went away. Called
  // from one thread.
  virtual bool Read(v1::PortForwardRequest* message) = 0;
  // False: the client is gone. Called from one other thread.
  virtual bool Write(const v1::PortForwardResponse& response) = 0;
  virtual bool Cancelled() = 0;
  // Ends the call from this side (a client that does not half-close after a reset).
  virtual void Cancel() = 0;
};

// Thread-safe: each Run is one connection; runs go on at once.
class PortForwarder {
 public:
  PortForwarder(SessionManager* sessions, StateStore* store) : sessions_(sessions), store_(store) {}

  // Relays one connection for `who` (peer: the client's address, for the audit) until both
  // sides ended (OK) or it was reset (UNAVAILABLE, or ABORTED for a pause, with why; the client
  // was told in a `reset` message first). A bad start is INVALID_ARGUMENT; a session that is
  // not the caller's NOT_FOUND.
  [[nodiscard]] absl::Status Run(const Principal& who, const v1::PortForwardStart& start,
                                 const std::string& peer, PortForwardClient& client);
  // The same over a session already in use by the caller (`live`, from SessionManager::Live),
  // audited as `action` with `what` describing the client.
  [[nodiscard]] absl::Status Relay(const Principal& who, LiveSession& live, uint16_t port,
                                   const std::string& what, PortForwardClient& client,
                                   const std::string& action);

 private:
  SessionManager* sessions_;
  StateStore* store_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_PORT_FORWARD_H_
