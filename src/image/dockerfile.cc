#include "src/image/dockerfile.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

constexpr size_t kMaxExpandedBytes = 1 << 20;
constexpr int kMaxExpansionDepth = 32;

struct Keyword {
  const char* name;
  DockerInstructionKind kind;
};
constexpr Keyword kKeywords[] = {
    {"FROM", DockerInstructionKind::kFrom},
    {"RUN", DockerInstructionKind::kRun},
    {"COPY", DockerInstructionKind::kCopy},
    {"ADD", DockerInstructionKind::kAdd},
    {"ENV", DockerInstructionKind::kEnv},
    {"ARG", DockerInstructionKind::kArg},
    {"WORKDIR", DockerInstructionKind::kWorkdir},
    {"USER", DockerInstructionKind::kUser},
    {"LABEL", DockerInstructionKind::kLabel},
    {"EXPOSE", DockerInstructionKind::kExpose},
    {"ENTRYPOINT", DockerInstructionKind::kEntrypoint},
    {"CMD", DockerInstructionKind::kCmd},
    {"SHELL", DockerInstructionKind::kShell},
    {"VOLUME", DockerInstructionKind::kVolume},
    {"STOPSIGNAL", DockerInstructionKind::kStopSignal},
    {"HEALTHCHECK", DockerInstructionKind::kHealthcheck},
};

// The flags each instruction takes, and what an unknown one is told.
struct FlagRule {
  DockerInstructionKind kind;
  std::vector<std::string> allowed;
};
const std::vector<FlagRule>& FlagRules() {
  static const auto* rules = new std::vector<FlagRule>{
      {DockerInstructionKind::kFrom, {"platform"}},
      {DockerInstructionKind::kRun, {"network"}},
      {DockerInstructionKind::kCopy, {"from", "chown", "chmod", "link"}},
      {DockerInstructionKind::kAdd, {"chown", "chmod", "link"}},
      {DockerInstructionKind::kHealthcheck,
       {"interval", "timeout", "start-period", "start-interval", "retries"}},
  };
  return *rules;
}

absl::Status LineError(size_t line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("Dockerfile line ", line, ": ", what));
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

absl::string_view TrimSpace(absl::string_view s) {
  while (!s.empty() && (IsSpace(s.front()) || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (IsSpace(s.back()) || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Splits at unquoted, unescaped whitespace, keeping quotes and escapes in the words.
std::vector<std::string> SplitRaw(absl::string_view text, char escape) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quote == 0 && (IsSpace(c) || c == '\n')) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    word += c;
    if (c == escape && quote != '\'' && i + 1 < text.size()) {
      word += text[++i];
    } else if (quote == 0 && (c == '"' || c == '\'')) {
      quote = c;
    } else if (c == quote) {
      quote = 0;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

// A JSON array of strings, or nothing when the text is not one (then it is the shell form).
std::optional<std::vector<std::string>> JsonStrings(absl::string_view text) {
  text = TrimSpace(text);
  if (text.empty() || text.front() != '[') return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) return std::nullopt;
  std::vector<std::string> out;
  for (const nlohmann::json& e : j) {
    if (!e.is_string()) return std::nullopt;
    out.push_back(e.get<std::string>());
  }
  return out;
}

// A word of a JSON form made a raw word again: its quotes and escapes taken literally.
std::string QuoteLiterally(const std::string& s, char escape) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\'' || c == escape) out += escape;
    out += c;
  }
  return out;
}

// COPY's, ADD's, EXPOSE's and VOLUME's words: a JSON array's strings (taken literally), or the
// words of the text.
std::vector<std::string> JsonOrWords(absl::string_view text, char escape) {
  std::optional<std::vector<std::string>> json = JsonStrings(text);
  if (!json) return SplitRaw(text, escape);
  std::vector<std::string> words;
  for (const std::string& w : *json) words.push_back(QuoteLiterally(w, escape));
  return words;
}

