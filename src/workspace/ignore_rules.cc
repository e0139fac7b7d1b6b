#include "src/workspace/ignore_rules.h"

#include <algorithm>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"

namespace airlock {
namespace {

constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";

absl::Status LineError(int line_number, std::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrFormat(".airlockignore line %d: %s", line_number, problem));
}

// Drops trailing spaces that are not escaped, as git does: "foo  " is "foo", "foo\ " keeps its
// space (the backslash stays; the matcher reads it as an escape). Only spaces, not tabs, again
// as git does.
std::string_view TrimTrailingSpaces(std::string_view line) {
  size_t end = line.size();
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == ' ') {
      if (end == line.size()) end = i;
      continue;
    }
    // A backslash protects the byte after it, which then ends any run of spaces before it.
    if (line[i] == '\\') ++i;
    end = line.size();
  }
  return line.substr(0, end);
}

// The POSIX class named between "[:" and ":]", or false if there is no such class.
bool PosixClass(std::string_view name, std::bitset<256>& members) {
  bool (*test)(unsigned char) = nullptr;
  if (name == "alnum") {
    test = absl::ascii_isalnum;
  } else if (name == "alpha") {
    test = absl::ascii_isalpha;
  } else if (name == "blank") {
    test = absl::ascii_isblank;
  } else if (name == "cntrl") {
    test = absl::ascii_iscntrl;
  } else if (name == "digit") {
    test = absl::ascii_isdigit;
  } else if (name == "graph") {
    test = absl::ascii_isgraph;
  } else if (name == "lower") {
    test = absl::ascii_islower;
  } else if (name == "print") {
    test = absl::ascii_isprint;
  } else if (name == "punct") {
    test = absl::ascii_ispunct;
  } else if (name == "space") {
    test = absl::ascii_isspace;
  } else if (name == "upper") {
    test = absl::ascii_isupper;
  } else if (name == "xdigit") {
    test = absl::ascii_isxdigit;
  } else {
    return false;
  }
  for (int c = 0; c < 256; ++c) {
    if (test(static_cast<unsigned char>(c))) members.set(c);
  }
  return true;
}

// Reads the class that starts at pattern[start] (a '['), following git's wildmatch: a ']' first
// (after any negation) is a member, '-' between two members is a range, a backslash escapes the
// byte after it, "[:name:]" is a POSIX class, and "[:" without a closing ":]" is just '[' and ':'.
// Sets *end just past the closing ']'.
absl::Status ReadClass(std::string_view pattern, size_t start, int line_number,
                       std::bitset<256>& members, size_t* end) {
  auto unterminated = [&] {
    return LineError(line_number,
                     absl::StrFormat("the '[' at column %d starts a character class that has no "
                                     "closing ']'; write \\[ for a literal '['",
                                     start + 1));
  };
  size_t p = start + 1;
  if (p >= pattern.size()) return unterminated();
  bool negated = false;
  if (pattern[p] == '!' || pattern[p] == '^') {
    negated = true;
    ++p;
  }
  // The previous member, if it can start a range (0 after a range or a POSIX class).
  int previous = -1;
  for (bool first = true;; first = false) {
    if (p >= pattern.size()) return unterminated();
    unsigned char c = static_cast<unsigned char>(pattern[p]);
    if (c == ']' && !first) break;
    if (c == '\\') {
      if (p + 1 >= pattern.size()) return unterminated();
      c = static_cast<unsigned char>(pattern[p + 1]);
      members.set(c);
      previous = c;
      p += 2;
    } else if (c == '-' && previous >= 0 && p + 1 < pattern.size() && pattern[p + 1] != ']') {
      size_t q = p + 1;
      if (pattern[q] == '\\') {
        ++q;
        if (q >= pattern.size()) return unterminated();
      }
      unsigned char last = static_cast<unsigned char>(pattern[q]);
      // A reversed range ("[z-a]") has no members, as in git.
      for (int m = previous; m <= last; ++m) members.set(m);
      previous = -1;
      p = q + 1;
    } else if (c == '[' && p + 1 < pattern.size() && pattern[p + 1] == ':') {
      size_t close = pattern.find(']', p + 2);
      if (close == std::string_view::npos) return unterminated();
      if (close < p + 3 || pattern[close - 1] != ':') {
        // No ":]" before the next ']': the '[' is an ordinary member, and so is the ':' after it.
        members.set('[');
        previous = '[';
        ++p;
        continue;
      }
      std::string_view name = pattern.substr(p + 2, close - 1 - (p + 2));
      if (!PosixClass(name, members)) {
        return LineError(
            line_number,
            absl::StrFormat("[:%s:] at column %d is not a character class; the classes are "
                            "alnum, alpha, blank, cntrl, digit, graph, lower, print, punct, "
                            "space, upper and xdigit",
                            absl::CHexEscape(absl::string_view(name.data(), name.size())), p + 1));
      }
      previous = -1;
      p = close + 1;
    } else {
      members.set(c);
      previous = c;
      ++p;
    }
  }
  if (negated) members.flip();
  *end = p + 1;
  return absl::OkStatus();
}

}  // namespace

