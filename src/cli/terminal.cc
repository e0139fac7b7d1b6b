#include "src/cli/terminal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace airlock {
namespace {

// What the signal handlers need, set before they are installed and cleared after they are gone.
int g_fd = -1;
termios g_saved;
termios g_raw;

constexpr int kFatalSignals[] = {SIGQUIT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
struct sigaction g_old_fatal[sizeof(kFatalSignals) / sizeof(kFatalSignals[0])];
struct sigaction g_old_tstp, g_old_cont;

void Restore() {
  if (g_fd >= 0) tcsetattr(g_fd, TCSANOW, &g_saved);
}

void OnFatal(int sig) {
  Restore();
  // SA_RESETHAND put the default action back: the signal ends us as it would have.
  raise(sig);
}

void OnStop(int) {
  int saved_errno = errno;
  Restore();
  raise(SIGSTOP);
  errno = saved_errno;
}

void OnContinue(int) {
  int saved_errno = errno;
  if (g_fd >= 0) tcsetattr(g_fd, TCSAFLUSH, &g_raw);
  errno = saved_errno;
}

}  // namespace

std::optional<TerminalDims> TerminalSizeOf(int fd) {
  winsize size = {};
  if (ioctl(fd, TIOCGWINSZ, &size) != 0 || size.ws_row == 0 || size.ws_col == 0) {
    return std::nullopt;
  }
  return TerminalDims{size.ws_row, size.ws_col};
}

absl::StatusOr<std::unique_ptr<RawTerminal>> RawTerminal::Enter(int fd) {
  termios saved;
  if (!isatty(fd) || tcgetattr(fd, &saved) != 0) {
    return absl::FailedPreconditionError("the input is not a terminal");
  }
  g_saved = saved;
  g_raw = saved;
  cfmakeraw(&g_raw);
  g_fd = fd;
  struct sigaction fatal = {};
  fatal.sa_handler = OnFatal;
  fatal.sa_flags = SA_RESETHAND;
  for (size_t i = 0; i < std::size(kFatalSignals); ++i) {
    sigaction(kFatalSignals[i], &fatal, &g_old_fatal[i]);
  }
  struct sigaction stop = {};
  stop.sa_handler = OnStop;
  stop.sa_flags = SA_RESTART;
  sigaction(SIGTSTP, &stop, &g_old_tstp);
  struct sigaction cont = {};
  cont.sa_handler = OnContinue;
  cont.sa_flags = SA_RESTART;
  sigaction(SIGCONT, &cont, &g_old_cont);
  if (tcsetattr(fd, TCSAFLUSH, &g_raw) != 0) {
    int e = errno;
    std::unique_ptr<RawTerminal> undo(new RawTerminal());
    return absl::FailedPreconditionError(absl::StrCat("raw mode: ", strerror(e)));
  }
  return std::unique_ptr<RawTerminal>(new RawTerminal());
}

RawTerminal::~RawTerminal() {
  Restore();
  for (size_t i = 0; i < std::size(kFatalSignals); ++i) {
    sigaction(kFatalSignals[i], &g_old_fatal[i], nullptr);
  }
  sigaction(SIGTSTP, &g_old_tstp, nullptr);
  sigaction(SIGCONT, &g_old_cont, nullptr);
  g_fd = -1;
}

}  // namespace airlock
