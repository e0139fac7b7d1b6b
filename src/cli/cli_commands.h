// The `airlock` commands, each file adding its own to the command tree.
#ifndef AIRLOCK_CLI_CLI_COMMANDS_H_
#define AIRLOCK_CLI_CLI_COMMANDS_H_

#include <string>

#include "src/cli/cli_app.h"

namespace airlock {

// Each adds its commands, their options and help to the tree (src/cli/cli_app.h).
void AddRunCommand(Cli& cli);
void AddSessionCommands(Cli& cli);  // session create, exec, ls, ps, quota, logs, metrics, rm,
                                    // pause, resume, fork, file, watch
void AddLogCommand(Cli& cli);
void AddAgentCommand(Cli& cli);
void AddNetworkCommand(Cli& cli);
void AddSecretCommand(Cli& cli);
void AddWorkspaceCommands(Cli& cli);  // diff, promote, sync
void AddMcpCommand(Cli& cli);
void AddDoctorCommand(Cli& cli);
void AddImageCommand(Cli& cli);
void AddAuditCommand(Cli& cli);
void AddDashboardCommand(Cli& cli);
void AddPortForwardCommand(Cli& cli);
void AddExposeCommand(Cli& cli);
void AddApiKeyCommand(Cli& cli);
void AddVolumeCommand(Cli& cli);
// Streams the tar open as fd into volume `name` (airlock volume import; airlock-tools for a
// directory). Returns the exit code.
int ImportVolumeFrom(const std::string& name, int fd);

// For `run` and `session create` of an image this host does not have yet: when the caller can
// write the image store (root), pulls it here, with a progress bar on a terminal, so the wait
// is visible; airlockd would otherwise pull it silently on first use. Returns false (after
// saying why) only if the pull was tried and failed.
bool PullIfMissing(const std::string& image, const char* command);

}  // namespace airlock

#endif  // AIRLOCK_CLI_CLI_COMMANDS_H_
