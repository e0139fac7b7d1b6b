// `airlock run`: one command in a fresh microVM, output streamed, exit code mirrored. It goes
// through airlockd, which creates a session for the command and removes it when it ends.
#include <cstdio>

#include "src/cli/cli_commands.h"
#include "src/cli/daemon_client.h"
#include "src/cli/exec_client.h"
#include "src/cli/run_args.h"
#include "src/cli/workspace_client.h"

namespace airlock {

int RunCommand(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kRunUsage, stdout);
    return 0;
  }
  absl::StatusOr<RunArgs> run = ParseRunArgs(args);
  if (!run.ok()) {
    std::fprintf(stderr, "airlock run: %s\n%s", std::string(run.status().message()).c_str(),
                 kRunUsage);
    return kExitAirlockError;
  }
  v1::ExecStart start;
  start.set_stdin(true);
  for (const std::string& e : run->env) start.add_env(e);
  if (run->tty) {
    if (absl::Status s = UseTerminal(&start); !s.ok()) {
      std::fprintf(stderr, "airlock run: %s\n", std::string(s.message()).c_str());
      return kExitAirlockError;
    }
  }
  if (!PullIfMissing(run->image, "run")) return kExitAirlockError;
  absl::StatusOr<DaemonClient> client = ConnectToDaemon();
  if (!client.ok()) {
    std::fprintf(stderr, "airlock: %s\n", std::string(client.status().message()).c_str());
    return kExitAirlockError;
  }
  start.set_image(run->image);
  for (const std::string& rule : run->allow) start.add_allow(rule);
  for (const std::string& preset : run->allow_presets) start.add_allow_preset(preset);
  for (const std::string& secret : run->secrets) {
    if (absl::Status s = AddSecretBinding(secret, start.mutable_secrets()); !s.ok()) {
      std::fprintf(stderr, "airlock: %s\n", std::string(s.message()).c_str());
      return kExitAirlockError;
    }
  }
  start.mutable_limits()->set_vcpus(run->cpus);
  start.mutable_limits()->set_memory_bytes(static_cast<uint64_t>(run->memory_mib) << 20);
  for (const std::string& a : run->command) start.add_argv(a);
  if (!run->workspace.empty()) {
    absl::StatusOr<std::string> token =
        UploadWorkspace(*client, run->workspace, run->workspace_max);
    if (!token.ok()) {
      std::fprintf(stderr, "airlock: %s\n", std::string(token.status().message()).c_str());
      return kExitAirlockError;
    }
    start.set_workspace(*token);
  }
  start.set_cwd(run->workdir.empty() && !run->workspace.empty() ? "/workspace" : run->workdir);
  start.set_user(run->user);
  start.set_timeout_seconds(run->timeout_seconds);
  return StreamExec(*client, start);
}

}  // namespace airlock
