// airlock: the command line. Subcommands live in src/cli/*_command.cc.
#include <cstdio>
#include <string>
#include <vector>

#include "src/cli/cli_commands.h"
#include "src/image/tar_to_ext4.h"

namespace {

constexpr char kUsage[] =
    "usage: airlock COMMAND [ARGS...]\n"
    "Runs untrusted code in microVMs, each with its own kernel and no network device; egress\n"
    "goes only to the destinations a session is allowed (--allow).\n"
    "\n"
    "commands:\n"
    "  run [IMAGE] [--allow RULE] [--workspace DIR] -- CMD ARGS...   run a command in a fresh\n"
    "                               microVM (airlock run --help)\n"
    "  session create [IMAGE] [--cpus N] [--memory 512m] [--pids N] [--disk 2g] [--ttl 1h]\n"
    "                 [--idle-timeout 5m] [--allow RULE] [--allow-preset NAME]\n"
    "                 [--workspace DIR]  (DIR appears read-only under a writable /workspace)\n"
    "                               start a durable session; prints its id\n"
    "  exec [-i] [-t] ID -- CMD ARGS...  run a command in a session (-it: on a terminal)\n"
    "  ls [-a] [--json|-q]          your live sessions (-a: stopped and failed ones too)\n"
    "  watch [ID] [--json]          what happens to your sessions, as it happens\n"
    "  ps [--json]                  live VM processes: pid, accelerator, host CPU and memory\n"
    "  quota [--json]               what your sessions may hold at once, and what they use\n"
    "  logs [-f] [-n N] [--since D] ID   output of a session's commands, with timestamps\n"
    "  log ID [--json | --html FILE [--open]]   everything the session did: its timeline\n"
    "  metrics [--watch] [ID...]    guest CPU, memory, processes and disk\n"
    "  rm ID...                     destroy sessions (their logs stay)\n"
    "  pause ID...                  snapshot sessions to disk and free their VMs\n"
    "  resume ID...                 bring paused sessions back (exec does it too)\n"
    "  fork ID [-n N]               N independent copies of a session; prints their ids\n"
    "  file write ID PATH < DATA    write a file into a session (file read ID PATH > DATA)\n"
    "  diff [--stat] ID             what the session changed in /workspace\n"
    "  promote ID [--branch NAME] [--include-uncommitted] [--dry-run]\n"
    "                               the session's commits -> branch airlock/ID/NAME\n"
    "  sync ID [--dry-run]          host changes since the session's base -> the session\n"
    "  network ls|allow|deny|rm|log ID ...   a session's egress rules and connections\n"
    "                               (airlock network --help)\n"
    "  secret ls|set|rm ID ...      secrets the guest holds placeholders of\n"
    "                               (airlock secret --help)\n"
    "  agent claude [--workspace DIR] [-- ARGS]   Claude Code in a session: only its API, its\n"
    "                               key kept outside (airlock agent --help)\n"
    "  mcp                          serve the Model Context Protocol on stdio (airlock mcp -h)\n"
    "  doctor                       check the host: accelerator, QEMU, kernel, images\n"
    "  image pull REF               fetch an image from its registry (python:3.11-slim)\n"
    "  image import ARCHIVE [--tag NAME] | --rootfs TAR --tag NAME   import an image\n"
    "  image build --debian SUITE [--packages P,...] [--npm PKG] --tag NAME   build one\n"
    "  image push ARCHIVE REF       upload an image archive to a registry\n"
    "  image ls [--json]            list images\n"
    "  image rm NAME... | prune     remove images, free what nothing uses (airlock image -h)\n"
    "\n"
    "Everything but doctor, image build and image push goes through airlockd, started on\n"
    "first use when run as root (or run it yourself as a service).\n"
    "environment: AIRLOCK_HOME (default /var/lib/airlock), AIRLOCK_SOCKET (default\n"
    "/run/airlock/airlockd.sock), AIRLOCK_KERNEL, AIRLOCK_INITRAMFS, AIRLOCK_QEMU,\n"
    "AIRLOCK_ACCEL=kvm|tcg\n";

}  // namespace

int main(int argc, char** argv) {
  airlock::ReadTarNamesAsUtf8();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  std::string command = args[0];
  args.erase(args.begin());
  if (command == "run") return airlock::RunCommand(args);
  if (command == "doctor") return airlock::DoctorCommand(args);
  if (command == "image") return airlock::ImageCommand(args);
  if (command == "session") return airlock::SessionCommand(args);
  if (command == "exec") return airlock::ExecCommand(args);
  if (command == "ls") return airlock::ListCommand(args);
  if (command == "ps") return airlock::PsCommand(args);
  if (command == "quota") return airlock::QuotaCommand(args);
  if (command == "logs") return airlock::LogsCommand(args);
  if (command == "log") return airlock::LogCommand(args);
  if (command == "agent") return airlock::AgentCommand(args);
  if (command == "network") return airlock::NetworkCommand(args);
  if (command == "secret") return airlock::SecretCommand(args);
  if (command == "metrics") return airlock::MetricsCommand(args);
  if (command == "watch") return airlock::WatchCommand(args);
  if (command == "rm") return airlock::RemoveCommand(args);
  if (command == "pause") return airlock::PauseCommand(args);
  if (command == "resume") return airlock::ResumeCommand(args);
  if (command == "fork") return airlock::ForkCommand(args);
  if (command == "file") return airlock::FileCommand(args);
  if (command == "diff") return airlock::DiffCommand(args);
  if (command == "promote") return airlock::PromoteCommand(args);
  if (command == "sync") return airlock::SyncCommand(args);
  if (command == "mcp") return airlock::McpCommand(args);
  std::fprintf(stderr, "airlock: unknown command \"%s\"\n%s", command.c_str(), kUsage);
  return 2;
}
