// The HTTP gateway in a fleet: a connection that reaches any host's gateway for a session that
// another host runs (or paused last) is passed to that host whole (FleetGateway.Relay over the
// hosts' mutual TLS, proto/airlock/fleet/v1/fleet.proto), which admits and serves it as if the
// client had reached its own gateway: the exposure's token, the E2B sandbox's envd, the
// tenant's connection quota, the resume of a paused session, the audit all stay where the
// session and its exposures are. The host the client reached interprets nothing past the head
// it routed by; bytes pass both ways unchanged, half-closes included.
#ifndef AIRLOCK_DAEMON_FLEET_GATEWAY_H_
#define AIRLOCK_DAEMON_FLEET_GATEWAY_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "proto/airlock/fleet/v1/fleet.grpc.pb.h"
#include "src/daemon/fleet_forward.h"
#include "src/gateway/http_gateway.h"

namespace airlock {

// The side of the host the client reached. Thread-safe.
class FleetGatewayRelay {
 public:
  // Neither is owned; both outlive this.
  explicit FleetGatewayRelay(FleetForwarder* fleet) : fleet_(fleet) {}

  // Passes the connection for session `id` to the host that holds it, when another does, and
  // relays it until that host is done with it: true. False: this host serves it (it runs the
  // session, nobody else holds it, or the connection came from another host already).
  // domain: this gateway's --http-domain.
  bool Relay(const std::string& id, const std::string& domain,
             gateway::GatewayConnection& connection);

 private:
  FleetForwarder* const fleet_;
};

// The side of the host that holds the session: FleetGateway.Relay, for fleet peers only.
class FleetGatewayService final : public fleet::v1::FleetGateway::Service {
 public:
  // peers: the fleet's CA (nullptr: no peer is one, every call is refused). backend: what this
  // host's own gateway hands its connections to. Neither owned; both outlive this.
  FleetGatewayService(const FleetPeers* peers, gateway::GatewayBackend* backend)
      : peers_(peers), backend_(backend) {}

  grpc::Status Relay(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<fleet::v1::GatewayChunk, fleet::v1::GatewayChunk>* stream) override;

 private:
  const FleetPeers* const peers_;
  gateway::GatewayBackend* const backend_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_FLEET_GATEWAY_H_
