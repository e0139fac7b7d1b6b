// The rules of a project's .airlockignore: which paths are left out when the project is captured
// into a sandbox.
//
// The file sits at the project root and uses the common subset of .gitignore syntax, so a user can
// copy lines from a .gitignore and get what git would do with them:
//   - One pattern per line. Blank lines and lines starting with '#' are ignored. Lines end at
//     '\n'; a '\r' before it is dropped (files edited on Windows), as is a UTF-8 byte order mark
//     at the start of the file.
//   - Trailing spaces are trimmed unless escaped ("foo\ " keeps one space). Leading spaces and
//     tabs are part of the pattern, as in git.
//   - A leading '!' negates the pattern: a path it matches is included again even though an
//     earlier pattern excluded it. A path inside an excluded directory cannot be included again
//     ("build/" then "!build/keep" leaves build/keep out), as in git: the walker never descends
//     into an excluded directory, and Ignored() reports such a path as ignored.
//   - A trailing '/' makes the pattern match only directories ("out/" matches the directory out
//     and everything under it, not a file named out).
//   - A pattern with a '/' at its start or in its middle is anchored to the root and matched
//     against the whole path ("/build" matches build, not src/build; "doc/frotz" matches only
//     doc/frotz). Any other pattern is matched against the last component of the path, at any
//     depth ("*.o" matches c.o and a/b/c.o).
//   - '*' matches any run of characters except '/'; '?' matches one character except '/';
//     "[...]" matches one character (never '/') of a class: ranges ("[a-z]"), a leading '!' or
//     '^' negates ("[!a]"), a ']' right after the '[' (or after the negation) is a member,
//     backslash escapes a member, and the POSIX classes [:alnum:] [:alpha:] [:blank:]
//     [:cntrl:] [:digit:] [:graph:] [:lower:] [:print:] [:punct:] [:space:] [:upper:]
//     [:xdigit:] may appear inside it.
//   - "**" as a whole component: a leading "**/" matches in all directories ("**/foo" matches foo
//     and a/b/foo), a trailing "/**" matches everything inside ("foo/**" matches foo/x and
//     foo/x/y, not foo itself), and "/**/" matches zero or more directories ("a/**/b" matches
//     a/b, a/x/b and a/x/y/b). Any other run of '*' is a single '*'.
//   - A backslash makes the next character literal: "\#file", "\!x", "\*".
//   - The last pattern that matches a path decides: excluded, or included again if it is negated.
// Matching is byte-wise and case-sensitive (git's core.ignorecase has no counterpart here).
//
// Where git silently ignores a broken pattern, Parse() refuses it so the user learns of it: an
// unterminated '[' class, an unknown [:name:] class, and a pattern ending in a lone backslash are
// errors. Git also treats "**" that follows a literal prefix ("a**/b") as "**/" (a quirk of its
// prefix optimisation); here it is a plain '*', as git's documentation says.
//
// The file is a user's, and a project captured from elsewhere may carry a hostile one, so parsing
// caps what it holds (kMaxIgnoreLineBytes, kMaxIgnorePatterns) and matching does bounded work: a
// pattern is run as a state set over the path (no backtracking), so matching one pattern costs at
// most O(path length x pattern length) however its stars are arranged, and much less in the usual
// cases (see Matches()). Ignored() runs the patterns on the path and on each parent directory.
//
// An IgnoreRules is immutable once parsed; its const methods may be called from any thread.
#ifndef AIRLOCK_WORKSPACE_IGNORE_RULES_H_
#define AIRLOCK_WORKSPACE_IGNORE_RULES_H_

#include <algorithm>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock {

// Caps on an .airlockignore. A longer line or more patterns is an error rather than a truncation,
// so what is left out never silently differs from what the user wrote.
inline constexpr size_t kMaxIgnoreLineBytes = 4096;  // not counting the '\n'
inline constexpr size_t kMaxIgnorePatterns = 10000;  // not counting comments and blank lines

class IgnoreRules {
 public:
  // No patterns: nothing is ignored.
  IgnoreRules() = default;

  // Parses the text of an .airlockignore. An error (InvalidArgumentError) names the line and says
  // what is wrong: a NUL byte, a line over kMaxIgnoreLineBytes, more than kMaxIgnorePatterns
  // patterns, an unterminated '[' class, an unknown [:name:] class, a trailing lone backslash.
  static absl::StatusOr<IgnoreRules> Parse(std::string_view text);