// Whether the token can read a '/': a literal '/', or a "**" (which reads anything).
bool IgnoreRules::ReadsSlash(const Token& token) {
  return token.kind == Token::Kind::kGlobStar ||
         (token.kind == Token::Kind::kLiteral && token.literal == '/');
}

absl::StatusOr<IgnoreRules::Pattern> IgnoreRules::Compile(std::string_view line, int line_number) {
  Pattern pattern;
  std::string_view text = line;
  if (text.front() == '!') {
    pattern.negated = true;
    text.remove_prefix(1);
  }
  // As in git, the trailing '/' is dropped before looking for a '/' that anchors the pattern, so
  // "out/" matches at any depth and "doc/out/" only at the root.
  if (!text.empty() && text.back() == '/') {
    pattern.dir_only = true;
    text.remove_suffix(1);
  }
  pattern.last_component = text.find('/') == std::string_view::npos;
  if (!pattern.last_component && text.front() == '/') text.remove_prefix(1);

  using Kind = Token::Kind;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    Token token;
    if (c == '\\') {
      if (i + 1 == text.size()) {
        return LineError(line_number,
                         "the pattern ends in a lone backslash, which escapes nothing; write \\\\ "
                         "for a literal backslash");
      }
      token.literal = static_cast<unsigned char>(text[i + 1]);
      i += 2;
    } else if (c == '?') {
      token.kind = Kind::kAnyChar;
      ++i;
    } else if (c == '[') {
      std::bitset<256> members;
      size_t end = 0;
      absl::Status status = ReadClass(text, i, line_number, members, &end);
      if (!status.ok()) return status;
      token.kind = Kind::kClass;
      token.class_index = static_cast<uint16_t>(pattern.classes.size());
      pattern.classes.push_back(members);
      i = end;
    } else if (c == '*') {
      size_t j = i;
      while (j < text.size() && text[j] == '*') ++j;
      // "**" counts only as a whole component; elsewhere a run of stars is one '*'.
      const bool starts_component = i == 0 || text[i - 1] == '/';
      const bool before_slash =
          j < text.size() &&
          (text[j] == '/' || (text[j] == '\\' && j + 1 < text.size() && text[j + 1] == '/'));
      const bool ends_component = j == text.size() || before_slash;
      if (j - i >= 2 && starts_component && ends_component) {
        // The '/' (plain or escaped) is the next token, so the jump lands just past it.
        if (before_slash) pattern.tokens.push_back(Token{.kind = Kind::kOptionalDirs});
        token.kind = Kind::kGlobStar;
      } else {
        token.kind = Kind::kStar;
      }
      i = j;
    } else {
      token.literal = static_cast<unsigned char>(c);
      ++i;
    }
    pattern.tokens.push_back(token);
  }
  pattern.all_literal = std::all_of(pattern.tokens.begin(), pattern.tokens.end(),
                                    [](const Token& t) { return t.kind == Kind::kLiteral; });
  if (pattern.all_literal) {
    pattern.literal.reserve(pattern.tokens.size());
    for (const Token& token : pattern.tokens) pattern.literal.push_back(token.literal);
  }

  size_t tail = pattern.tokens.size();
  while (tail > 0 && !ReadsSlash(pattern.tokens[tail - 1])) --tail;
  if (tail > 0) {
    pattern.tail_fit = pattern.tokens[tail - 1].kind == Kind::kGlobStar
                           ? Pattern::TailFit::kEndOfLastComponent
                           : Pattern::TailFit::kLastComponent;
  }
  for (size_t i = tail; i < pattern.tokens.size(); ++i) {
    if (pattern.tokens[i].kind == Kind::kStar) {
      pattern.tail_has_star = true;
    } else {
      ++pattern.tail_min_bytes;  // a literal, '?' or class: the tail holds no "**"
    }
  }
  // Matches() needs only the literal of an all-literal pattern. Otherwise drop the slack that
  // push_back left: up to 10000 patterns of 4096 bytes are kept for the life of the rules.
  if (pattern.all_literal) {
    pattern.tokens = std::vector<Token>();
  } else {
    pattern.tokens.shrink_to_fit();
    pattern.classes.shrink_to_fit();
  }
  return pattern;
}