// Heredoc markers (<<NAME, <<-NAME, <<'NAME', <<"NAME") outside quotes, in order.
struct HeredocMarker {
  std::string name;
  bool strip_tabs = false;
  bool expand = true;
  std::string text;  // as written
};
std::vector<HeredocMarker> FindHeredocs(absl::string_view line, char escape) {
  std::vector<HeredocMarker> out;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == escape && quote != '\'' && i + 1 < line.size()) {
      ++i;
      continue;
    }
    if (quote != 0) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
      continue;
    }
    if (c != '<' || i + 1 >= line.size() || line[i + 1] != '<') continue;
    if (i + 2 < line.size() && line[i + 2] == '<') {  // <<< is a here-string, not a heredoc
      i += 2;
      continue;
    }
    size_t j = i + 2;
    HeredocMarker m;
    if (j < line.size() && line[j] == '-') {
      m.strip_tabs = true;
      ++j;
    }
    char q = 0;
    if (j < line.size() && (line[j] == '"' || line[j] == '\'')) q = line[j++];
    size_t start = j;
    while (j < line.size() && (IsNameChar(line[j]) || line[j] == '.' || line[j] == '-')) ++j;
    if (j == start) continue;
    m.name = std::string(line.substr(start, j - start));
    if (q != 0) {
      if (j >= line.size() || line[j] != q) continue;
      ++j;
      m.expand = false;
    }
    m.text = std::string(line.substr(i, j - i));
    out.push_back(std::move(m));
    i = j - 1;
  }
  return out;
}

// Takes `--name=value` / `--name` flags off the front of rest.
absl::Status TakeFlags(size_t line, DockerInstructionKind kind, absl::string_view* rest,
                       std::map<std::string, std::string>* flags) {
  const std::vector<std::string>* allowed = nullptr;
  for (const FlagRule& r : FlagRules()) {
    if (r.kind == kind) allowed = &r.allowed;
  }
  while (absl::StartsWith(*rest, "--")) {
    size_t end = 0;
    while (end < rest->size() && !IsSpace((*rest)[end]) && (*rest)[end] != '\n') ++end;
    absl::string_view flag = rest->substr(2, end - 2);
    *rest = TrimSpace(rest->substr(end));
    std::string name(flag.substr(0, flag.find('=')));
    std::string value = flag.find('=') == absl::string_view::npos
                            ? std::string()
                            : std::string(flag.substr(flag.find('=') + 1));
    const char* keyword = DockerInstructionName(kind);
    if (kind == DockerInstructionKind::kRun && name == "mount") {
      return LineError(line,
                       "RUN --mount is not supported: take the --mount flag out; for a "
                       "secret, build with --secret NAME=SOURCE@HOST (the RUN sees $NAME, "
                       "requests to HOST carry the value); fetch what a cache mount held over "
                       "the build's network (--allow HOST)");
    }
    if (allowed == nullptr || std::find(allowed->begin(), allowed->end(), name) == allowed->end()) {
      return LineError(
          line,
          absl::StrCat(keyword, " takes no flag --", name,
                       allowed == nullptr || allowed->empty()
                           ? std::string()
                           : absl::StrCat(" (it takes --", absl::StrJoin(*allowed, ", --"), ")")));
    }
    if (flags->count(name) != 0) {
      return LineError(line, absl::StrCat(keyword, " --", name, " is given twice"));
    }
    if (value.empty() && name != "link") {
      return LineError(line,
                       absl::StrCat(keyword, " --", name, " needs a value: --", name, "=VALUE"));
    }
    (*flags)[name] = value;
  }
  return absl::OkStatus();
}

// ENV and LABEL: name=value pairs, or (ENV NAME VALUE, LABEL NAME VALUE) the old form of one.
absl::Status ParsePairs(size_t line, const char* keyword, absl::string_view rest, char escape,
                        std::vector<std::pair<std::string, std::optional<std::string>>>* pairs) {
  std::vector<std::string> words = SplitRaw(rest, escape);
  if (words.empty()) {
    return LineError(line, absl::StrCat(keyword, " needs NAME=VALUE"));
  }
  if (words[0].find('=') == std::string::npos) {
    absl::string_view value = TrimSpace(rest.substr(std::min(rest.size(), words[0].size())));
    if (value.empty()) {
      return LineError(line, absl::StrCat(keyword, " ", words[0], " needs a value: ", keyword, " ",
                                          words[0], "=VALUE"));
    }
    pairs->emplace_back(words[0], std::string(value));
    return absl::OkStatus();
  }
  for (const std::string& w : words) {
    size_t eq = w.find('=');
    if (eq == std::string::npos || eq == 0) {
      return LineError(line, absl::StrCat(keyword, " takes NAME=VALUE pairs; \"", w,
                                          "\" is not one (quote values with spaces)"));
    }
    pairs->emplace_back(w.substr(0, eq), w.substr(eq + 1));
  }
  return absl::OkStatus();
}

