// The CLI's connection to airlockd. Finds the socket ($AIRLOCK_SOCKET or
// /run/airlock/airlockd.sock); if no daemon answers and we are root, starts one (airlockd beside
// this binary, detached, logging to $AIRLOCK_HOME/airlockd.log) and waits for it.
#ifndef AIRLOCK_CLI_DAEMON_CLIENT_H_
#define AIRLOCK_CLI_DAEMON_CLIENT_H_

#include <errno.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/airlock/v1/airlock.grpc.pb.h"

namespace airlock {

struct DaemonClient {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Sessions::Stub> sessions;
  std::unique_ptr<v1::Vms::Stub> vms;
  std::unique_ptr<v1::Images::Stub> images;
  std::unique_ptr<v1::Network::Stub> network;
  std::unique_ptr<v1::Secrets::Stub> secrets;
  std::unique_ptr<v1::Workspaces::Stub> workspaces;
  std::unique_ptr<v1::Audit::Stub> audit;
  std::unique_ptr<v1::ApiKeys::Stub> api_keys;
  std::unique_ptr<v1::Volumes::Stub> volumes;
};

[[nodiscard]] absl::StatusOr<DaemonClient> ConnectToDaemon();

std::string DaemonSocketPath();

// A gRPC error as the user should read it.
std::string Describe(const grpc::Status& status);

// For subcommands: connects, or prints why not and returns nullopt.
std::optional<DaemonClient> Connect();
// Prints the daemon's error; returns the exit code 1.
int DaemonError(const grpc::Status& status);

// Sends everything fd gives through an upload call (WriteFileStream, Images.Import) and ends
// it: `first` names what is sent; the content follows in pieces of 1 MiB, the last with `last`
// set. A read error cancels the call (airlockd keeps nothing of it) and comes back as
// CANCELLED saying so; otherwise the call's own status.
template <typename Chunk>
grpc::Status UploadFd(int fd, Chunk first, grpc::ClientWriter<Chunk>& stream,
                      grpc::ClientContext& context) {
  Chunk chunk = std::move(first);
  std::string piece(1 << 20, '\0');
  for (;;) {
    size_t have = 0;
    while (have < piece.size()) {
      ssize_t n = read(fd, piece.data() + have, piece.size() - have);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        std::string why = std::string("read the input: ") + std::strerror(errno);
        context.TryCancel();
        stream.Finish().IgnoreError();  // cancelled by us: `why` is what to show
        return grpc::Status(grpc::StatusCode::CANCELLED, why + "; nothing was sent");
      }
      if (n == 0) break;
      have += static_cast<size_t>(n);
    }
    chunk.set_data(piece.data(), have);
    chunk.set_last(have < piece.size());
    if (!stream.Write(chunk) || chunk.last()) break;  // a refusal comes with Finish
    chunk = Chunk();                                  // only the first message names what is sent
  }
  stream.WritesDone();
  return stream.Finish();
}

// A --secret argument as the request carries it: the spec, and for env: and file: sources the
// value read here (warning on stderr about a file others can read). Errors say what to fix.
[[nodiscard]] absl::Status AddSecretBinding(
    const std::string& text, google::protobuf::RepeatedPtrField<v1::SecretBinding>* out);

}  // namespace airlock

#endif  // AIRLOCK_CLI_DAEMON_CLIENT_H_