absl::StatusOr<IgnoreRules> IgnoreRules::Parse(std::string_view text) {
  IgnoreRules rules;
  if (text.substr(0, kByteOrderMark.size()) == kByteOrderMark) {
    text.remove_prefix(kByteOrderMark.size());
  }
  int line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);

    // A NUL is checked for everywhere, comments too: it means this is not the text file it should
    // be, and a pattern cut at a NUL by some other tool would differ from this one.
    const size_t nul = line.find('\0');
    if (nul != std::string_view::npos) {
      return LineError(line_number,
                       absl::StrFormat("a NUL byte at column %d; .airlockignore is a text file, "
                                       "one pattern per line",
                                       nul + 1));
    }
    if (line.size() > kMaxIgnoreLineBytes) {
      return LineError(line_number,
                       absl::StrFormat("the line is %d bytes; a line may be at most %d",
                                       line.size(), kMaxIgnoreLineBytes));
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    line = TrimTrailingSpaces(line);
    if (line.empty()) continue;

    absl::StatusOr<Pattern> pattern = Compile(line, line_number);
    if (!pattern.ok()) return pattern.status();
    // "!", "/" and "!/" leave nothing to match; git keeps them as patterns that never match.
    if (pattern->all_literal && pattern->literal.empty()) continue;
    if (rules.patterns_.size() == kMaxIgnorePatterns) {
      return LineError(line_number, absl::StrFormat("more than %d patterns; an .airlockignore may "
                                                    "hold at most %d",
                                                    kMaxIgnorePatterns, kMaxIgnorePatterns));
    }
    rules.max_tokens_ = std::max(rules.max_tokens_, pattern->tokens.size());
    rules.patterns_.push_back(*std::move(pattern));
  }
  return rules;
}