absl::Status CheckVariableName(size_t line, const char* keyword, const std::string& name) {
  bool ok = !name.empty() && IsNameStart(name[0]) &&
            std::all_of(name.begin(), name.end(), [](char c) { return IsNameChar(c); });
  if (!ok) {
    return LineError(line, absl::StrCat(keyword, " names a variable \"", name,
                                        "\": use letters, digits and _ (not first a digit)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DockerInstruction> ParseInstruction(size_t line, absl::string_view logical,
                                                   std::vector<DockerHeredoc> heredocs,
                                                   char escape) {
  DockerInstruction ins;
  ins.line = line;
  ins.original = std::string(TrimSpace(logical));
  absl::string_view text = TrimSpace(logical);
  size_t end = 0;
  while (end < text.size() && !IsSpace(text[end]) && text[end] != '\n') ++end;
  std::string keyword = absl::AsciiStrToUpper(text.substr(0, end));
  absl::string_view rest = TrimSpace(text.substr(end));
  if (keyword == "ONBUILD") {
    return LineError(line,
                     "ONBUILD is not supported: Airlock runs no triggers from a base image; put "
                     "those instructions in the Dockerfile that uses this image");
  }
  if (keyword == "MAINTAINER") {  // deprecated by Docker: the label it stood for
    ins.kind = DockerInstructionKind::kLabel;
    ins.pairs.emplace_back("maintainer", QuoteLiterally(std::string(rest), escape));
    return ins;
  }
  const Keyword* found = nullptr;
  for (const Keyword& k : kKeywords) {
    if (keyword == k.name) found = &k;
  }
  if (found == nullptr) {
    return LineError(line, absl::StrCat("unknown instruction \"", keyword.substr(0, 40),
                                        "\" (Airlock builds FROM, RUN, COPY, ADD, ENV, ARG, "
                                        "WORKDIR, USER, LABEL, EXPOSE, ENTRYPOINT, CMD, SHELL, "
                                        "VOLUME, STOPSIGNAL and HEALTHCHECK)"));
  }
  ins.kind = found->kind;
  absl::Status flags = TakeFlags(line, ins.kind, &rest, &ins.flags);
  if (!flags.ok()) return flags;
  ins.rest = std::string(rest);
  ins.heredocs = std::move(heredocs);
  const char* name = found->name;
  auto needs = [&](absl::string_view what) {
    return LineError(line, absl::StrCat(name, " needs ", what));
  };
  switch (ins.kind) {
    case DockerInstructionKind::kFrom: {
      ins.words = SplitRaw(rest, escape);
      if (ins.words.size() == 3 && absl::AsciiStrToLower(ins.words[1]) == "as") break;
      if (ins.words.size() != 1) return needs("an image and, if you like, AS NAME");
      break;
    }
    case DockerInstructionKind::kRun:
    case DockerInstructionKind::kCmd:
    case DockerInstructionKind::kEntrypoint:
    case DockerInstructionKind::kShell:
    case DockerInstructionKind::kHealthcheck: {
      absl::string_view command = rest;
      if (ins.kind == DockerInstructionKind::kHealthcheck) {
        std::vector<std::string> words = SplitRaw(rest, escape);
        if (words.size() == 1 && absl::AsciiStrToUpper(words[0]) == "NONE") break;
        if (words.empty() || absl::AsciiStrToUpper(words[0]) != "CMD") {
          return needs("CMD COMMAND or NONE");
        }
        command = TrimSpace(rest.substr(rest.find(words[0]) + words[0].size()));
      }
      if (std::optional<std::vector<std::string>> argv = JsonStrings(command)) {
        ins.command.exec_form = true;
        ins.command.argv = std::move(*argv);
        if (ins.command.argv.empty() && ins.kind != DockerInstructionKind::kCmd &&
            ins.kind != DockerInstructionKind::kEntrypoint) {
          return needs("a command");
        }
        break;
      }
      if (ins.kind == DockerInstructionKind::kShell) {
        return needs("a JSON array: SHELL [\"/bin/bash\", \"-c\"]");
      }
      if (command.empty()) return needs("a command");
      if (ins.kind == DockerInstructionKind::kRun && !ins.heredocs.empty() &&
          ins.heredocs.size() == 1 && FindHeredocs(command, escape).size() == 1 &&
          FindHeredocs(command, escape)[0].text == command) {
        ins.command.text = ins.heredocs[0].body;  // RUN <<EOF: the body is the script
        break;
      }
      ins.command.text = std::string(command);
      for (const DockerHeredoc& h : ins.heredocs) {
        absl::StrAppend(&ins.command.text, "\n", h.body, h.name);
      }
      break;
    }
    case DockerInstructionKind::kCopy:
    case DockerInstructionKind::kAdd: {
      ins.words = JsonOrWords(rest, escape);
      if (ins.words.size() < 2) return needs("at least one source and a destination");
      break;
    }
    case DockerInstructionKind::kEnv:
    case DockerInstructionKind::kLabel: {
      absl::Status s = ParsePairs(line, name, rest, escape, &ins.pairs);
      if (!s.ok()) return s;
      if (ins.kind == DockerInstructionKind::kEnv) {
        for (const auto& [key, value] : ins.pairs) {
          if (key.find_first_of("\"'$") != std::string::npos || key.find(escape) != key.npos) {
            return LineError(line, absl::StrCat("ENV names a variable \"", key,
                                                "\": write the name without quotes or $"));
          }
        }
      }
      break;
    }
    case DockerInstructionKind::kArg: {
      std::vector<std::string> words = SplitRaw(rest, escape);
      if (words.empty()) return needs("NAME or NAME=DEFAULT");
      for (const std::string& w : words) {
        size_t eq = w.find('=');
        std::string key = w.substr(0, eq);
        absl::Status s = CheckVariableName(line, name, key);
        if (!s.ok()) return s;
        ins.pairs.emplace_back(key, eq == std::string::npos
                                        ? std::nullopt
                                        : std::optional<std::string>(w.substr(eq + 1)));
      }
      break;
    }
    case DockerInstructionKind::kWorkdir:
    case DockerInstructionKind::kUser:
    case DockerInstructionKind::kStopSignal: {
      if (rest.empty()) {
        return needs(ins.kind == DockerInstructionKind::kWorkdir ? "a path" : "a value");
      }
      ins.words = {std::string(rest)};
      break;
    }
    case DockerInstructionKind::kExpose:
    case DockerInstructionKind::kVolume: {
      ins.words = JsonOrWords(rest, escape);
      if (ins.words.empty()) {
        return needs(ins.kind == DockerInstructionKind::kExpose ? "a port" : "a path");
      }
      break;
    }
  }
  return ins;
}

// `# name=value` lines at the very top.
bool ParseDirective(absl::string_view line, std::string* name, std::string* value) {
  line = TrimSpace(line);
  if (!absl::ConsumePrefix(&line, "#")) return false;
  line = TrimSpace(line);
  size_t eq = line.find('=');
  if (eq == absl::string_view::npos || eq == 0) return false;
  absl::string_view key = TrimSpace(line.substr(0, eq));
  if (!std::all_of(key.begin(), key.end(), [](char c) { return IsNameChar(c); })) return false;
  *name = absl::AsciiStrToLower(key);
  *value = std::string(TrimSpace(line.substr(eq + 1)));
  return true;
}

class Expander {
 public:
  Expander(const std::map<std::string, std::string>& vars, char escape)
      : vars_(vars), escape_(escape) {}

  // Expands text[*i...] until `stop` (a '}' ending a ${...} word) or the end.
  absl::Status Run(absl::string_view text, size_t* i, char stop, int depth, std::string* out) {
    if (depth > kMaxExpansionDepth) {
      return absl::InvalidArgumentError("variables nested too deep");
    }
    while (*i < text.size()) {
      char c = text[*i];
      if (stop != 0 && c == stop) return absl::OkStatus();
      ++*i;
      if (c == escape_) {
        *out += *i < text.size() ? text[(*i)++] : c;
      } else if (c == '\'') {
        size_t close = text.find('\'', *i);
        if (close == absl::string_view::npos) return Unterminated("'");
        absl::StrAppend(out, text.substr(*i, close - *i));
        *i = close + 1;
      } else if (c == '"') {
        absl::Status s = DoubleQuoted(text, i, depth, out);
        if (!s.ok()) return s;
      } else if (c == '$') {
        absl::Status s = Dollar(text, i, depth, out);
        if (!s.ok()) return s;
      } else {
        *out += c;
      }
      if (absl::Status s = CheckSize(*out); !s.ok()) return s;
    }
    if (stop != 0) return Unterminated("${");
    return absl::OkStatus();
  }

 private:
  static absl::Status CheckSize(const std::string& out) {
    if (out.size() <= kMaxExpandedBytes) return absl::OkStatus();
    return absl::InvalidArgumentError("a word expands to more than 1 MiB");
  }

  static absl::Status Unterminated(absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("an unterminated ", what));
  }

  absl::Status DoubleQuoted(absl::string_view text, size_t* i, int depth, std::string* out) {
    while (*i < text.size()) {
      char c = text[(*i)++];
      if (c == '"') return absl::OkStatus();
      if (c == escape_ && *i < text.size() &&
          (text[*i] == '"' || text[*i] == '$' || text[*i] == escape_)) {
        *out += text[(*i)++];
      } else if (c == '$') {
        absl::Status s = Dollar(text, i, depth, out);
        if (!s.ok()) return s;
      } else {
        *out += c;
      }
      if (absl::Status s = CheckSize(*out); !s.ok()) return s;
    }
    return Unterminated("\"");
  }

  // After a '$'.
  absl::Status Dollar(absl::string_view text, size_t* i, int depth, std::string* out) {
    if (*i >= text.size()) {
      *out += '$';
      return absl::OkStatus();
    }
    if (text[*i] != '{') {
      if (!IsNameStart(text[*i])) {
        *out += '$';
        return absl::OkStatus();
      }
      size_t start = *i;
      while (*i < text.size() && IsNameChar(text[*i])) ++*i;
      auto it = vars_.find(std::string(text.substr(start, *i - start)));
      if (it != vars_.end()) *out += it->second;
      return absl::OkStatus();
    }
    ++*i;  // '{'
    size_t start = *i;
    while (*i < text.size() && IsNameChar(text[*i])) ++*i;
    std::string name(text.substr(start, *i - start));
    if (name.empty() || !IsNameStart(name[0])) {
      return absl::InvalidArgumentError("${...} needs a variable's name");
    }
    if (*i >= text.size()) return Unterminated("${");
    auto it = vars_.find(name);
    bool set = it != vars_.end();
    bool non_empty = set && !it->second.empty();
    if (text[*i] == '}') {
      ++*i;
      if (set) *out += it->second;
      return absl::OkStatus();
    }
    bool colon = text[*i] == ':';
    if (colon) ++*i;
    if (*i >= text.size() || (text[*i] != '-' && text[*i] != '+' && text[*i] != '?')) {
      return absl::InvalidArgumentError(
          absl::StrCat("${", name,
                       "...}: Airlock knows ${NAME}, ${NAME:-word}, ${NAME:+word} and "
                       "${NAME:?message} (with or without the colon)"));
    }
    char op = text[(*i)++];
    std::string word;
    absl::Status s = Run(text, i, '}', depth + 1, &word);
    if (!s.ok()) return s;
    ++*i;  // '}'
    bool present = colon ? non_empty : set;
    if (op == '-') {
      *out += present ? it->second : word;
    } else if (op == '+') {
      if (present) *out += word;
    } else {
      if (!present) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": ", word.empty() ? "is not set" : word));
      }
      *out += it->second;
    }
    return absl::OkStatus();
  }

  const std::map<std::string, std::string>& vars_;
  const char escape_;
};

}  // namespace

