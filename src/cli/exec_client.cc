#include "src/cli/exec_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "src/cli/terminal.h"
#include "src/common/channel_frame.h"
#include "src/common/utf8.h"

namespace airlock {
namespace {

int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_signal{0};
int g_winch_pipe[2] = {-1, -1};  // non-blocking: a byte for each SIGWINCH

void OnSignal(int sig) {
  g_signal = sig;
  (void)!write(g_signal_pipe[1], "x", 1);
}

void OnWinch(int) {
  int saved_errno = errno;
  (void)!write(g_winch_pipe[1], "x", 1);
  errno = saved_errno;
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
  absl::Mutex write_mu;
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
    if (!start.stdin() && !start.tty()) return;
    auto send = [&](const v1::ExecRequest& message) {
      absl::MutexLock lock(&write_mu);
      return !writes_done && stream->Write(message);
    };
    ExecIo::Input feed;
    feed.write = [&](const std::string& data) {
      v1::ExecRequest message;
      message.set_stdin(data);
      return start.stdin() && send(message);
    };
    feed.resize = [&](uint32_t rows, uint32_t cols) {
      v1::ExecRequest message;
      message.mutable_resize()->set_rows(rows);
      message.mutable_resize()->set_cols(cols);
      return start.tty() && send(message);
    };
    io.FeedStdin(feed, stop[0]);
    if (!start.stdin()) return;
    v1::ExecRequest eof;
    eof.set_stdin_eof(true);
    absl::MutexLock lock(&write_mu);
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
    absl::MutexLock lock(&write_mu);
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

// The CLI's side: our stdin in, our stdout and stderr out, and (for a command on a terminal)
// our terminal's size whenever SIGWINCH says it changed.
class TerminalIo : public ExecIo {
 public:
  TerminalIo(bool feed_stdin, bool tty) : feed_stdin_(feed_stdin), tty_(tty) {}
  void Stdout(const std::string& data) override { WriteAll(STDOUT_FILENO, data, &out_broken_); }
  void Stderr(const std::string& data) override { WriteAll(STDERR_FILENO, data, &err_broken_); }
  void FeedStdin(const Input& input, int stop_fd) override {
    char buf[65536];
    bool reading = feed_stdin_;
    for (;;) {
      pollfd fds[3] = {{stop_fd, POLLIN, 0},
                       {tty_ ? g_winch_pipe[0] : -1, POLLIN, 0},
                       {reading ? STDIN_FILENO : -1, POLLIN, 0}};
      if (poll(fds, 3, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents) return;
      if (fds[1].revents & POLLIN) {
        while (read(g_winch_pipe[0], buf, sizeof(buf)) > 0) {
        }
        std::optional<TerminalDims> size = TerminalSizeOf(STDOUT_FILENO);
        if (!size) size = TerminalSizeOf(STDIN_FILENO);
        if (size && !input.resize(size->rows, size->cols)) return;
      }
      if (!reading || fds[2].revents == 0) continue;
      if (fds[2].revents & POLLNVAL) return;
      ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0 || !input.write(std::string(buf, static_cast<size_t>(n)))) {
        if (!tty_) return;
        reading = false;  // input ended; the terminal may still change size
      }
    }
  }

 private:
  bool feed_stdin_, tty_;
  bool out_broken_ = false, err_broken_ = false;
};

}  // namespace

absl::Status UseTerminal(v1::ExecStart* start) {
  if (start->stdin() && !isatty(STDIN_FILENO)) {
    return absl::FailedPreconditionError(
        "-t needs a terminal on stdin (to pipe input into a command, leave out -t)");
  }
  start->set_tty(true);
  std::optional<TerminalDims> size = TerminalSizeOf(STDOUT_FILENO);
  if (!size) size = TerminalSizeOf(STDIN_FILENO);
  if (size) {
    start->mutable_window()->set_rows(std::min<uint32_t>(size->rows, kMaxTerminalSide));
    start->mutable_window()->set_cols(std::min<uint32_t>(size->cols, kMaxTerminalSide));
  }
  bool has_term = false;
  for (const std::string& e : start->env()) has_term |= e.rfind("TERM=", 0) == 0;
  const char* term = std::getenv("TERM");
  if (!has_term && term != nullptr && *term != '\0' && std::strlen(term) < 64) {
    start->add_env(std::string("TERM=") + term);
  }
  return absl::OkStatus();
}

int StreamExec(DaemonClient& client, const v1::ExecStart& start) {
  signal(SIGPIPE, SIG_IGN);
  if (g_signal_pipe[0] < 0 && pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "airlock: pipe failed\n");
    return kExitAirlockError;
  }
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &action, nullptr);

  // A command on a terminal: ours goes raw while it runs (if it takes our input), and follows
  // our terminal's size.
  std::unique_ptr<RawTerminal> raw;
  if (start.tty()) {
    if (g_winch_pipe[0] < 0 && pipe2(g_winch_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      std::fprintf(stderr, "airlock: pipe failed\n");
      return kExitAirlockError;
    }
    struct sigaction winch = {};
    winch.sa_handler = OnWinch;
    winch.sa_flags = SA_RESTART;
    sigaction(SIGWINCH, &winch, nullptr);
    if (start.stdin()) {
      absl::StatusOr<std::unique_ptr<RawTerminal>> entered = RawTerminal::Enter(STDIN_FILENO);
      if (!entered.ok()) {
        std::fprintf(stderr, "airlock: %s\n", std::string(entered.status().message()).c_str());
        return kExitAirlockError;
      }
      raw = *std::move(entered);
    }
  }
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
  TerminalIo io(start.stdin(), start.tty());
  ExecOutcome outcome = RunExec(client, start, io, context);
  (void)!write(stop[1], "x", 1);
  watcher.join();
  close(stop[0]);
  close(stop[1]);
  raw.reset();  // the terminal as it was, before anything more is printed
  if (int sig = g_signal.load()) {
    std::fprintf(stderr, "airlock: interrupted by signal %d; the command was killed\n", sig);
    return 128 + sig;
  }
  if (outcome.exit) {
    if (!outcome.exit->message().empty()) {
      // The guest's words: escaped, so they cannot move the cursor or forge a line.
      std::fprintf(stderr, "airlock: %s\n", EscapeForTerminal(outcome.exit->message()).c_str());
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
