// airlock: the command line. Subcommands live in src/cli/*_command.cc.
#include <cstdio>
#include <string>
#include <vector>

#include "src/cli/cli_commands.h"

namespace {

constexpr char kUsage[] =
    "usage: airlock COMMAND [ARGS...]\n"
    "Runs untrusted code in microVMs, each with its own kernel and no network.\n"
    "\n"
    "commands:\n"
    "  run [IMAGE] -- CMD ARGS...   run a command in a fresh microVM (airlock run --help)\n"
    "  doctor                       check the host: accelerator, QEMU, kernel, images\n"
    "  image import --rootfs TAR --tag NAME   make an image from a root filesystem tar\n"
    "  image ls [--json]            list images\n"
    "  image rm NAME...             remove images\n"
    "\n"
    "environment: AIRLOCK_HOME (default /var/lib/airlock), AIRLOCK_KERNEL, AIRLOCK_INITRAMFS,\n"
    "AIRLOCK_QEMU, AIRLOCK_ACCEL=kvm|tcg\n";

}  // namespace

int main(int argc, char** argv) {
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
  std::fprintf(stderr, "airlock: unknown command \"%s\"\n%s", command.c_str(), kUsage);
  return 2;
}
