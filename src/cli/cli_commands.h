// The `airlock` subcommands. Each takes the arguments after its name and returns the exit code.
#ifndef AIRLOCK_CLI_CLI_COMMANDS_H_
#define AIRLOCK_CLI_CLI_COMMANDS_H_

#include <string>
#include <vector>

namespace airlock {

int RunCommand(const std::vector<std::string>& args);
int DoctorCommand(const std::vector<std::string>& args);
int ImageCommand(const std::vector<std::string>& args);
int SessionCommand(const std::vector<std::string>& args);
int ExecCommand(const std::vector<std::string>& args);
int ListCommand(const std::vector<std::string>& args);
int PsCommand(const std::vector<std::string>& args);
int QuotaCommand(const std::vector<std::string>& args);
int LogsCommand(const std::vector<std::string>& args);
int LogCommand(const std::vector<std::string>& args);
int AgentCommand(const std::vector<std::string>& args);
int MetricsCommand(const std::vector<std::string>& args);
int WatchCommand(const std::vector<std::string>& args);
int RemoveCommand(const std::vector<std::string>& args);
int PauseCommand(const std::vector<std::string>& args);
int ResumeCommand(const std::vector<std::string>& args);
int ForkCommand(const std::vector<std::string>& args);
int McpCommand(const std::vector<std::string>& args);
int FileCommand(const std::vector<std::string>& args);
int NetworkCommand(const std::vector<std::string>& args);
int SecretCommand(const std::vector<std::string>& args);
int DiffCommand(const std::vector<std::string>& args);
int PromoteCommand(const std::vector<std::string>& args);
int SyncCommand(const std::vector<std::string>& args);

// For `run` and `session create` of an image this host does not have yet: when the caller can
// write the image store (root), pulls it here, with a progress bar on a terminal, so the wait
// is visible; airlockd would otherwise pull it silently on first use. Returns false (after
// saying why) only if the pull was tried and failed.
bool PullIfMissing(const std::string& image, const char* command);

}  // namespace airlock

#endif  // AIRLOCK_CLI_CLI_COMMANDS_H_
