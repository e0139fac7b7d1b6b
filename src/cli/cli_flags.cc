#include "src/cli/cli_flags.h"

#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace airlock {

absl::StatusOr<uint64_t> ParseSize(const std::string& text) {
  std::string digits = text;
  uint64_t unit = 1ull << 20;
  if (!digits.empty() && std::isalpha(static_cast<unsigned char>(digits.back()))) {
    char suffix = static_cast<char>(std::tolower(static_cast<unsigned char>(digits.back())));
    digits.pop_back();
    if (!digits.empty() && (suffix == 'b' || suffix == 'i')) {
      // "512mb", "512mi": the letter before says the unit.
      suffix = static_cast<char>(std::tolower(static_cast<unsigned char>(digits.back())));
      digits.pop_back();
    }
    switch (suffix) {
      case 'k':
        unit = 1ull << 10;
        break;
      case 'm':
        unit = 1ull << 20;
        break;
      case 'g':
        unit = 1ull << 30;
        break;
      case 't':
        unit = 1ull << 40;
        break;
      default:
        unit = 0;
    }
  }
  uint64_t n = 0;
  if (unit == 0 || !absl::SimpleAtoi(digits, &n) || n == 0 || n > (1ull << 50) / unit) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a size; write it like 512m or 2g"));
  }
  return n * unit;
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

std::string FormatBytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return absl::StrFormat("%.1fGiB", bytes / 1073741824.0);
  if (bytes >= (1ull << 20)) return absl::StrFormat("%.0fMiB", bytes / 1048576.0);
  if (bytes >= (1ull << 10)) return absl::StrFormat("%.0fKiB", bytes / 1024.0);
  return absl::StrCat(bytes, "B");
}

std::string FormatAgo(int64_t unix_ms, int64_t now_ms) {
  int64_t s = std::max<int64_t>(0, (now_ms - unix_ms) / 1000);
  if (s < 60) return absl::StrCat(s, "s ago");
  if (s < 3600) return absl::StrCat(s / 60, "m ago");
  if (s < 86400) return absl::StrCat(s / 3600, "h ago");
  return absl::StrCat(s / 86400, "d ago");
}

}  // namespace airlock
