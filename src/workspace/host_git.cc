#include "src/workspace/host_git.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace airlock {

absl::StatusOr<ProcessResult> RunHostGit(const std::string& repo,
                                         const std::vector<std::string>& args,
                                         const GitOptions& options) {
  const char* path_env = getenv("PATH");
  std::string git = FindInPath("git", path_env != nullptr ? path_env : "/usr/bin:/bin");
  if (git.empty()) {
    return absl::FailedPreconditionError(
        "git is not installed on this host; install it (apt-get install git) and try again");
  }
  std::vector<std::string> argv = {git,
                                   "-C",
                                   repo,
                                   "-c",
                                   "core.hooksPath=/dev/null",
                                   "-c",
                                   "core.fsmonitor=false",
                                   "-c",
                                   "core.pager=cat",
                                   "-c",
                                   "protocol.file.allow=always",
                                   "--no-pager"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions process;
  process.separate_stderr = true;
  process.max_output = options.max_output;
  process.timeout = options.timeout;
  const char* home = getenv("HOME");
  process.env = {absl::StrCat("PATH=", path_env != nullptr ? path_env : "/usr/bin:/bin"),
                 "LC_ALL=C",
                 "GIT_CONFIG_NOSYSTEM=1",
                 "GIT_CONFIG_GLOBAL=/dev/null",
                 "GIT_TERMINAL_PROMPT=0",
                 "GIT_OPTIONAL_LOCKS=0",
                 absl::StrCat("HOME=", home != nullptr ? home : "/")};
  absl::StatusOr<ProcessResult> result = RunProcess(argv, process);
  if (result.ok() && result->timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat("git ", args.empty() ? "" : args[0], " did not finish in time"));
  }
  return result;
}

absl::StatusOr<std::string> HostGitOutput(const std::string& repo,
                                          const std::vector<std::string>& args,
                                          const std::string& what, const GitOptions& options) {
  absl::StatusOr<ProcessResult> result = RunHostGit(repo, args, options);
  if (!result.ok()) return result.status();
  if (result->exit_code != 0) {
    std::string message(absl::StripTrailingAsciiWhitespace(result->error_output));
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": git says: ", message.empty() ? "(nothing)" : message));
  }
  return result->output;
}

bool IsGitRepository(const std::string& dir) {
  struct stat st;
  return lstat((dir + "/.git").c_str(), &st) == 0;
}

}  // namespace airlock
