// The CLI's connection to airlockd. Finds the socket ($AIRLOCK_SOCKET or
// /run/airlock/airlockd.sock); if no daemon answers and we are root, starts one (airlockd beside
// this binary, detached, logging to $AIRLOCK_HOME/airlockd.log) and waits for it.
#ifndef AIRLOCK_CLI_DAEMON_CLIENT_H_
#define AIRLOCK_CLI_DAEMON_CLIENT_H_

#include <grpcpp/grpcpp.h>

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
};

[[nodiscard]] absl::StatusOr<DaemonClient> ConnectToDaemon();

std::string DaemonSocketPath();

// A gRPC error as the user should read it.
std::string Describe(const grpc::Status& status);

// For subcommands: connects, or prints why not and returns nullopt.
std::optional<DaemonClient> Connect();
// Prints the daemon's error; returns the exit code 1.
int DaemonError(const grpc::Status& status);
// Prints the problem and the usage; returns the exit code 2.
int Usage(const char* usage, const std::string& problem);

// A --secret argument as the request carries it: the spec, and for env: and file: sources the
// value read here (warning on stderr about a file others can read). Errors say what to fix.
[[nodiscard]] absl::Status AddSecretBinding(
    const std::string& text, google::protobuf::RepeatedPtrField<v1::SecretBinding>* out);

}  // namespace airlock

#endif  // AIRLOCK_CLI_DAEMON_CLIENT_H_
