// A build context's `.dockerignore`, with Docker's semantics: one pattern per line, `#`
// comments, `!` re-includes, paths cleaned and taken from the context's root (a leading `/`
// means nothing), `*` and `?` within one path element, `[a-z]` classes, `**` any number of
// elements, the escape `\`; the last pattern that matches decides, and a pattern that matches
// a directory matches everything under it. The file is a client's, so matching is linear in
// the pattern and path (no backtracking) and sizes are capped.
#ifndef AIRLOCK_IMAGE_DOCKER_IGNORE_H_
#define AIRLOCK_IMAGE_DOCKER_IGNORE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock {

class DockerIgnore {
 public:
  // INVALID_ARGUMENT naming the line for a pattern Docker would refuse too (an unterminated
  // `[`, a trailing `\`), or a file over 1 MiB.
  [[nodiscard]] static absl::StatusOr<DockerIgnore> Parse(absl::string_view text);

  // Whether the path (relative to the context, `/`-separated, no `.` or `..` elements) is left
  // out of the context.
  bool Excluded(absl::string_view path) const;

  // Whether any pattern re-includes something (`!`): then a directory left out may still hold
  // files that are not, and a walk must look inside it.
  bool HasExceptions() const { return has_exceptions_; }

  // The glob alone: whether the pattern matches the whole path (no parent rule). For tests.
  static bool Match(absl::string_view pattern, absl::string_view path);

 private:
  // A glob compiled into steps, matched by following every live step at once (an NFA), so
  // a hostile pattern like `*a*a*a*b` costs pattern x path, never more.
  struct Step {
    enum Kind { kLiteral, kOneChar, kClass, kStar, kAny, kDirs } kind;
    char literal = 0;
    std::string set;  // kClass: the characters, ranges expanded
    bool negated = false;
  };
  struct Pattern {
    std::vector<Step> steps;
    bool exclusion = false;  // a `!` line
  };
  [[nodiscard]] static absl::StatusOr<std::vector<Step>> Compile(absl::string_view glob);
  static bool RunSteps(const std::vector<Step>& steps, absl::string_view path);

  std::vector<Pattern> patterns_;
  bool has_exceptions_ = false;
};

// Cleans a slash path as Go's path.Clean does (collapses `//`, `.`, and `..` against what
// precedes it; a leading `/` kept), the form patterns and paths are compared in.
std::string CleanSlashPath(absl::string_view path);

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_DOCKER_IGNORE_H_
