// airlock-agent: PID 1 of every Airlock guest. It must never exit: the kernel panics (and the
// VM stops) when PID 1 dies, so every failure after boot is logged and served around.
#include <signal.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <string>

#include "src/common/workspace_change.h"
#include "src/guest/agent_net.h"
#include "src/guest/agent_server.h"
#include "src/guest/guest_boot.h"
#include "src/guest/guest_layer.h"
#include "src/guest/guest_volumes.h"
#include "src/guest/guest_workspace.h"

namespace {

// Ends the VM: microvm has no ACPI to power off with, so reboot, which the host's QEMU
// (-no-reboot) turns into an exit.
[[noreturn]] void PowerOff(const std::string& why) {
  airlock::guest::ConsoleLog("fatal: " + why + "; stopping the VM");
  sync();
  reboot(RB_AUTOBOOT);
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  if (getpid() != 1) {
    // The host runs the agent's own binary as a command for what it needs done inside the
    // session with the session's view of its files.
    if (argc == 2 && std::string(argv[1]) == airlock::kWorkspaceDiffCommand) {
      return airlock::guest::WorkspaceDiffMain();
    }
    if (argc >= 2 && std::string(argv[1]) == airlock::kVolumeFreezeCommand) {
      return airlock::guest::VolumeFreezeMain(argc, argv);
    }
    if (argc == 2 && std::string(argv[1]) == airlock::kLayerTarCommand) {
      return airlock::guest::LayerTarMain();
    }
    airlock::guest::ConsoleLog("must run as PID 1 inside an Airlock guest");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);  // ExecChild gives commands back the default
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sigchld_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sigchld_fd < 0) PowerOff("signalfd failed");

  std::string error = airlock::guest::BootRoot();
  if (!error.empty()) PowerOff("boot: " + error);
  error = airlock::guest::PrepareGuestNetwork();
  if (!error.empty()) airlock::guest::ConsoleLog("network: " + error);

  int channel = -1;
  for (int attempt = 0; channel < 0; ++attempt) {
    channel = airlock::guest::OpenChannelPort();
    if (channel < 0) {
      if (attempt == 100) PowerOff("no virtio-serial port named airlock.0");
      usleep(10000);
    }
  }
  // The activity record starts when the host first asks for it and goes on across hosts.
  static airlock::guest::ActivityRecorder recorder;
  for (;;) {
    airlock::guest::AgentServer server(channel, sigchld_fd, &recorder);
    airlock::guest::ConsoleLog("channel: " + server.Serve() + "; serving again");
    usleep(100000);
  }
}
