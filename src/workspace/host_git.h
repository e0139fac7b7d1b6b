// Host git, run the way Airlock runs it on a user's project: an argv array (never a shell),
// hooks pointed at nothing, no system or global configuration, no fsmonitor, no pager, no
// prompts, and a timeout. The project's own configuration is the user's and is read as git
// always would; nothing that came from a guest is ever given to git as configuration.
#ifndef AIRLOCK_WORKSPACE_HOST_GIT_H_
#define AIRLOCK_WORKSPACE_HOST_GIT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/common/subprocess.h"

namespace airlock {

struct GitOptions {
  absl::Duration timeout = absl::Minutes(5);
  size_t max_output = 16 << 20;
};

// Runs `git -C repo ARGS...` and returns what it printed (stdout and stderr apart). A git that
// is missing is FAILED_PRECONDITION saying to install it; a non-zero exit is returned in the
// result for the caller to judge.
[[nodiscard]] absl::StatusOr<ProcessResult> RunHostGit(const std::string& repo,
                                                       const std::vector<std::string>& args,
                                                       const GitOptions& options = {});

// Like RunHostGit, but a non-zero exit is an error carrying git's message after `what`.
[[nodiscard]] absl::StatusOr<std::string> HostGitOutput(const std::string& repo,
                                                        const std::vector<std::string>& args,
                                                        const std::string& what,
                                                        const GitOptions& options = {});

// Whether dir is the top of a git work tree (it holds .git).
bool IsGitRepository(const std::string& dir);

}  // namespace airlock

#endif  // AIRLOCK_WORKSPACE_HOST_GIT_H_
