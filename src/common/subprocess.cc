#include "src/common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "src/common/errno_status.h"
#include "src/common/unique_fd.h"

namespace airlock {

absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const ProcessOptions& options) {
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') {
    return absl::InvalidArgumentError("RunProcess needs an absolute program path");
  }
  if (options.pass_fd >= 0 && options.pass_fd < 3) {
    return absl::InvalidArgumentError("RunProcess passes a descriptor of 3 or above only");
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env = options.env;
  if (env.empty()) env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int out[2], err[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  UniqueFd out_read(out[0]), out_write(out[1]);
  if (options.separate_stderr && pipe2(err, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  UniqueFd err_read(err[0]), err_write(err[1]);
  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("fork");
  if (pid == 0) {
    if (options.cancelled) setpgid(0, 0);  // so that a cancel ends its children too
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out[1], 1) < 0 ||
        dup2(options.separate_stderr ? err[1] : out[1], 2) < 0) {
      _exit(127);
    }
    // dup2 clears FD_CLOEXEC on the copy; a descriptor that already is 3 keeps its own flags.
    if (options.pass_fd == 3 && fcntl(3, F_SETFD, 0) != 0) _exit(127);
    if (options.pass_fd >= 0 && options.pass_fd != 3 && dup2(options.pass_fd, 3) < 0) _exit(127);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  // Both sides set the group, so that it exists before a cancel can come (after the child's
  // exec this fails with EACCES, by when the child has set it itself).
  if (options.cancelled) (void)setpgid(pid, pid);
  out_write.reset();
  err_write.reset();
  ProcessResult result;
  absl::Time deadline = absl::Now() + options.timeout;
  struct Stream {
    int fd;
    std::string* into;
  };
  std::vector<Stream> open_streams = {{out_read.get(), &result.output}};
  if (options.separate_stderr) open_streams.push_back({err_read.get(), &result.error_output});
  char buf[65536];
  while (!open_streams.empty()) {
    std::vector<pollfd> fds;
    for (const Stream& s : open_streams) fds.push_back({s.fd, POLLIN, 0});
    int wait_ms = -1;
    if (options.timeout != absl::InfiniteDuration()) {
      wait_ms = static_cast<int>(
          std::clamp<int64_t>(absl::ToInt64Milliseconds(deadline - absl::Now()), 0, 60000));
    }
    if (options.cancelled) wait_ms = wait_ms < 0 ? 250 : std::min(wait_ms, 250);
    int ready = poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return ErrnoStatus("poll");
    if (options.cancelled && options.cancelled()) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);  // in case it had left its group
      result.cancelled = true;
      break;
    }
    if (ready == 0 && absl::Now() >= deadline) {
      kill(pid, SIGKILL);
      result.timed_out = true;
      break;
    }
    for (size_t i = fds.size(); i-- > 0;) {
      if (fds[i].revents == 0) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        open_streams.erase(open_streams.begin() + static_cast<long>(i));
        continue;
      }
      std::string* into = open_streams[i].into;
      size_t keep = std::min(static_cast<size_t>(n), options.max_output - into->size());
      into->append(buf, keep);
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus("waitpid");
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string FindInPath(const std::string& name, const std::string& path) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty() || dir[0] != '/') continue;  // a relative PATH entry is never searched
    std::string candidate = std::string(dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace airlock
