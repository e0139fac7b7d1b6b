// `airlock run`: one command in a fresh microVM, output streamed, exit code mirrored. It goes
// through airlockd, which creates a session for the command and removes it when it ends.
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "src/cli/cli_commands.h"
#include "src/cli/daemon_client.h"
#include "src/cli/exec_client.h"
#include "src/cli/run_args.h"

namespace airlock {
namespace {

int Run(const RunArgs& run) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "airlock run: %s\n", std::string(s.message()).c_str());
    return kExitAirlockError;
  };
  if (absl::Status s = CheckRunArgs(run); !s.ok()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat(s.message(), "\nusage: airlock run [OPTIONS] [IMAGE] -- COMMAND [ARG...]")));
  }
  v1::ExecStart start;
  start.set_stdin(true);
  for (const std::string& e : run.env) start.add_env(e);
  if (run.tty) {
    if (absl::Status s = UseTerminal(&start); !s.ok()) return fail(s);
  }
  if (!PullIfMissing(run.session.image, "run")) return kExitAirlockError;
  absl::StatusOr<DaemonClient> client = ConnectToDaemon();
  if (!client.ok()) return fail(client.status());
  if (absl::Status s = ApplySessionOptions(*client, run.session, &start); !s.ok()) return fail(s);
  for (const std::string& a : run.command) start.add_argv(a);
  start.set_cwd(run.workdir.empty() && !run.session.workspace.empty() ? "/workspace" : run.workdir);
  start.set_user(run.user);
  start.set_timeout_seconds(run.timeout_seconds);
  return StreamExec(*client, start);
}

}  // namespace

void AddRunCommand(Cli& cli) {
  auto args = std::make_shared<RunArgs>();
  AddRunOptions(cli, args.get(), [args] { return Run(*args); });
}

}  // namespace airlock
