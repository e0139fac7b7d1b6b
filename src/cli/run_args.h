// Parsing of `airlock run` arguments. Client input: every mistake is an InvalidArgument whose
// message says what to do.
#ifndef AIRLOCK_CLI_RUN_ARGS_H_
#define AIRLOCK_CLI_RUN_ARGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock {

struct RunArgs {
  std::string image;                 // empty: the default image
  std::vector<std::string> command;  // argv in the guest
  std::vector<std::string> env;      // KEY=VALUE, in order given
  std::string workdir;               // empty: /
  std::string user;                  // empty: the image's User, else root
  double timeout_seconds = 0;        // 0: none
  uint32_t memory_mib = 512;
  uint32_t cpus = 1;
  std::vector<std::string> allow;          // egress rules, checked by airlockd
  std::vector<std::string> allow_presets;  // egress presets
  std::vector<std::string> secrets;        // NAME=SOURCE@HOST..., checked here
  std::string workspace;                   // a project directory to capture; empty: none
  uint64_t workspace_max = 2ull << 30;     // cap on its file content
  bool tty = false;                        // on a terminal in the guest (-t)
};

inline constexpr char kRunUsage[] =
    "usage: airlock run [OPTIONS] [IMAGE] -- COMMAND [ARG...]\n"
    "Runs COMMAND in a fresh microVM of IMAGE (default: airlock/bookworm-python) and exits\n"
    "with its exit code (128+N if a signal N ended it, 124 on timeout, 125 for an Airlock\n"
    "error, 126 if COMMAND cannot be executed, 127 if it is not found in the guest).\n"
    "  -e, --env KEY=VALUE    set an environment variable (KEY alone copies it from here)\n"
    "  -w, --workdir DIR      working directory in the guest (default /)\n"
    "  -t, --tty              run COMMAND on a terminal in the guest, the size of this one;\n"
    "                         this terminal is raw while it runs (airlock run -t -- bash)\n"
    "  -u, --user USER[:GRP]  run as this user of the image (name or id; default: the\n"
    "                         image's User, else root)\n"
    "      --timeout SECONDS  destroy the VM after this wall-clock time (exit 124)\n"
    "      --memory MIB       guest memory in MiB (default 512)\n"
    "      --cpus N           virtual CPUs (default 1)\n"
    "      --allow RULE       let the command reach a destination (repeatable; default:\n"
    "                         none): HOST, *.DOMAIN, IP or CIDR, each optionally :PORT\n"
    "                         (default ports 80 and 443), e.g. --allow pypi.org\n"
    "      --allow-preset P   the hosts of an ecosystem: pypi, npm, github, debian,\n"
    "                         huggingface, crates, golang, anthropic, openai\n"
    "      --secret NAME=SOURCE@HOST[,HOST...][?body]\n"
    "                         the command sees NAME=<placeholder>; HTTPS requests to HOST\n"
    "                         carry the value instead (SOURCE: env:VAR, file:PATH,\n"
    "                         op://VAULT/ITEM/FIELD; see airlock secret --help)\n"
    "      --workspace DIR    capture the project DIR into the VM at /workspace (writable\n"
    "                         there, DIR itself never touched; the default working\n"
    "                         directory); .airlockignore in DIR leaves paths out\n"
    "      --workspace-max SIZE  refuse a project with more file content (default 2g)\n";

[[nodiscard]] absl::StatusOr<RunArgs> ParseRunArgs(const std::vector<std::string>& args);

}  // namespace airlock

#endif  // AIRLOCK_CLI_RUN_ARGS_H_
