// The options that shape a new session, shared by `run`, `session create` and `agent`: the
// same names, values and checks everywhere (airlockd checks them again; its answer is the
// truth, and its message is what the user sees).
#ifndef AIRLOCK_CLI_SESSION_OPTIONS_H_
#define AIRLOCK_CLI_SESSION_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "proto/airlock/v1/airlock.pb.h"
#include "src/cli/daemon_client.h"

namespace airlock {

struct SessionOptions {
  std::string image;  // empty: the default image
  v1::Limits limits;  // only what was given; airlockd's defaults for the rest
  std::vector<std::string> allow;
  std::vector<std::string> allow_presets;
  std::vector<std::string> secrets;  // NAME=SOURCE@HOST...
  std::string workspace;             // a project directory to capture; empty: none
  uint64_t workspace_max = 0;        // 0: kDefaultWorkspaceMaxBytes
  std::vector<std::string> volumes;  // NAME:/PATH[:ro]
  std::string host;                  // a fleet's host to make it on; empty: the one with room
};

// A --volume value: NAME:/PATH, NAME:/PATH:ro or NAME:/PATH:rw; INVALID_ARGUMENT saying the
// form otherwise.
[[nodiscard]] absl::StatusOr<v1::VolumeMount> ParseVolumeMount(const std::string& spec);

// Adds --cpus, --memory, --pids, --disk, --net-rate, --allow, --allow-preset, --secret,
// --workspace, --workspace-max, --volume; `durable` adds --ttl, --idle-timeout and --host (a
// session that outlives one command).
void AddSessionOptions(CLI::App* app, SessionOptions* options, bool durable);

// The parts of a request the options fill: its limits, egress, secrets (their env:/file:
// values read here) and workspace (uploaded through `client` first).
[[nodiscard]] absl::Status ApplySessionOptions(DaemonClient& client, const SessionOptions& o,
                                               v1::CreateSessionRequest* request);
[[nodiscard]] absl::Status ApplySessionOptions(DaemonClient& client, const SessionOptions& o,
                                               v1::ExecStart* request);

}  // namespace airlock

#endif  // AIRLOCK_CLI_SESSION_OPTIONS_H_
