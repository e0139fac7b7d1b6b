#include "src/net/public_suffix.h"

#include <set>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "src/common/file_util.h"

namespace airlock::net {
namespace {

// The list is a few hundred KiB; a file far larger is not it.
constexpr size_t kMaxListBytes = 8 << 20;

struct Rules {
  std::set<std::string, std::less<>> exact, wildcard_parents, exceptions;
};

Rules Parse(const std::string& text) {
  Rules rules;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    // A rule is the first word of a line; "//" starts a comment.
    line = absl::StripAsciiWhitespace(line);
    line = line.substr(0, line.find_first_of(" \t"));
    if (line.empty() || absl::StartsWith(line, "//")) continue;
    std::string rule = absl::AsciiStrToLower(line);
    if (rule.starts_with("!")) {
      rules.exceptions.insert(rule.substr(1));
    } else if (rule.starts_with("*.")) {
      rules.wildcard_parents.insert(rule.substr(2));
    } else {
      rules.exact.insert(rule);
    }
  }
  return rules;
}

bool Matches(const Rules& rules, const std::string& name) {
  if (name.find('.') == std::string::npos) return true;  // a top-level domain
  if (rules.exceptions.contains(name)) return false;
  if (rules.exact.contains(name)) return true;
  std::string_view parent = std::string_view(name).substr(name.find('.') + 1);
  return rules.wildcard_parents.contains(parent);
}

}  // namespace

bool IsPublicSuffixIn(const std::string& list, const std::string& name) {
  return Matches(Parse(list), name);
}

bool IsPublicSuffix(const std::string& name) {
  static const Rules* const rules = [] {
    absl::StatusOr<std::string> text = ReadFileToString(kPublicSuffixList, kMaxListBytes);
    return new Rules(text.ok() ? Parse(*text) : Rules());
  }();
  return Matches(*rules, name);
}

}  // namespace airlock::net
