#include "src/daemon/fleet_gateway.h"

#include <sys/socket.h>

#include <cerrno>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "src/common/file_util.h"
#include "src/common/log.h"
#include "src/common/unique_fd.h"
#include "src/gateway/gateway_request.h"

namespace airlock {
namespace {

using fleet::v1::GatewayChunk;

// What a start may carry: the head the gateway read (kMaxGatewayHeadBytes) and what came with
// it, well within one gRPC message.
constexpr size_t kMaxStartBytes = 1 << 20;
constexpr size_t kMaxPeerBytes = 256;
constexpr size_t kMaxDomainBytes = 253;
constexpr size_t kChunkBytes = 64 * 1024;
// How long the owner waits, after the connection ended on its side, for the caller to close its
// half of the call.
constexpr absl::Duration kCloseGrace = absl::Seconds(2);

}  // namespace

bool FleetGatewayRelay::Relay(const std::string& id, const std::string& domain,
                              gateway::GatewayConnection& connection) {
  if (fleet_ == nullptr || !connection.via().empty()) return false;
  std::string host;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> route = fleet_->GatewayRouteFor(id, &host);
  if (!route.ok()) {
    connection.Respond(502, "Bad Gateway", route.status().message());
    return true;
  }
  if (*route == nullptr) return false;
  fleet::v1::FleetGateway::Stub stub(*std::move(route));
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<GatewayChunk, GatewayChunk>> stream =
      stub.Relay(&context);
  GatewayChunk first;
  fleet::v1::GatewayStart* start = first.mutable_start();
  start->set_head(connection.TakeBuffered());
  start->set_peer(connection.peer());
  start->set_tls(connection.tls());
  start->set_domain(domain);
  // The client's bytes go up on a thread of their own, its end as `eof`; the owner's come down
  // here until it is done with the connection.
  std::thread up([&] {
    if (stream->Write(first)) {
      char buf[kChunkBytes];
      for (;;) {
        ssize_t n = connection.Read(buf, sizeof buf);
        GatewayChunk chunk;
        if (n > 0) {
          chunk.set_data(buf, static_cast<size_t>(n));
        } else {
          chunk.set_eof(true);
        }
        if (!stream->Write(chunk) || n <= 0) break;
      }
    }
    stream->WritesDone();
  });
  GatewayChunk chunk;
  while (stream->Read(&chunk)) {
    if (chunk.kind_case() == GatewayChunk::kData) {
      if (!connection.Write(chunk.data())) {
        context.TryCancel();  // the client went away
        break;
      }
    } else if (chunk.kind_case() == GatewayChunk::kEof) {
      connection.EndWrite();  // the client reads the end; the owner may still read it
    }
  }
  // The owner is done with the connection: so is this host.
  connection.StopReading();
  up.join();
  grpc::Status status = stream->Finish();
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    LogDebug(
        absl::StrCat("gateway: session ", id, " at host ", host, ": ", status.error_message()));
    if (!connection.wrote()) {
      connection.Respond(
          502, "Bad Gateway",
          absl::StrCat("session ", id, " runs on host ", host,
                       ", which could not take the connection: ", status.error_message()));
    }
  }
  return true;
}

grpc::Status FleetGatewayService::Relay(
    grpc::ServerContext* context, grpc::ServerReaderWriter<GatewayChunk, GatewayChunk>* stream) {
  std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
  std::optional<std::string> host =
      peers_ != nullptr && auth ? peers_->HostOf(*auth) : std::optional<std::string>();
  if (!host.has_value()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "FleetGateway takes connections from the hosts of this fleet only (a "
                        "certificate its --fleet-ca signed)");
  }
  GatewayChunk first;
  if (!stream->Read(&first) || first.kind_case() != GatewayChunk::kStart) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "FleetGateway.Relay takes its start first");
  }
  const fleet::v1::GatewayStart& start = first.start();
  if (start.head().size() > kMaxStartBytes || start.peer().size() > kMaxPeerBytes ||
      start.domain().size() > kMaxDomainBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "FleetGateway.Relay's start is over its limits");
  }
  gateway::GatewayRequest request;
  std::string error;
  if (gateway::ParseGatewayRequest(start.head(), start.domain(), &request, &error) !=
      gateway::GatewayParse::kDone) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("FleetGateway.Relay's head is not one a gateway routes: ", error));
  }
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("socketpair: ", strerror(errno)));
  }
  UniqueFd ours(pair[1]);
  // The backend serves the connection as its own gateway would, on the other end.
  std::thread serve([&, theirs = UniqueFd(pair[0])]() mutable {
    gateway::GatewayConnection connection(
        std::move(theirs), absl::StrCat(start.peer(), " at host ", *host, "'s gateway"),
        start.head(), start.tls());
    connection.set_via(*host);
    if (!request.session_id.empty()) {
      backend_->Serve(request, connection);
    } else if (!backend_->ServeApi(request, connection)) {
      connection.Respond(404, "Not Found", "no session's port is named");
    }
  });
  // The caller's bytes into the connection, on a thread of their own.
  absl::Notification up_done;
  std::thread up([&] {
    GatewayChunk chunk;
    bool ended = false;
    while (stream->Read(&chunk)) {
      if (chunk.kind_case() == GatewayChunk::kData) {
        if (!WriteAll(ours.get(), chunk.data()).ok()) break;  // (SIGPIPE is ignored)
      } else if (chunk.kind_case() == GatewayChunk::kEof) {
        shutdown(ours.get(), SHUT_WR);
        ended = true;
      }
    }
    // The caller went away without saying it was done: the connection ends here too.
    if (!ended) shutdown(ours.get(), SHUT_RDWR);
    up_done.Notify();
  });
  // The connection's bytes to the caller; its end (the server's half-close, or the whole
  // connection's) as `eof`, after which the backend may still read the client's.
  char buf[kChunkBytes];
  for (;;) {
    ssize_t n = recv(ours.get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    GatewayChunk chunk;
    if (n > 0) {
      chunk.set_data(buf, static_cast<size_t>(n));
    } else {
      chunk.set_eof(true);
    }
    if (!stream->Write(chunk)) {
      shutdown(ours.get(), SHUT_RDWR);  // the caller is gone: so is the connection
      break;
    }
    if (n <= 0) break;
  }
  serve.join();
  // A caller half-closes once its client is done; one that does not is cut off once the
  // backend is done too.
  if (!up_done.WaitForNotificationWithTimeout(kCloseGrace)) context->TryCancel();
  up.join();
  return grpc::Status::OK;
}

}  // namespace airlock
