// The command tree of `airlock`, on CLI11: each *_command.cc adds its commands (their options,
// help and the function that runs them) with the helpers here; RunCli parses argv once, then
// runs the one command named. Parsing is separate from running: nothing runs unless the whole
// command line parsed, and every mistake is a message that names the command and its --help.
#ifndef AIRLOCK_CLI_CLI_APP_H_
#define AIRLOCK_CLI_CLI_APP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"

namespace airlock {

class Cli {
 public:
  Cli();
  // Parses argv (without argv[0]) and runs the command it names; returns the exit code.
  int Run(std::vector<std::string> args);
  // Parses only: a mistake is InvalidArgument saying what is wrong (Run adds the command and
  // where its --help is). --help prints the help and sets help_shown().
  [[nodiscard]] absl::Status Parse(std::vector<std::string> args);
  bool help_shown() const { return help_shown_; }

  CLI::App& app() { return app_; }

  // A command: `parent` is the app or a group such as `image`; `run` is called with the parsed
  // options once the whole line parsed. `usage_exit` is the exit code of a usage mistake (2, or
  // 125 where the exit code mirrors a guest's, as for run).
  CLI::App* Add(CLI::App* parent, const std::string& name, const std::string& description,
                std::function<int()> run, int usage_exit = 2);
  // A group of commands (`image`, `network`): it needs one of them.
  CLI::App* Group(const std::string& name, const std::string& description);
  // The command takes a guest command after `--` (run, exec, agent): `*command` receives it.
  // Without this, anything after `--` is a mistake.
  void TakesCommand(CLI::App* command, std::vector<std::string>* argv);

  // Adds `completion bash` (last, once every other command is in the tree).
  void AddCompletion();
  // Prints a bash completion script for every command and option of the tree.
  void PrintBashCompletion() const;

 private:
  CLI::App app_;
  std::string completion_shell_;
  const CLI::App* named_ = nullptr;  // the command the parsed line named
  bool help_shown_ = false;
  std::map<const CLI::App*, std::function<int()>> runs_;
  std::map<const CLI::App*, int> usage_exit_;
  std::map<const CLI::App*, std::vector<std::string>*> takes_command_;
};

// Options whose values are checked as they are parsed: a bad value is a usage error saying how
// to write it ("\"lots\" is not a size; write it like 512m or 2g").
CLI::Option* AddSizeOption(CLI::App* app, const std::string& name,
                           std::function<void(uint64_t)> set, const std::string& description);
CLI::Option* AddSizeOption(CLI::App* app, const std::string& name, uint64_t* bytes,
                           const std::string& description);
CLI::Option* AddDurationOption(CLI::App* app, const std::string& name,
                               std::function<void(uint64_t)> set, const std::string& description);
// A positive number of seconds, fractions allowed (--timeout 0.5).
CLI::Option* AddSecondsOption(CLI::App* app, const std::string& name, double* seconds,
                              const std::string& description);
// A whole number within [min, max].
CLI::Option* AddCountOption(CLI::App* app, const std::string& name,
                            std::function<void(uint32_t)> set, uint32_t min, uint32_t max,
                            const std::string& description);
// A repeatable option checked by `check` (which returns the error to show, or OK) and appended
// to `out` (if not null).
CLI::Option* AddCheckedList(CLI::App* app, const std::string& name, std::vector<std::string>* out,
                            std::function<absl::Status(const std::string&)> check,
                            const std::string& description);
// The ID positional that names a session (`required` unless the command can do without one).
// Bash completion offers the ids `airlock ls -q` prints wherever a command has one.
CLI::Option* AddSessionId(CLI::App* app, std::function<void(const std::string&)> set,
                          bool required = true);
CLI::Option* AddSessionId(CLI::App* app, std::string* id);
// Several of them (rm, pause, resume, metrics).
CLI::Option* AddSessionIds(CLI::App* app, std::vector<std::string>* ids, bool required = true);
// --json: the command prints JSON instead of its table.
CLI::Option* AddJsonFlag(CLI::App* app, bool* json);

}  // namespace airlock

#endif  // AIRLOCK_CLI_CLI_APP_H_
