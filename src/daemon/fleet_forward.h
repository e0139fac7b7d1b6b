// Forwarding in a fleet: a call for a session that another live host runs is passed to that host
// over mutual TLS between hosts, with the caller's principal, and answered from there; the
// owner checks the principal as it checks its own callers.
//
// Hosts reach each other at `airlockd --fleet-listen HOST:PORT` (published in etcd with the
// host's capacity) with `--fleet-cert`/`--fleet-key`: a certificate that the fleet's own CA
// (`--fleet-ca`) signed and that names the host id (CN and DNS subjectAltName). A call made with
// such a certificate carries `airlock-fleet-caller` (EncodeFleetCaller): the principal it acts
// for. Only a peer whose certificate the fleet CA signed may name one (FleetPeers); a tenant's
// client certificate comes from another CA and names only itself. A forwarded call is never
// forwarded again: the owner that lost the session meanwhile answers it as if called directly.
#ifndef AIRLOCK_DAEMON_FLEET_FORWARD_H_
#define AIRLOCK_DAEMON_FLEET_FORWARD_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "src/daemon/records.h"
#include "src/providers/host_provider.h"

namespace airlock {

class FleetScaler;

class SessionHandoff;
class SessionManager;

// The metadata key of a forwarded call's principal.
inline constexpr char kFleetCallerHeader[] = "airlock-fleet-caller";

// A principal (and the groups its bearer token named) as a forwarded call carries it: JSON,
// printable ASCII. Decode refuses anything else, or more than 8 KiB.
std::string EncodeFleetCaller(const Principal& who, const std::vector<std::string>& groups);
absl::StatusOr<Principal> DecodeFleetCaller(std::string_view text,
                                            std::vector<std::string>* groups);

// The fleet CA's view of a call's peer: the host id its certificate names, if the fleet CA
// signed it. Thread-safe.
class FleetPeers {
 public:
  // ca_pem: the fleet CA's certificate(s).
  static absl::StatusOr<std::unique_ptr<FleetPeers>> Create(const std::string& ca_pem);
  ~FleetPeers();
  // The host id of the peer, when its verified certificate chains to the fleet CA.
  std::optional<std::string> HostOf(const grpc::AuthContext& auth) const;

 private:
  FleetPeers() = default;
  struct Store;
  std::unique_ptr<Store> store_;
};

// Where a call for a session goes. Thread-safe.
class FleetForwarder {
 public:
  struct Credentials {
    std::string cert_pem, key_pem, ca_pem;
  };
  // None is owned; each outlives this. hosts: the fleet's (FleetHosts).
  FleetForwarder(SessionHandoff* handoff, SessionManager* sessions, providers::HostProvider* hosts,
                 providers::PlacementPolicy policy, Credentials credentials);

  // Where a new session of this shape is made: nullptr for this host, else the channel to the
  // host `asked` names or, when it names none, the one placement chose (providers::ChooseHost
  // over the hosts' published capacity and what their running sessions hold, from the fleet's
  // index; a host of the pool started for it when none has room). `here`: it must be made on this
  // host (its workspace upload and volumes are here).
  // `host` is set to the host chosen.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> PlaceCreate(const std::string& asked,
                                                             const providers::VmPlacement& vm,
                                                             bool here, std::string* host);
  // While the handle lives, a create this host passed on is under way on `host`: a host of the
  // pool is not released meanwhile (its new session holds no claim yet).
  std::shared_ptr<void> CreateUnderWay(const std::string& host);
  // With a host pool (airlockd --host-pool): a create no host has room for starts a host of the
  // pool and goes there. Not owned; outlives this.
  void set_scaler(FleetScaler* scaler) { scaler_ = scaler; }

  // The channel to the host that runs session `id` when the call should go there: another live
  // host owns it, and `who` did not come forwarded. nullptr: serve it here (this host runs it,
  // nobody does, or etcd cannot say: the local path then says why). An error when the owner
  // cannot be reached: it publishes no address.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> RouteFor(const Principal& who,
                                                          const std::string& id);
  // The same for a connection of the HTTP gateway, whose caller is known only to the host that
  // holds the exposure: the host that runs session `id`, or else the live host that paused it
  // last (it keeps the session's exposures and resumes it). nullptr: this host serves it. `host`
  // is set to the host's id.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> GatewayRouteFor(const std::string& id,
                                                                 std::string* host);
  // A client context for the forwarded call: the caller's principal, the call's deadline.
  static std::unique_ptr<grpc::ClientContext> ContextFor(grpc::ServerContext* context,
                                                         const Principal& who);

 private:
  // The channel to `owner`, which holds session `id`; nullptr when it is down.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> ChannelToHostOf(const std::string& id,
                                                                 const std::string& owner);
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& host, const std::string& address);

  SessionHandoff* const handoff_;
  SessionManager* const sessions_;
  providers::HostProvider* const hosts_;
  const providers::PlacementPolicy policy_;
  const Credentials credentials_;
  FleetScaler* scaler_ = nullptr;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

// Cancels `client` once `server` is cancelled (the caller went away), until destroyed.
class CancelPropagation {
 public:
  CancelPropagation(grpc::ServerContext* server, grpc::ClientContext* client);
  ~CancelPropagation();

