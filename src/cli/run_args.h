// The arguments of `airlock run`. Client input: every mistake is a usage error whose message
// says what to do.
#ifndef AIRLOCK_CLI_RUN_ARGS_H_
#define AIRLOCK_CLI_RUN_ARGS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "src/cli/cli_app.h"
#include "src/cli/session_options.h"

namespace airlock {

struct RunArgs {
  SessionOptions session;            // image, limits, egress, secrets, workspace
  std::vector<std::string> command;  // argv in the guest
  std::vector<std::string> env;      // KEY=VALUE, in order given
  std::string workdir;               // empty: /, or /workspace with a workspace
  std::string user;                  // empty: the image's User, else root
  double timeout_seconds = 0;        // 0: none
  bool tty = false;                  // on a terminal in the guest (-t)
  bool interactive = false;          // -i: accepted for docker's habit; run always passes stdin
};

// Adds `run` to the command tree; its options fill *out, and `run` runs it once parsed.
CLI::App* AddRunOptions(Cli& cli, RunArgs* out, std::function<int()> run);

// What the options alone cannot check: there is something to run.
[[nodiscard]] absl::Status CheckRunArgs(const RunArgs& args);

// -e/--env for run and exec: KEY=VALUE, or KEY alone to copy it from here (left out when unset
// here, as docker does).
CLI::Option* AddEnvOption(CLI::App* app, std::vector<std::string>* env);
// -u/--user for run and exec.
CLI::Option* AddUserOption(CLI::App* app, std::string* user);
// -w/--workdir for run and exec: an absolute path in the guest.
CLI::Option* AddWorkdirOption(CLI::App* app, std::string* workdir);

}  // namespace airlock

#endif  // AIRLOCK_CLI_RUN_ARGS_H_
