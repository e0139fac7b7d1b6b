// `airlock run`: one command in a fresh microVM, output streamed, exit code mirrored.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/cli/cli_commands.h"
#include "src/cli/run_args.h"
#include "src/common/host_paths.h"
#include "src/image/image_store.h"
#include "src/vm/qemu_driver.h"
#include "src/vm/vm_launcher.h"

namespace airlock {
namespace {

constexpr int kExitTimeout = 124;
constexpr int kExitAirlockError = 125;
constexpr int kExitCannotExecute = 126;
constexpr int kExitNotFound = 127;

std::atomic<int> g_signal{0};

void OnSignal(int sig) { g_signal = sig; }

// Writes everything, or gives up quietly once the reader went away (EPIPE).
void WriteAll(int fd, std::string_view data, bool* broken) {
  while (!data.empty() && !*broken) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *broken = true;
      return;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

std::string SessionName() {
  unsigned char bytes[4];
  if (getrandom(bytes, sizeof(bytes), 0) != sizeof(bytes)) return "airlock-run";
  return absl::StrFormat("airlock-%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2], bytes[3]);
}

// Copies our stdin to the command until EOF, or until stop_fd becomes readable.
void PumpStdin(ExecStream* stream, int stop_fd) {
  char buf[65536];
  for (;;) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents) return;
    if (fds[0].revents & POLLNVAL) break;
    ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    if (!stream->WriteStdin(std::string_view(buf, static_cast<size_t>(n))).ok()) return;
  }
  stream->CloseStdin().IgnoreError();
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "airlock: %s\n", message.c_str());
  return kExitAirlockError;
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kRunUsage, stdout);
    return 0;
  }
  absl::StatusOr<RunArgs> run = ParseRunArgs(args);
  if (!run.ok()) {
    std::fprintf(stderr, "airlock run: %s\n%s", std::string(run.status().message()).c_str(),
                 kRunUsage);
    return kExitAirlockError;
  }
  HostPaths paths = DefaultHostPaths();
  ImageStore store(paths.images);
  absl::StatusOr<ImageInfo> image = store.Resolve(run->image.empty() ? kDefaultImage : run->image);
  if (!image.ok()) return Fail(std::string(image.status().message()));

  std::string name = SessionName();
  QemuDriver driver(paths.qemu);
  LaunchOptions options;
  options.memory_mib = run->memory_mib;
  options.vcpus = run->cpus;
  options.hostname = name;
  absl::Time deadline = run->timeout_seconds > 0 ? absl::Now() + absl::Seconds(run->timeout_seconds)
                                                 : absl::InfiniteFuture();
  // Until the VM is up, a signal just ends us: QEMU dies with its parent and the session disk
  // has no name, so nothing is left behind.
  absl::StatusOr<std::unique_ptr<Vm>> vm = LaunchVm(driver, paths, *image, options);
  if (!vm.ok()) return Fail(std::string(vm.status().message()));

  struct sigaction action = {};
  action.sa_handler = OnSignal;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);

  ExecRequest request;
  request.argv = run->command;
  request.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
                 "LANG=C.UTF-8", absl::StrCat("HOSTNAME=", name)};
  request.env.insert(request.env.end(), run->env.begin(), run->env.end());
  request.cwd = run->workdir;
  request.stdin = true;
  absl::StatusOr<std::unique_ptr<ExecStream>> stream = (*vm)->channel().StartExec(request);
  if (!stream.ok()) return Fail(std::string(stream.status().message()));

  int stop[2];
  if (pipe2(stop, O_CLOEXEC) != 0) return Fail("pipe failed");
  std::thread stdin_thread(PumpStdin, stream->get(), stop[0]);
  auto finish = [&](int code) {
    (void)!write(stop[1], "x", 1);
    stdin_thread.join();
    close(stop[0]);
    close(stop[1]);
    stream->reset();
    vm->reset();
    return code;
  };

  bool stdout_broken = false, stderr_broken = false;
  for (;;) {
    if (int sig = g_signal.load()) {
      (*vm)->Kill(absl::CancelledError("interrupted"));
      std::fprintf(stderr, "airlock: interrupted by signal %d; the VM was destroyed\n", sig);
      return finish(128 + sig);
    }
    absl::Time wait_until = std::min(deadline, absl::Now() + absl::Milliseconds(200));
    absl::StatusOr<ExecEvent> event = (*stream)->Next(wait_until);
    if (!event.ok()) {
      if (absl::IsDeadlineExceeded(event.status())) {
        if (absl::Now() < deadline) continue;
        (*vm)->Kill(absl::DeadlineExceededError("timed out"));
        std::fprintf(stderr, "airlock: timed out after %gs; the VM was destroyed\n",
                     run->timeout_seconds);
        return finish(kExitTimeout);
      }
      std::string tail = (*vm)->DiagnosticTail();
      return finish(Fail(absl::StrCat("the VM failed: ", event.status().message(), tail)));
    }
    switch (event->type) {
      case ExecEvent::Type::kStdout:
        WriteAll(STDOUT_FILENO, event->data, &stdout_broken);
        continue;
      case ExecEvent::Type::kStderr:
        WriteAll(STDERR_FILENO, event->data, &stderr_broken);
        continue;
      case ExecEvent::Type::kExit:
        break;
    }
    switch (event->exit_kind) {
      case ExitKind::kExited:
        return finish(event->code);
      case ExitKind::kSignaled:
        return finish(128 + event->code);
      case ExitKind::kSpawnFailed:
        if (event->code == ENOENT && event->message.rfind("working directory", 0) != 0) {
          std::fprintf(stderr, "airlock: %s: command not found in the guest\n",
                       run->command[0].c_str());
          return finish(kExitNotFound);
        }
        std::fprintf(stderr, "airlock: %s\n", event->message.c_str());
        if (event->code == EACCES || event->code == ENOEXEC || event->code == ETXTBSY) {
          return finish(kExitCannotExecute);
        }
        return finish(kExitAirlockError);
      case ExitKind::kFailed:
        return finish(Fail(event->message));
    }
  }
}

}  // namespace airlock
