// The host's log: one line per event on stderr (for airlockd, the journal under systemd, or
// $AIRLOCK_HOME/airlockd.log when the CLI started it), with a time and a level, so an operator
// can tell what went wrong from what merely happened. In common/ so that every layer below the
// daemon (vm/, net/, providers/) leaves a trace of a failure it cannot act on. airlockd's
// --log-level (or AIRLOCK_LOG_LEVEL) sets the least level written: debug, info (the default),
// warning or error.
#ifndef AIRLOCK_COMMON_LOG_H_
#define AIRLOCK_COMMON_LOG_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace airlock {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// "debug", "info", "warning" (or "warn"), "error"; nullopt for anything else.
std::optional<LogLevel> ParseLogLevel(std::string_view name);
void SetLogLevel(LogLevel level);

// Writes "2026-12-01T17:00:00.123Z WARN message" as one line (thread-safe).
void Log(LogLevel level, std::string_view message);
inline void LogDebug(std::string_view message) { Log(LogLevel::kDebug, message); }
inline void LogInfo(std::string_view message) { Log(LogLevel::kInfo, message); }
inline void LogWarning(std::string_view message) { Log(LogLevel::kWarning, message); }
inline void LogError(std::string_view message) { Log(LogLevel::kError, message); }

// For work whose failure the caller cannot act on (cleanup, a record of something that
// happened anyway): a failure is logged as a warning, "what: why", and the caller goes on.
void LogIfFailed(const absl::Status& status, std::string_view what);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_LOG_H_
