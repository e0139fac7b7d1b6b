#include "src/cli/exec_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

namespace airlock {
namespace {

int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_signal{0};

void OnSignal(int sig) {
  g_signal = sig;
  (void)!write(g_signal_pipe[1], "x", 1);
}

void WriteAll(int fd, const std::string& data, bool* broken) {
  size_t done = 0;
  while (done < data.size() && !*broken) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *broken = true;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

ExecOutcome RunExec(DaemonClient& client, const v1::ExecStart& start, ExecIo& io,
                    grpc::ClientContext& context) {
  std::unique_ptr<grpc::ClientReaderWriter<v1::ExecRequest, v1::ExecResponse>> stream =
      client.sessions->Exec(&context);
  std::mutex write_mu;
  bool writes_done = false;
  v1::ExecRequest first;
  *first.mutable_start() = start;
  stream->Write(first);

  int stop[2];
  if (pipe2(stop, O_CLOEXEC) != 0) {
    context.TryCancel();
    stream->Finish();
    return {std::nullopt, grpc::Status(grpc::StatusCode::INTERNAL, "pipe failed")};
  }
  std::thread input([&] {
    if (!start.stdin()) return;
    io.FeedStdin(
        [&](const std::string& data) {
          v1::ExecRequest message;
          message.set_stdin(data);
          std::lock_guard<std::mutex> lock(write_mu);
          return !writes_done && stream->Write(message);
        },
        stop[0]);
    v1::ExecRequest eof;
    eof.set_stdin_eof(true);
    std::lock_guard<std::mutex> lock(write_mu);
    if (!writes_done) stream->Write(eof);
  });

  ExecOutcome outcome;
  v1::ExecResponse response;
  while (stream->Read(&response)) {
    if (response.has_stdout()) {
      io.Stdout(response.stdout());
    } else if (response.has_stderr()) {
      io.Stderr(response.stderr());
    } else if (response.has_exit()) {
      outcome.exit = response.exit();
      break;
    }
  }
  (void)!write(stop[1], "x", 1);
  {
    std::lock_guard<std::mutex> lock(write_mu);
    writes_done = true;
    stream->WritesDone();
  }
  input.join();
  close(stop[0]);
  close(stop[1]);
  outcome.status = stream->Finish();
  return outcome;
}

namespace {

// The CLI's side: our stdin in, our stdout and stderr out.
class TerminalIo : public ExecIo {
 public:
  void Stdout(const std::string& data) override { WriteAll(STDOUT_FILENO, data, &out_broken_); }
  void Stderr(const std::string& data) override { WriteAll(STDERR_FILENO, data, &err_broken_); }
  void FeedStdin(const std::function<bool(const std::string&)>& write, int stop_fd) override {
    char buf[65536];
    for (;;) {
      pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {stop_fd, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents) return;
      if (fds[0].revents & POLLNVAL) return;
      ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return;
      if (!write(std::string(buf, static_cast<size_t>(n)))) return;
    }
  }

 private:
  bool out_broken_ = false, err_broken_ = false;
};

}  // namespace

int StreamExec(DaemonClient& client, const v1::ExecStart& start) {
  signal(SIGPIPE, SIG_IGN);
  if (g_signal_pipe[0] < 0 && pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "airlock: pipe failed\n");
    return kExitAirlockError;
  }
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &action, nullptr);

  grpc::ClientContext context;
  int stop[2];
  if (pipe2(stop, O_CLOEXEC) != 0) return kExitAirlockError;
  // A signal to us cancels the call; airlockd then kills the command.
  std::thread watcher([&] {
    pollfd fds[2] = {{g_signal_pipe[0], POLLIN, 0}, {stop[0], POLLIN, 0}};
    while (poll(fds, 2, -1) < 0 && errno == EINTR) {
    }
    if (fds[0].revents) context.TryCancel();
  });
  TerminalIo io;
  ExecOutcome outcome = RunExec(client, start, io, context);
  (void)!write(stop[1], "x", 1);
  watcher.join();
  close(stop[0]);
  close(stop[1]);
  if (int sig = g_signal.load()) {
    std::fprintf(stderr, "airlock: interrupted by signal %d; the command was killed\n", sig);
    return 128 + sig;
  }
  if (outcome.exit) {
    if (!outcome.exit->message().empty()) {
      std::fprintf(stderr, "airlock: %s\n", outcome.exit->message().c_str());
    }
    return outcome.exit->code();
  }
  if (outcome.status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    // airlockd went away mid-command; its VMs outlive it, and the next one finds them again.
    std::fprintf(stderr,
                 "airlock: %s while the command ran; the command's output and input were cut "
                 "(the session and its processes carry on once airlockd is back: see "
                 "`airlock logs %s`)\n",
                 Describe(outcome.status).c_str(), start.session_id().c_str());
    return kExitAirlockError;
  }
  std::fprintf(stderr, "airlock: %s\n", Describe(outcome.status).c_str());
  return kExitAirlockError;
}

}  // namespace airlock