// Runs the pattern as a nondeterministic automaton: state i means "the first i tokens have
// matched the bytes read so far", and every state that can be reached is carried along at once,
// so there is no backtracking: each byte costs at most one pass over the tokens, O(|text| x
// |tokens|) in all, whatever the stars.
//
// Most of that pass is skipped. Only the span of live states is visited, and a state that a live
// star above it dominates is dropped: whatever the pattern can still match from state i, it can
// match from a live star j > i too, since j can swallow the bytes that tokens i..j-1 would have
// read. A '*' can do so only when none of those tokens reads a '/' (a literal '/' or a "**"); a
// "**" always can. So "*a*a*a*a*b" keeps about two live states instead of one per star, and a
// check against a long name stays linear in it.
//
// cur and next are zero on entry and are left zero, so a caller sizes them once for every
// pattern.
bool IgnoreRules::Matches(const Pattern& pattern, std::string_view text, std::vector<uint8_t>& cur,
                          std::vector<uint8_t>& next) {
  if (pattern.all_literal) return text == pattern.literal;

  // The tail must fit the end of the text (see Pattern::TailFit). When the '/' before it is the
  // one of a "**/" that may match nothing and the text has no '/', the tail matches all of the
  // text, which is then its last component too.
  std::string_view end = text;
  if (pattern.tail_fit != Pattern::TailFit::kWholeText) {
    const size_t slash = text.rfind('/');
    if (slash != std::string_view::npos) end = text.substr(slash + 1);
  }
  if (end.size() < pattern.tail_min_bytes) return false;
  if (!pattern.tail_has_star && pattern.tail_fit != Pattern::TailFit::kEndOfLastComponent &&
      end.size() != pattern.tail_min_bytes) {
    return false;
  }

  using Kind = Token::Kind;
  const std::vector<Token>& tokens = pattern.tokens;
  const size_t m = tokens.size();  // state m: the whole pattern has matched

  // Adds the states reachable without reading a byte: past a star (it may match nothing), and
  // from a kOptionalDirs into its "**/" or past it (no directory). These lead only forward, so
  // one pass upward from lo reaches all of them; hi grows to cover them.
  auto close = [&](std::vector<uint8_t>& states, size_t lo, size_t& hi) {
    for (size_t i = lo; i <= hi && i < m; ++i) {
      if (!states[i]) continue;
      switch (tokens[i].kind) {
        case Kind::kStar:
        case Kind::kGlobStar:
          states[i + 1] = 1;
          hi = std::max(hi, i + 1);
          break;
        case Kind::kOptionalDirs:
          // Compile put the kGlobStar and its '/' right after, so i + 3 <= m.
          states[i + 1] = 1;
          states[i + 3] = 1;
          hi = std::max(hi, i + 3);
          break;
        default:
          break;
      }
    }
  };
  auto reads_slash = [&](size_t i) { return ReadsSlash(tokens[i]); };
  // Drops the dominated states (see above) and narrows lo..hi to the live ones. Returns false
  // when none is left.
  auto prune = [&](std::vector<uint8_t>& states, size_t& lo, size_t& hi) {
    enum { kNone, kStarAbove, kGlobStarAbove } above = kNone;
    bool any = false;
    size_t live_lo = lo;
    size_t live_hi = hi;
    for (size_t i = hi + 1; i-- > lo;) {
      if (i < m && above == kStarAbove && reads_slash(i)) above = kNone;
      if (!states[i]) continue;
      if (above != kNone) {
        states[i] = 0;
        continue;
      }
      if (!any) live_hi = i;
      any = true;
      live_lo = i;
      if (i < m && tokens[i].kind == Kind::kStar) above = kStarAbove;
      if (i < m && tokens[i].kind == Kind::kGlobStar) above = kGlobStarAbove;
    }
    lo = live_lo;
    hi = live_hi;
    return any;
  };

  size_t lo = 0;
  size_t hi = 0;
  cur[0] = 1;
  close(cur, lo, hi);
  prune(cur, lo, hi);
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    for (size_t i = lo; i <= hi && i < m; ++i) {
      if (!cur[i]) continue;
      const Token& token = tokens[i];
      switch (token.kind) {
        case Kind::kLiteral:
          if (c == token.literal) next[i + 1] = 1;
          break;
        case Kind::kAnyChar:
          if (c != '/') next[i + 1] = 1;
          break;
        case Kind::kClass:
          if (c != '/' && pattern.classes[token.class_index].test(c)) next[i + 1] = 1;
          break;
        case Kind::kStar:
          if (c != '/') next[i] = 1;
          break;
        case Kind::kGlobStar:
          next[i] = 1;
          break;
        case Kind::kOptionalDirs:
          break;  // reads nothing; close() has moved on from it
      }
    }
    std::fill(cur.begin() + lo, cur.begin() + hi + 1, 0);
    hi = std::min(hi + 1, m);
    close(next, lo, hi);
    // No live state means nothing can match the rest, so stop reading. prune() has left next
    // all zero.
    if (!prune(next, lo, hi)) return false;
    std::swap(cur, next);
  }
  const bool matched = cur[m] != 0;
  std::fill(cur.begin() + lo, cur.begin() + hi + 1, 0);
  return matched;
}

bool IgnoreRules::LastMatchExcludes(std::string_view path, bool is_dir, std::vector<uint8_t>& cur,
                                    std::vector<uint8_t>& next) const {
  const size_t slash = path.rfind('/');
  const std::string_view last = slash == std::string_view::npos ? path : path.substr(slash + 1);
  for (auto it = patterns_.rbegin(); it != patterns_.rend(); ++it) {
    if (it->dir_only && !is_dir) continue;
    if (Matches(*it, it->last_component ? last : path, cur, next)) return !it->negated;
  }
  return false;
}

bool IgnoreRules::Ignored(std::string_view path, bool is_dir) const {
  if (patterns_.empty() || path.empty()) return false;
  // Scratch for Matches(), sized for the longest pattern; it leaves them zero between patterns.
  std::vector<uint8_t> cur(max_tokens_ + 1, 0);
  std::vector<uint8_t> next(max_tokens_ + 1, 0);
  // A path under an excluded directory is excluded whatever its own patterns say, as in git,
  // where a negation cannot reach into a directory that is not walked. The walker never asks
  // about such paths, but a caller that does gets the same answer.
  for (size_t slash = path.find('/'); slash != std::string_view::npos;
       slash = path.find('/', slash + 1)) {
    if (LastMatchExcludes(path.substr(0, slash), /*is_dir=*/true, cur, next)) return true;
  }
  return LastMatchExcludes(path, is_dir, cur, next);
}

}  // namespace airlock