  // Whether the path is left out of the capture: the last pattern matching it, or one of its
  // parent directories, excludes it. path is relative to the project root, '/'-separated, with no
  // leading or trailing '/' and no "." or ".." components ("src/build/out.o"); is_dir says whether
  // it names a directory. The empty path (the root) is never ignored. Any other input gives some
  // answer, never a crash.
  bool Ignored(std::string_view path, bool is_dir) const;

  // No patterns (an empty file, or only comments and blank lines).
  bool empty() const { return patterns_.empty(); }

  // Puts the patterns of `first` before these, as if its lines came first in the file (so a
  // later '!' line here includes again what `first` leaves out).
  void Prepend(const IgnoreRules& first) {
    patterns_.insert(patterns_.begin(), first.patterns_.begin(), first.patterns_.end());
    max_tokens_ = std::max(max_tokens_, first.max_tokens_);
  }

 private:
  // One step of a compiled pattern.
  struct Token {
    enum class Kind : uint8_t {
      kLiteral,   // the byte `literal`
      kAnyChar,   // '?': one byte but '/'
      kClass,     // "[...]": one byte but '/' in classes[class_index]
      kStar,      // '*': any run of bytes without '/'
      kGlobStar,  // "**" as a whole component: any run of bytes
      // Reads nothing; put before the kGlobStar and '/' of a "**/", which may match nothing at
      // all (no directory: "a/**/b" matches a/b). The matcher may go on into the kGlobStar or
      // jump past the '/'. The jump must start here, not at the kGlobStar, which may already
      // have read bytes that no '/' ends.
      kOptionalDirs,
    };
    Kind kind = Kind::kLiteral;
    unsigned char literal = 0;
    // A class takes at least 3 bytes ("[a]") of a line of at most kMaxIgnoreLineBytes, so 16 bits
    // suffice; a small token keeps a file of long patterns from costing much more than its size.
    uint16_t class_index = 0;
  };

  struct Pattern {
    std::vector<Token> tokens;  // empty when all_literal
    std::vector<std::bitset<256>> classes;
    std::string literal;          // the bytes to compare when every token is a kLiteral
    bool all_literal = false;     // no wildcards: compare `literal`, skip the state set
    bool negated = false;         // '!': a match includes the path again
    bool dir_only = false;        // trailing '/': applies only to directories
    bool last_component = false;  // no '/' in it: matched against the path's last component

    // A bound checked before running the tokens, so that a pattern that cannot fit the text costs
    // next to nothing (most of a hostile file's long patterns end here). The tail is the tokens
    // after the last one that can read a '/' (a literal '/' or a "**"); it reads no '/', so it
    // matches the end of the text after its last '/'.
    enum class TailFit : uint8_t {
      kWholeText,           // no token reads a '/': the tail is the pattern and matches all of text
      kLastComponent,       // a literal '/' comes before it: it matches all of the last component
      kEndOfLastComponent,  // a "**" comes before it: it matches an end of the last component
    };
    TailFit tail_fit = TailFit::kWholeText;
    size_t tail_min_bytes = 0;   // one per literal, '?' and class in the tail
    bool tail_has_star = false;  // without a '*', the tail reads exactly tail_min_bytes
  };

  static bool ReadsSlash(const Token& token);
  // A pattern's line, or an InvalidArgumentError naming line_number.
  static absl::StatusOr<Pattern> Compile(std::string_view line, int line_number);
  // Whether the pattern matches all of text. cur and next are scratch space of at least
  // tokens.size() + 1 zero bytes, left zero, so that a check allocates once for all patterns.
  static bool Matches(const Pattern& pattern, std::string_view text, std::vector<uint8_t>& cur,
                      std::vector<uint8_t>& next);
  // The verdict of the last pattern matching path itself, ignoring its parents.
  bool LastMatchExcludes(std::string_view path, bool is_dir, std::vector<uint8_t>& cur,
                         std::vector<uint8_t>& next) const;

  std::vector<Pattern> patterns_;
  size_t max_tokens_ = 0;  // the longest pattern's token count, to size the scratch space once
};

}  // namespace airlock

#endif  // AIRLOCK_WORKSPACE_IGNORE_RULES_H_
