#include "src/common/byte_size.h"

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace airlock {

bool ParseByteSize(absl::string_view text, uint64_t plain_unit, uint64_t* bytes) {
  std::string digits = absl::AsciiStrToLower(text);
  uint64_t unit = plain_unit;
  // "512mb", "512mi", "512mib": the letter before says the unit.
  for (const char* tail : {"ib", "b", "i"}) {
    if (digits.size() > 2 && absl::EndsWith(digits, tail) &&
        absl::ascii_isalpha(digits[digits.size() - strlen(tail) - 1])) {
      digits.resize(digits.size() - strlen(tail));
      break;
    }
  }
  if (!digits.empty() && absl::ascii_isalpha(digits.back())) {
    switch (digits.back()) {
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
        return false;
    }
    digits.pop_back();
  }
  uint64_t n;
  if (digits.empty() || !absl::SimpleAtoi(digits, &n) || (unit != 0 && n > UINT64_MAX / unit)) {
    return false;
  }
  *bytes = n * unit;
  return true;
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return absl::StrFormat("%.1fGiB", bytes / 1073741824.0);
  if (bytes >= (1ull << 20)) return absl::StrFormat("%.0fMiB", bytes / 1048576.0);
  if (bytes >= (1ull << 10)) return absl::StrFormat("%.0fKiB", bytes / 1024.0);
  return absl::StrCat(bytes, "B");
}

}  // namespace airlock
