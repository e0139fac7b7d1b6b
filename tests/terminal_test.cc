// `airlock exec -it` as a person uses it: the CLI runs on a terminal of its own (a pty whose
// other end the test holds, as a terminal emulator would), and the test types, resizes the
// window, presses ^C, and checks what it sees and that its terminal is as it was afterwards.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/strip.h"
#include "tests/cli_runner.h"

namespace airlock {
namespace {

// The CLI on a terminal of its own. The test keeps the terminal's side too, to read its modes.
class TerminalCli {
 public:
  TerminalCli(const std::vector<std::string>& args, unsigned short rows, unsigned short cols) {
    winsize size = {};
    size.ws_row = rows;
    size.ws_col = cols;
    EXPECT_EQ(openpty(&master_, &terminal_, nullptr, nullptr, &size), 0);
    EXPECT_EQ(tcgetattr(terminal_, &before_), 0);
    std::vector<std::string> argv = {AIRLOCK_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (std::string& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      setsid();
      ioctl(terminal_, TIOCSCTTY, 0);
      dup2(terminal_, 0);
      dup2(terminal_, 1);
      dup2(terminal_, 2);
      close(master_);
      setenv("TERM", "xterm-256color", 1);
      execv(raw[0], raw.data());
      _exit(127);
    }
    fcntl(master_, F_SETFL, O_NONBLOCK);
  }
  ~TerminalCli() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(master_);
    close(terminal_);
  }
  void Type(const std::string& keys) {
    ASSERT_EQ(write(master_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size()));
  }
  // Reads the screen until it shows `text` after what was seen before; false after 60 s.
  bool WaitFor(const std::string& text) {
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < give_up) {
      size_t at = screen_.find(text, seen_);
      if (at != std::string::npos) {
        seen_ = at + text.size();
        return true;
      }
      pollfd p = {master_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char buf[4096];
      ssize_t n = read(master_, buf, sizeof(buf));
      if (n > 0) screen_.append(buf, static_cast<size_t>(n));
    }
    return false;
  }
  void Resize(unsigned short rows, unsigned short cols) {
    winsize size = {};
    size.ws_row = rows;
    size.ws_col = cols;
    ioctl(master_, TIOCSWINSZ, &size);  // the CLI gets SIGWINCH, as from a terminal emulator
  }
  // Waits until the CLI has put the terminal into raw mode.
  bool WaitForRaw() {
    for (int i = 0; i < 600; ++i) {
      termios now;
      if (tcgetattr(terminal_, &now) == 0 && !(now.c_lflag & (ICANON | ECHO))) return true;
      usleep(100000);
    }
    return false;
  }
  // The CLI's wait status, reading the screen meanwhile; after 120 s the CLI is killed (the
  // test then fails on the status, with the screen to say why) rather than hanging the suite.
  int Wait() {
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > give_up) {
        ADD_FAILURE() << "the CLI did not exit; the screen:\n" << screen_;
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      pollfd p = {master_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = read(master_, buf, sizeof(buf));
      if (n > 0) screen_.append(buf, static_cast<size_t>(n));
    }
    reaped_ = true;
    return status;
  }
  bool Restored() {
    termios now;
    if (tcgetattr(terminal_, &now) != 0) return false;
    return now.c_iflag == before_.c_iflag && now.c_oflag == before_.c_oflag &&
           now.c_lflag == before_.c_lflag && now.c_cflag == before_.c_cflag;
  }
  pid_t pid() const { return pid_; }
  const std::string& screen() const { return screen_; }

