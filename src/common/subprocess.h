// Runs a helper program from an argv array (never a shell) and captures its output.
#ifndef AIRLOCK_COMMON_SUBPROCESS_H_
#define AIRLOCK_COMMON_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock {

struct ProcessResult {
  int exit_code = 0;   // 128+N when killed by signal N
  std::string output;  // stdout and stderr together, at most max_output bytes
};

// argv[0] must be an absolute path. Output beyond max_output is discarded.
[[nodiscard]] absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                                       size_t max_output = 1 << 20);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_SUBPROCESS_H_
