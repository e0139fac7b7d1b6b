// The user's terminal while a command runs on a terminal in the guest (`airlock exec -it`):
// raw mode, so that every key (^C, ^Z, arrows) goes to the guest's terminal as typed, and the
// terminal as it was on every way out: a return, and signals that end or stop the CLI.
#ifndef AIRLOCK_CLI_TERMINAL_H_
#define AIRLOCK_CLI_TERMINAL_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"

namespace airlock {

struct TerminalDims {
  uint32_t rows = 0;
  uint32_t cols = 0;
};

// The size of the terminal on fd; nullopt if fd is not a terminal or has no size.
std::optional<TerminalDims> TerminalSizeOf(int fd);

// Raw mode on one terminal for this object's lifetime. At most one exists at a time. Until it
// is destroyed, a fatal signal (SIGSEGV, SIGABRT, SIGQUIT...) restores the terminal before the
// default action, and SIGTSTP restores it, stops the process, and makes it raw again on SIGCONT.
class RawTerminal {
 public:
  // Fails if fd is not a terminal.
  static absl::StatusOr<std::unique_ptr<RawTerminal>> Enter(int fd);
  ~RawTerminal();
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  RawTerminal() = default;
};

}  // namespace airlock

#endif  // AIRLOCK_CLI_TERMINAL_H_
