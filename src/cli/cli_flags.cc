#include "src/cli/cli_flags.h"

#include <cctype>
#include <ctime>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace airlock {

absl::StatusOr<uint64_t> ParseSize(const std::string& text) {
  uint64_t bytes = 0;
  if (!ParseByteSize(text, 1ull << 20, &bytes) || bytes == 0 || bytes > (1ull << 50)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a size; write it like 512m or 2g"));
  }
  return bytes;
}

absl::StatusOr<uint64_t> ParseDurationSeconds(const std::string& text) {
  std::string digits = text;
  uint64_t unit = 1;
  if (!digits.empty() && std::isalpha(static_cast<unsigned char>(digits.back()))) {
    switch (digits.back()) {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = 60;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'd':
        unit = 86400;
        break;
      default:
        unit = 0;
    }
    digits.pop_back();
  }
  uint64_t n = 0;
  if (unit == 0 || !absl::SimpleAtoi(digits, &n) || n > (1ull << 40) / unit) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a duration; write it like 90s, 30m or 1h"));
  }
  return n * unit;
}

std::string FormatAgo(int64_t unix_ms, int64_t now_ms) {
  int64_t s = std::max<int64_t>(0, (now_ms - unix_ms) / 1000);
  if (s < 60) return absl::StrCat(s, "s ago");
  if (s < 3600) return absl::StrCat(s / 60, "m ago");
  if (s < 86400) return absl::StrCat(s / 3600, "h ago");
  return absl::StrCat(s / 86400, "d ago");
}

std::string FormatUnixMs(int64_t unix_ms) {
  time_t t = static_cast<time_t>(unix_ms / 1000);
  struct tm utc;
  gmtime_r(&t, &utc);
  char when[32];
  strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &utc);
  return absl::StrFormat("%s.%03dZ", when, static_cast<int>(unix_ms % 1000));
}

}  // namespace airlock
