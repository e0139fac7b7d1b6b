#include "src/image/docker_ignore.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace airlock {
namespace {

constexpr size_t kMaxIgnoreBytes = 1 << 20;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

// Compiles as moby's pattern matcher does: `**` at the end is anything; `**` elsewhere (a `/`
// after it eaten) is any number of leading elements; `*` and `?` never cross a `/`.
absl::StatusOr<std::vector<DockerIgnore::Step>> DockerIgnore::Compile(absl::string_view glob) {
  std::vector<Step> steps;
  for (size_t i = 0; i < glob.size(); ++i) {
    char c = glob[i];
    if (c == '*') {
      if (i + 1 < glob.size() && glob[i + 1] == '*') {
        ++i;
        if (i + 1 < glob.size() && glob[i + 1] == '/') ++i;
        steps.push_back({i + 1 == glob.size() ? Step::kAny : Step::kDirs});
      } else {
        steps.push_back({Step::kStar});
      }
    } else if (c == '?') {
      steps.push_back({Step::kOneChar});
    } else if (c == '\\') {
      if (i + 1 == glob.size()) return absl::InvalidArgumentError("a \\ at the end of a pattern");
      steps.push_back({Step::kLiteral, glob[++i]});
    } else if (c == '[') {
      Step s{Step::kClass};
      size_t j = i + 1;
      if (j < glob.size() && glob[j] == '^') {
        s.negated = true;
        ++j;
      }
      bool closed = false;
      bool first = true;
      for (; j < glob.size(); ++j) {
        char a = glob[j];
        if (a == ']' && !first) {
          closed = true;
          break;
        }
        first = false;
        if (a == '\\') {
          if (++j == glob.size()) break;
          a = glob[j];
        }
        if (j + 2 < glob.size() && glob[j + 1] == '-' && glob[j + 2] != ']') {
          char b = glob[j + 2];
          if (b == '\\' && j + 3 < glob.size()) b = glob[++j + 2];
          if (b < a) return absl::InvalidArgumentError("a range [b-a] that runs backwards");
          for (int x = static_cast<unsigned char>(a); x <= static_cast<unsigned char>(b); ++x) {
            s.set += static_cast<char>(x);
          }
          j += 2;
        } else {
          s.set += a;
        }
      }
      if (!closed) return absl::InvalidArgumentError("a [ without its ]");
      i = j;
      steps.push_back(std::move(s));
    } else {
      steps.push_back({Step::kLiteral, c});
    }
  }
  return steps;
}

bool DockerIgnore::RunSteps(const std::vector<Step>& steps, absl::string_view path) {
  // live[k]: the match may be at step k; inside[k]: within a kDirs step's elements, which
  // must end with a '/' before step k+1 (only its start may skip it).
  std::vector<char> live(steps.size() + 1, 0), next(steps.size() + 1, 0);
  std::vector<char> inside(steps.size(), 0), next_inside(steps.size(), 0);
  auto close = [&steps](std::vector<char>& states) {
    for (size_t k = 0; k < steps.size(); ++k) {  // steps that may match nothing
      if (states[k] && (steps[k].kind == Step::kStar || steps[k].kind == Step::kAny ||
                        steps[k].kind == Step::kDirs)) {
        states[k + 1] = 1;
      }
    }
  };
  live[0] = 1;
  close(live);
  for (char c : path) {
    std::fill(next.begin(), next.end(), 0);
    std::fill(next_inside.begin(), next_inside.end(), 0);
    for (size_t k = 0; k < steps.size(); ++k) {
      const Step& s = steps[k];
      if (s.kind == Step::kDirs && (live[k] || inside[k])) {
        next_inside[k] = 1;
        if (c == '/') next[k + 1] = 1;
        continue;
      }
      if (!live[k]) continue;
      switch (s.kind) {
        case Step::kLiteral:
          if (c == s.literal) next[k + 1] = 1;
          break;
        case Step::kOneChar:
          if (c != '/') next[k + 1] = 1;
          break;
        case Step::kClass:
          if (c != '/' && (s.set.find(c) != std::string::npos) != s.negated) next[k + 1] = 1;
          break;
        case Step::kStar:
          if (c != '/') next[k] = 1;
          break;
        case Step::kAny:
          next[k] = 1;
          break;
        case Step::kDirs:
          break;
      }
    }
    close(next);
    live.swap(next);
    inside.swap(next_inside);
    bool any = false;
    for (char v : live) any = any || v;
    for (char v : inside) any = any || v;
    if (!any) return false;
  }
  return live[steps.size()] != 0;
}

std::string CleanSlashPath(absl::string_view path) {
  bool rooted = !path.empty() && path.front() == '/';
  std::vector<absl::string_view> out;
  for (absl::string_view e : absl::StrSplit(path, '/')) {
    if (e.empty() || e == ".") continue;
    if (e == "..") {
      if (!out.empty() && out.back() != "..") {
        out.pop_back();
      } else if (!rooted) {
        out.push_back(e);
      }
      continue;
    }
    out.push_back(e);
  }
  std::string joined = absl::StrJoin(out, "/");
  if (rooted) return "/" + joined;
  return joined.empty() ? "." : joined;
}

bool DockerIgnore::Match(absl::string_view pattern, absl::string_view path) {
  absl::StatusOr<std::vector<Step>> steps = Compile(pattern);
  return steps.ok() && RunSteps(*steps, path);
}

absl::StatusOr<DockerIgnore> DockerIgnore::Parse(absl::string_view text) {
  if (text.size() > kMaxIgnoreBytes) {
    return absl::InvalidArgumentError(".dockerignore is over 1 MiB");
  }
  DockerIgnore ignore;
  size_t line = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line;
    if (!raw.empty() && raw.front() == '#') continue;
    absl::string_view p = raw;
    while (!p.empty() && IsSpace(p.front())) p.remove_prefix(1);
    while (!p.empty() && IsSpace(p.back())) p.remove_suffix(1);
    if (p.empty()) continue;
    Pattern pattern;
    if (p.front() == '!') {
      pattern.exclusion = true;
      p.remove_prefix(1);
      while (!p.empty() && IsSpace(p.front())) p.remove_prefix(1);
    }
    if (p.empty()) continue;
    std::string glob = CleanSlashPath(p);
    if (glob.size() > 1 && glob.front() == '/') glob.erase(0, 1);
    absl::StatusOr<std::vector<Step>> compiled = Compile(glob);
    if (!compiled.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(".dockerignore line ", line, ": ",
                                                     compiled.status().message(), " in \"",
                                                     raw.substr(0, 200), "\""));
    }
    pattern.steps = std::move(*compiled);
    ignore.has_exceptions_ = ignore.has_exceptions_ || pattern.exclusion;
    ignore.patterns_.push_back(std::move(pattern));
  }
  return ignore;
}

bool DockerIgnore::Excluded(absl::string_view path) const {
  bool matched = false;
  std::vector<absl::string_view> parents;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '/') parents.push_back(path.substr(0, i));
  }
  for (const Pattern& p : patterns_) {
    if (p.exclusion != matched) continue;  // nothing this pattern could change
    bool match = RunSteps(p.steps, path);
    for (size_t k = 0; !match && k < parents.size(); ++k) match = RunSteps(p.steps, parents[k]);
    if (match) matched = !p.exclusion;
  }
  return matched;
}

}  // namespace airlock