 private:
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

namespace fleet_internal {

// `relay` moves a call's messages to the host at `channel` over the stub with the client context
// (the caller's principal and deadline, cancelled when the caller goes away).
template <typename Stub, typename Relay>
grpc::Status RelayTo(std::shared_ptr<grpc::Channel> channel, grpc::ServerContext* context,
                     const Principal& who, Relay relay) {
  Stub stub(std::move(channel));
  std::unique_ptr<grpc::ClientContext> client = FleetForwarder::ContextFor(context, who);
  CancelPropagation cancel(context, client.get());
  return relay(stub, client.get());
}

// The call passed to the host that runs session `id` when another does (RelayTo); nullopt: this
// host serves it.
template <typename Stub, typename Relay>
std::optional<grpc::Status> Forward(FleetForwarder* fleet, grpc::ServerContext* context,
                                    const Principal& who, const std::string& id, Relay relay) {
  if (fleet == nullptr) return std::nullopt;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> route = fleet->RouteFor(who, id);
  if (!route.ok()) {
    return grpc::Status(static_cast<grpc::StatusCode>(route.status().code()),
                        std::string(route.status().message()));
  }
  if (*route == nullptr) return std::nullopt;
  return RelayTo<Stub>(*std::move(route), context, who, relay);
}

}  // namespace fleet_internal

// A call for session `id`, passed to the host that runs it when another does (RouteFor) and
// relayed both ways: its status; nullopt when this host serves it. `method` is the stub's; the
// caller's messages (`first`, the one the handler read to learn the session, then the rest)
// go up as they come, the owner's come down. One overload per shape of call.
// A unary call passed to the host at `channel`: its status.
template <typename Stub, typename Request, typename Response>
grpc::Status ForwardTo(std::shared_ptr<grpc::Channel> channel, grpc::ServerContext* context,
                       const Principal& who,
                       grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                                    Response*),
                       const Request& request, Response* response) {
  return fleet_internal::RelayTo<Stub>(std::move(channel), context, who,
                                       [&](Stub& stub, grpc::ClientContext* client) {
                                         return (stub.*method)(client, request, response);
                                       });
}

template <typename Stub, typename Request, typename Response>
std::optional<grpc::Status> ForwardElsewhere(FleetForwarder* fleet, grpc::ServerContext* context,
                                             const Principal& who, const std::string& id,
                                             grpc::Status (Stub::*method)(grpc::ClientContext*,
                                                                          const Request&,
                                                                          Response*),
                                             const Request& request, Response* response) {
  return fleet_internal::Forward<Stub>(fleet, context, who, id,
                                       [&](Stub& stub, grpc::ClientContext* client) {
                                         return (stub.*method)(client, request, response);
                                       });
}

template <typename Stub, typename Request, typename Response>
std::optional<grpc::Status> ForwardElsewhere(
    FleetForwarder* fleet, grpc::ServerContext* context, const Principal& who,
    const std::string& id,
    std::unique_ptr<grpc::ClientReader<Response>> (Stub::*method)(grpc::ClientContext*,
                                                                  const Request&),
    const Request& request, grpc::ServerWriter<Response>* writer) {
  return fleet_internal::Forward<Stub>(
      fleet, context, who, id, [&](Stub& stub, grpc::ClientContext* client) {
        std::unique_ptr<grpc::ClientReader<Response>> reader = (stub.*method)(client, request);
        Response message;
        while (reader->Read(&message)) {
          if (!writer->Write(message)) {
            client->TryCancel();
            break;
          }
        }
        return reader->Finish();
      });
}

template <typename Stub, typename Request, typename Response>
std::optional<grpc::Status> ForwardElsewhere(
    FleetForwarder* fleet, grpc::ServerContext* context, const Principal& who,
    const std::string& id,
    std::unique_ptr<grpc::ClientWriter<Request>> (Stub::*method)(grpc::ClientContext*, Response*),
    const Request& first, grpc::ServerReader<Request>* reader, Response* response) {
  return fleet_internal::Forward<Stub>(
      fleet, context, who, id, [&](Stub& stub, grpc::ClientContext* client) {
        std::unique_ptr<grpc::ClientWriter<Request>> writer = (stub.*method)(client, response);
        Request message = first;
        bool more = true;
        do {
          if (!writer->Write(message)) break;
        } while ((more = reader->Read(&message)));
        if (!more) writer->WritesDone();
        return writer->Finish();
      });
}

template <typename Stub, typename Request, typename Response>
std::optional<grpc::Status> ForwardElsewhere(
    FleetForwarder* fleet, grpc::ServerContext* context, const Principal& who,
    const std::string& id,
    std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> (Stub::*method)(
        grpc::ClientContext*),
    const Request& first, grpc::ServerReaderWriter<Response, Request>* stream) {
  return fleet_internal::Forward<Stub>(
      fleet, context, who, id, [&](Stub& stub, grpc::ClientContext* client) {
        std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> upstream =
            (stub.*method)(client);
        // The caller's messages go up on a thread of their own; the owner's come down here.
        absl::Notification up_done;
        std::thread up([&] {
          Request message = first;
          bool more = true;
          do {
            if (!upstream->Write(message)) break;
          } while ((more = stream->Read(&message)));
          if (!more) upstream->WritesDone();
          up_done.Notify();
        });
        Response message;
        while (upstream->Read(&message)) {
          if (!stream->Write(message)) {
            client->TryCancel();
            break;
          }
        }
        // A well-behaved caller half-closes after the end; one that does not is cut off.
        if (!up_done.WaitForNotificationWithTimeout(absl::Seconds(2))) context->TryCancel();
        up.join();
        return upstream->Finish();
      });
}

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_FLEET_FORWARD_H_