const char* DockerInstructionName(DockerInstructionKind kind) {
  for (const Keyword& k : kKeywords) {
    if (k.kind == kind) return k.name;
  }
  return "?";
}

absl::StatusOr<std::string> ExpandWord(absl::string_view word,
                                       const std::map<std::string, std::string>& vars,
                                       char escape) {
  std::string out;
  size_t i = 0;
  absl::Status s = Expander(vars, escape).Run(word, &i, 0, 0, &out);
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "in \"", word.substr(0, 80), word.size() > 80 ? "...\"" : "\"", ": ", s.message()));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ExpandWords(absl::string_view text,
                                                     const std::map<std::string, std::string>& vars,
                                                     char escape) {
  std::vector<std::string> out;
  for (const std::string& raw : SplitRaw(text, escape)) {
    absl::StatusOr<std::string> w = ExpandWord(raw, vars, escape);
    if (!w.ok()) return w.status();
    out.push_back(std::move(*w));
  }
  return out;
}

absl::StatusOr<Dockerfile> ParseDockerfile(absl::string_view text) {
  if (text.size() > kMaxDockerfileBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the Dockerfile is ", text.size(),
                                                   " bytes; Airlock reads at most ",
                                                   kMaxDockerfileBytes >> 20, " MiB"));
  }
  if (size_t nul = text.find('\0'); nul != absl::string_view::npos) {
    size_t line = 1 + std::count(text.begin(), text.begin() + nul, '\n');
    return LineError(line, "a NUL byte: a Dockerfile is text");
  }
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  Dockerfile file;
  size_t n = 0;  // next line to read, from 0

  // Parser directives: only before anything else, blank lines included.
  for (; n < lines.size(); ++n) {
    std::string name, value;
    if (!ParseDirective(lines[n], &name, &value)) break;
    if (name == "escape") {
      if (value != "\\" && value != "`") {
        return LineError(n + 1, "# escape= takes \\ or `");
      }
      file.escape = value[0];
    }  // syntax= and check= name a BuildKit front end or its checks: nothing to do here
  }

  auto blank_or_comment = [](absl::string_view l) {
    l = TrimSpace(l);
    return l.empty() || l.front() == '#';
  };
  DockerStage* stage = nullptr;
  size_t instructions = 0;
  while (n < lines.size()) {
    if (blank_or_comment(lines[n])) {
      ++n;
      continue;
    }
    size_t first = n + 1;
    std::string logical;
    for (; n < lines.size(); ++n) {
      absl::string_view l = lines[n];
      if (!logical.empty() && blank_or_comment(l)) continue;
      absl::string_view trimmed = l;
      while (!trimmed.empty() && IsSpace(trimmed.back())) trimmed.remove_suffix(1);
      if (!trimmed.empty() && trimmed.back() == file.escape) {
        trimmed.remove_suffix(1);
        absl::StrAppend(&logical, trimmed);
        continue;
      }
      absl::StrAppend(&logical, l);
      ++n;
      break;
    }
    if (++instructions > kMaxInstructions) {
      return LineError(first, absl::StrCat("more than ", kMaxInstructions, " instructions"));
    }
    std::vector<DockerHeredoc> heredocs;
    absl::string_view keyword = TrimSpace(logical);
    keyword = keyword.substr(0, std::min(keyword.size(), keyword.find_first_of(" \t")));
    std::string upper = absl::AsciiStrToUpper(keyword);
    if (upper == "RUN" || upper == "COPY") {
      for (const HeredocMarker& m : FindHeredocs(logical, file.escape)) {
        DockerHeredoc h{m.name, "", m.expand};
        bool closed = false;
        for (; n < lines.size(); ++n) {
          absl::string_view body = absl::StripSuffix(lines[n], "\r");
          if (m.strip_tabs) {
            while (!body.empty() && body.front() == '\t') body.remove_prefix(1);
          }
          if (body == m.name) {
            closed = true;
            ++n;
            break;
          }
          absl::StrAppend(&h.body, body, "\n");
        }
        if (!closed) {
          return LineError(first, absl::StrCat("the heredoc ", m.text,
                                               " never ends: end it "
                                               "with a line that says ",
                                               m.name));
        }
        heredocs.push_back(std::move(h));
      }
    }
    absl::StatusOr<DockerInstruction> ins =
        ParseInstruction(first, logical, std::move(heredocs), file.escape);
    if (!ins.ok()) return ins.status();
    if (ins->kind == DockerInstructionKind::kFrom) {
      DockerStage next;
      next.base = ins->words[0];
      if (ins->words.size() == 3) next.name = absl::AsciiStrToLower(ins->words[2]);
      next.line = first;
      next.from_flags = ins->flags;
      file.stages.push_back(std::move(next));
      stage = &file.stages.back();
      continue;
    }
    if (stage == nullptr) {
      if (ins->kind != DockerInstructionKind::kArg) {
        return LineError(first, absl::StrCat(DockerInstructionName(ins->kind),
                                             " before FROM: a Dockerfile starts with FROM "
                                             "(only ARG may come before it)"));
      }
      for (auto& p : ins->pairs) file.global_args.push_back(std::move(p));
      continue;
    }
    stage->instructions.push_back(std::move(*ins));
  }
  if (file.stages.empty()) {
    return absl::InvalidArgumentError("the Dockerfile has no FROM: start it with FROM IMAGE");
  }
  return file;
}

}  // namespace airlock
