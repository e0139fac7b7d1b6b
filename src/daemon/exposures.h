// Guest ports as URLs: a session's owner exposes a port (Sessions.Expose, `airlock expose`),
// and the HTTP gateway's connections to it (src/gateway/http_gateway.h) are admitted here and
// relayed to the guest's server like a forwarded port (PortForwarder::Relay).
//
// Admission: the exposure must exist (404 otherwise, the same for every session, so nothing
// tells whether a session exists; every port of a sandbox of the E2B-compatible API is exposed,
// E2bSandboxes::SandboxPort, its traffic token also taken from e2b-traffic-access-token), and,
// unless it is public and airlockd allows public ones, the request must carry its token (401). A
// token in the URL of a browser's GET goes into a cookie of that exposure's host alone and out of
// the address bar (a redirect). Then a place in the tenant's `connections` quota (503), and the
// session: a paused one is resumed by the connection. Each connection is a use of the session that
// gives way to a pause (it is cut; the browser's next request resumes it), keeps it from idling
// while bytes flow, is held to its --net-rate, and is audited when it ends (session.http: client,
// request line, bytes, duration) so that it shows in the session's timeline. Thread-safe.
#ifndef AIRLOCK_DAEMON_EXPOSURES_H_
#define AIRLOCK_DAEMON_EXPOSURES_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/daemon/e2b_sandboxes.h"
#include "src/daemon/fleet_gateway.h"
#include "src/daemon/port_forward.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/gateway/http_gateway.h"

namespace airlock {

// An exposure as its owner sees it: with the URL to open (the token in it, once).
struct ExposureView {
  Exposure exposure;
  std::string url;
  std::string host;  // PORT-ID.DOMAIN
};

class Exposures final : public gateway::GatewayBackend {
 public:
  // allow_public: whether airlockd lets ports be reached without a token (--http-public).
  Exposures(SessionManager* sessions, StateStore* store, bool allow_public)
      : sessions_(sessions),
        store_(store),
        forwarder_(sessions, store),
        allow_public_(allow_public) {}

  // The gateway whose URLs are handed out; before any call. nullptr: airlockd serves none, and
  // Expose says how to start it.
  void set_gateway(const gateway::HttpGateway* gateway) { gateway_ = gateway; }

  // Exposes a port of the caller's running or paused session (again: a new token). Public
  // needs airlockd's --http-public allow.
  [[nodiscard]] absl::StatusOr<ExposureView> Expose(const Principal& who, const std::string& id,
                                                    uint32_t port, bool is_public);
  [[nodiscard]] absl::StatusOr<std::vector<ExposureView>> List(const Principal& who,
                                                               const std::string& id);
  // Ends the exposure and cuts its open connections.
  [[nodiscard]] absl::Status Unexpose(const Principal& who, const std::string& id, uint32_t port);

  void Serve(const gateway::GatewayRequest& request,
             gateway::GatewayConnection& connection) override;
  // The gateway's requests that name no port go to the E2B-compatible API (set_api).
  bool ServeApi(const gateway::GatewayRequest& request,
                gateway::GatewayConnection& connection) override {
    return api_ != nullptr && api_->Serve(request, connection);
  }
  // Before serving; nullptr: no API on the gateway.
  void set_api(E2bSandboxes* api) { api_ = api; }
  // In a fleet: connections for a port of a session another host holds go there (its
  // exposures are there). Before serving; nullptr: every connection is served here.
  void set_fleet(FleetGatewayRelay* fleet) { fleet_ = fleet; }

  // Requests refused for a missing or wrong token since start (they are not audited one by
  // one: anyone who can reach the gateway could fill the audit log).
  uint64_t refused() const { return refused_; }

 private:
  [[nodiscard]] absl::Status CheckPort(uint32_t port) const;
  ExposureView View(const Exposure& e) const;
  // Relays an admitted connection.
  void Relay(const Exposure& e, const gateway::GatewayRequest& request,
             gateway::GatewayConnection& connection);

  SessionManager* sessions_;
  StateStore* store_;
  PortForwarder forwarder_;
  const bool allow_public_;
  const gateway::HttpGateway* gateway_ = nullptr;
  E2bSandboxes* api_ = nullptr;
  FleetGatewayRelay* fleet_ = nullptr;
  std::atomic<uint64_t> refused_{0};
  absl::Mutex mu_;
  // Open connections by exposure (session id, port), to cut when it ends.
  std::map<std::pair<std::string, uint16_t>, std::set<gateway::GatewayConnection*>> open_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_EXPOSURES_H_
