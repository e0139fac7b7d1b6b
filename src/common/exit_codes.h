// The exit codes `airlock run` and `airlock exec` use beside the command's own (as docker does).
#ifndef AIRLOCK_COMMON_EXIT_CODES_H_
#define AIRLOCK_COMMON_EXIT_CODES_H_

namespace airlock {

inline constexpr int kExitTimeout = 124;        // --timeout passed; the command was killed
inline constexpr int kExitAirlockError = 125;   // Airlock failed; the message says why
inline constexpr int kExitCannotExecute = 126;  // the command exists but cannot be executed
inline constexpr int kExitNotFound = 127;       // no such command in the guest
// 128 + N: signal N ended the command.

}  // namespace airlock

#endif  // AIRLOCK_COMMON_EXIT_CODES_H_
