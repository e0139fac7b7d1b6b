#include "src/common/log.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace airlock {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

const char* Name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARN";
    case LogLevel::kError:
      return "ERROR";
  }
  return "?";
}

}  // namespace

std::optional<LogLevel> ParseLogLevel(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warning" || name == "warn") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return std::nullopt;
}

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }

void Log(LogLevel level, std::string_view message) {
  if (static_cast<int>(level) < g_level) return;
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  tm utc;
  gmtime_r(&now.tv_sec, &utc);
  char when[32];
  strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &utc);
  // One line per event, whatever a tenant put into the message (an image name, a path): control
  // characters are escaped, so no one can forge a line of the log.
  std::string line =
      absl::StrCat(when, absl::StrFormat(".%03dZ ", now.tv_nsec / 1000000), Name(level), " ");
  for (char c : message) {
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
      line += c;
    } else {
      line += absl::StrFormat("\\x%02x", static_cast<unsigned char>(c));
    }
  }
  line += "\n";
  // One write per line: lines from several threads never interleave.
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

void LogIfFailed(const absl::Status& status, std::string_view what) {
  if (!status.ok()) LogWarning(absl::StrCat(std::string(what), ": ", status.message()));
}

}  // namespace airlock
