// `airlock doctor`: what this host runs VMs with, and what is missing with the command that
// fixes it. Exits 0 only when `airlock run` can work. It reads the image store, so it runs in
// airlock-tools (src/cli/tools_main.cc), which this process becomes.
#include "src/cli/cli_commands.h"
#include "src/cli/host_tools.h"

namespace airlock {

void AddDoctorCommand(Cli& cli) {
  cli.Add(&cli.app(), "doctor", "check the host: accelerator, QEMU, kernel, images",
          [] { return BecomeProgramBeside(kToolsProgram, {"doctor"}); });
}

}  // namespace airlock
