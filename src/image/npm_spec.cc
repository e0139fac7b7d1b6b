#include "src/image/npm_spec.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace airlock {

absl::Status ValidateNpmSpec(const std::string& spec) {
  auto refuse = [&](const char* why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--npm \"", spec.substr(0, 100), "\" ", why,
                     "; give a package of the registry: NAME, @SCOPE/NAME, optionally @VERSION "
                     "(e.g. --npm @anthropic-ai/claude-code or --npm opencode-ai@1.18.33)"));
  };
  if (spec.empty() || spec.size() > 214) return refuse("is not 1 to 214 characters");
  if (!absl::ascii_isalnum(spec[0]) && spec[0] != '@') {
    return refuse("must start with a letter, a digit or @");
  }
  if (absl::StrContains(spec, "://") || absl::StrContains(spec, "..") ||
      absl::StartsWith(spec, "file:") || absl::StartsWith(spec, "git") ||
      absl::StrContains(spec, ":")) {
    return refuse("is a path, a URL or a git reference");
  }
  for (char c : spec) {
    if (!absl::ascii_isalnum(c) && !strchr("@/._-~^<>=*+", c)) {
      return refuse("has a character a package name or version cannot have");
    }
  }
  // npm reads USER/REPO as a GitHub repository: only a scope's name has a slash, once.
  bool scoped = spec[0] == '@';
  size_t name_end = spec.find('@', scoped ? 1 : 0);
  std::string name = spec.substr(0, name_end);
  size_t slashes = std::count(spec.begin(), spec.end(), '/');
  if (slashes != (scoped ? 1u : 0u) || (scoped && name.find('/') == std::string::npos)) {
    return refuse("is a GitHub repository (USER/REPO), not a package of the registry");
  }
  return absl::OkStatus();
}

}  // namespace airlock
