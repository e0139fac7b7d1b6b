#include "src/common/subprocess.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "src/common/errno_status.h"
#include "src/common/unique_fd.h"

namespace airlock {

absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv, size_t max_output) {
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') {
    return absl::InvalidArgumentError("RunProcess needs an absolute program path");
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char env_path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char env_lang[] = "LC_ALL=C";
  char* envp[] = {env_path, env_lang, nullptr};
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  UniqueFd read_end(out[0]), write_end(out[1]);
  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("fork");
  if (pid == 0) {
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out[1], 1) < 0 || dup2(out[1], 2) < 0) {
      _exit(127);
    }
    execve(args[0], args.data(), envp);
    _exit(127);
  }
  write_end.reset();
  ProcessResult result;
  char buf[65536];
  for (;;) {
    ssize_t n = read(read_end.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size_t keep = std::min(static_cast<size_t>(n), max_output - result.output.size());
    result.output.append(buf, keep);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus("waitpid");
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace airlock
