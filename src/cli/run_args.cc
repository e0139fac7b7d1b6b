#include "src/cli/run_args.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace airlock {
namespace {

constexpr char kRunFooter[] =
    "Runs COMMAND in a fresh microVM of IMAGE (default: airlock/bookworm-python) and exits with\n"
    "its exit code (128+N if a signal N ended it, 124 on timeout, 125 for an Airlock error, 126\n"
    "if COMMAND cannot be executed, 127 if it is not found in the guest). Without a COMMAND, an\n"
    "image's own Entrypoint and Cmd run. Examples:\n"
    "  airlock run -- python3 -c 'print(6*7)'\n"
    "  airlock run --allow pypi.org -- pip install requests\n"
    "  airlock run -t -- bash              (a shell; this terminal is raw while it runs)\n"
    "  airlock run --workspace . -- make test";

}  // namespace

CLI::Option* AddEnvOption(CLI::App* app, std::vector<std::string>* env) {
  return app
      ->add_option_function<std::vector<std::string>>(
          "-e,--env",
          [env](const std::vector<std::string>& values) {
            for (std::string value : values) {
              if (value.empty() || value[0] == '=') {
                throw CLI::ValidationError("--env needs KEY=VALUE (or KEY to copy it from here)");
              }
              if (value.find('=') == std::string::npos) {
                const char* here = std::getenv(value.c_str());
                if (here == nullptr) continue;
                value = absl::StrCat(value, "=", here);
              }
              env->push_back(value);
            }
          },
          "set an environment variable (repeatable; KEY alone copies it from here)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
}

CLI::Option* AddUserOption(CLI::App* app, std::string* user) {
  return app
      ->add_option("-u,--user", *user,
                   "run as this user of the image, by name or id (default: the image's "
                   "User, else root)")
      ->type_name("USER[:GROUP]")
      ->check([](const std::string& v) {
        if (v.empty() || v[0] == ':' || v.back() == ':') {
          return std::string(
              "--user needs NAME or UID, optionally :GROUP or :GID (e.g. --user 1000:1000)");
        }
        return std::string();
      });
}

CLI::Option* AddWorkdirOption(CLI::App* app, std::string* workdir) {
  return app->add_option("-w,--workdir", *workdir, "working directory in the guest (default /)")
      ->type_name("DIR")
      ->check([](const std::string& v) {
        return v.empty() || v[0] != '/'
                   ? std::string("--workdir needs an absolute path in the guest")
                   : std::string();
      });
}

CLI::App* AddRunOptions(Cli& cli, RunArgs* out, std::function<int()> run) {
  CLI::App* app = cli.Add(&cli.app(), "run", "run a command in a fresh microVM", std::move(run),
                          /*usage_exit=*/125);
  app->footer(kRunFooter);
  app->add_option("IMAGE", out->session.image, "the image (default: airlock/bookworm-python)");
  AddEnvOption(app, &out->env);
  AddWorkdirOption(app, &out->workdir);
  AddUserOption(app, &out->user);
  app->add_flag("-t,--tty", out->tty,
                "run COMMAND on a terminal in the guest, the size of this one; this terminal is "
                "raw while it runs");
  app->add_flag("-i,--interactive", out->interactive,
                "accepted for docker's habit: run always "
                "passes stdin");
  AddSecondsOption(app, "--timeout", &out->timeout_seconds,
                   "destroy the VM after this wall-clock time (exit 124)");
  AddSessionOptions(app, &out->session, /*durable=*/false);
  cli.TakesCommand(app, &out->command);
  return app;
}

absl::Status CheckRunArgs(const RunArgs& args) {
  // Without a command an image's own Entrypoint/Cmd runs (airlockd says if it has none).
  if (args.command.empty() && args.session.image.empty()) {
    return absl::InvalidArgumentError(
        "no command given; put it after --, e.g. airlock run -- python3 -V");
  }
  return absl::OkStatus();
}

}  // namespace airlock
