// Runs a helper program from an argv array (never a shell) and captures its output.
#ifndef AIRLOCK_COMMON_SUBPROCESS_H_
#define AIRLOCK_COMMON_SUBPROCESS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace airlock {

struct ProcessResult {
  int exit_code = 0;         // 128+N when killed by signal N
  std::string output;        // stdout (and stderr, unless separate_stderr), at most max_output
  std::string error_output;  // stderr when separate_stderr, at most max_output
  bool timed_out = false;    // killed (SIGKILL) when the timeout passed
  bool cancelled = false;    // killed (SIGKILL) because `cancelled` said so
};

struct ProcessOptions {
  // The environment, KEY=VALUE. Empty: PATH=/usr/sbin:/usr/bin:/sbin:/bin and LC_ALL=C.
  std::vector<std::string> env;
  size_t max_output = 1 << 20;  // per stream; more is read and discarded
  bool separate_stderr = false;
  absl::Duration timeout = absl::InfiniteDuration();
  // Asked at least every 250 ms while the process runs; true kills its process group (the
  // process runs in a group of its own when this is set) with SIGKILL.
  std::function<bool()> cancelled;
  // A descriptor (3 or above) the program gets as its fd 3, e.g. a file it writes into; -1: none.
  int pass_fd = -1;
};

// argv[0] must be an absolute path. stdin is /dev/null.
[[nodiscard]] absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                                       const ProcessOptions& options);
[[nodiscard]] inline absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                                              size_t max_output = 1 << 20) {
  ProcessOptions options;
  options.max_output = max_output;
  return RunProcess(argv, options);
}

// The first executable `name` in the directories of PATH (a colon-separated list); "" if none.
std::string FindInPath(const std::string& name, const std::string& path);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_SUBPROCESS_H_
