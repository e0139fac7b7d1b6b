// airlock: the command line. The commands live in src/cli/*_command.cc, each adding itself to
// the tree that src/cli/cli_app.cc parses.
#include <string>
#include <vector>

#include "src/cli/cli_app.h"
#include "src/cli/cli_commands.h"

int main(int argc, char** argv) {
  airlock::Cli cli;
  // In the order `airlock --help` lists them.
  airlock::AddRunCommand(cli);
  airlock::AddSessionCommands(cli);
  airlock::AddPortForwardCommand(cli);
  airlock::AddExposeCommand(cli);
  airlock::AddApiKeyCommand(cli);
  airlock::AddVolumeCommand(cli);
  airlock::AddLogCommand(cli);
  airlock::AddWorkspaceCommands(cli);
  airlock::AddNetworkCommand(cli);
  airlock::AddSecretCommand(cli);
  airlock::AddAgentCommand(cli);
  airlock::AddMcpCommand(cli);
  airlock::AddImageCommand(cli);
  airlock::AddAuditCommand(cli);
  airlock::AddDashboardCommand(cli);
  airlock::AddDoctorCommand(cli);
  cli.AddCompletion();
  return cli.Run(std::vector<std::string>(argv + 1, argv + argc));
}