 private:
  int master_ = -1, terminal_ = -1;
  termios before_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string screen_;
  size_t seen_ = 0;
};

std::string Create() {
  Result r = RunAirlock({"session", "create"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return std::string(absl::StripTrailingAsciiWhitespace(r.out));
}

TEST(TerminalTest, ExecItIsAShellOnARealTerminal) {
  std::string id = Create();
  TerminalCli shell({"exec", "-it", id, "--", "bash", "--norc", "-i"}, 30, 100);
  ASSERT_TRUE(shell.WaitFor("# ")) << shell.screen();
  ASSERT_TRUE(shell.WaitForRaw());
  // What is typed echoes back from the guest's terminal; TERM and the size are ours.
  shell.Type("echo $TERM; stty size; tty\r");
  ASSERT_TRUE(shell.WaitFor("echo $TERM; stty size; tty")) << shell.screen();
  ASSERT_TRUE(shell.WaitFor("xterm-256color\r\n30 100\r\n/dev/pts/")) << shell.screen();
  shell.Resize(40, 120);
  shell.Type("stty size\r");
  ASSERT_TRUE(shell.WaitFor("40 120\r\n")) << shell.screen();
  // ^C interrupts the foreground command, not the shell (nor the session).
  shell.Type("sleep 300; echo slept\r");
  ASSERT_TRUE(shell.WaitFor("slept\r\n")) << shell.screen();  // the echo of the line
  usleep(500000);
  shell.Type("\x03");
  ASSERT_TRUE(shell.WaitFor("# ")) << shell.screen();
  EXPECT_EQ(shell.screen().find("slept\r\n", shell.screen().find("^C")), std::string::npos)
      << shell.screen();
  // Job control: ^Z stops the foreground job, and the shell knows it.
  shell.Type("sleep 301\r");
  usleep(500000);
  shell.Type("\x1a");
  ASSERT_TRUE(shell.WaitFor("Stopped")) << shell.screen();
  // `fg` before `exit`: an interactive bash refuses the first `exit` while it still counts a
  // stopped job, and it learns of the killed job's end only asynchronously (`wait` does not
  // help; `fg` waits for the job, which is dead).
  shell.Type("kill -9 %1; fg; exit 3\r");
  int status = shell.Wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 3) << shell.screen();
  EXPECT_TRUE(shell.Restored());
  Result r = RunAirlock({"exec", id, "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  RunAirlock({"rm", id});
}

TEST(TerminalTest, ASignalToTheCliRestoresTheTerminal) {
  std::string id = Create();
  for (int sig : {SIGTERM, SIGQUIT}) {
    TerminalCli cli({"exec", "-it", id, "--", "sleep", "300"}, 24, 80);
    ASSERT_TRUE(cli.WaitForRaw());
    kill(cli.pid(), sig);
    int status = cli.Wait();
    if (sig == SIGTERM) {
      ASSERT_TRUE(WIFEXITED(status)) << status;
      EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
    } else {
      ASSERT_TRUE(WIFSIGNALED(status)) << status;
      EXPECT_EQ(WTERMSIG(status), SIGQUIT);
    }
    EXPECT_TRUE(cli.Restored()) << "after signal " << sig;
  }
  RunAirlock({"rm", id});
}

TEST(TerminalTest, TtyWithoutATerminalIsRefusedAndTWithoutIJoinsTheOutput) {
  std::string id = Create();
  Result r = RunAirlock({"exec", "-it", id, "--", "true"}, "piped input\n");
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("-t needs a terminal on stdin"), std::string::npos) << r.err;
  // -t alone: a terminal in the guest, its output (stdout and stderr) on ours.
  r = RunAirlock({"exec", "-t", id, "--", "sh", "-c", "tty; echo to-stderr >&2; exit 4"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.out.find("/dev/pts/"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("to-stderr\r\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
  // A flood through the terminal arrives whole, to its last line.
  r = RunAirlock({"exec", "-t", id, "--", "seq", "1", "200000"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.size(), 1288895u + 200000u);  // each "\n" became "\r\n"
  EXPECT_NE(r.out.find("\r\n199999\r\n200000\r\n"), std::string::npos);
  RunAirlock({"rm", id});
}

}  // namespace
}  // namespace airlock
