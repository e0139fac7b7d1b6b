#include "src/secrets/secret_spec.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace airlock::secrets {
namespace {

constexpr char kForm[] =
    "give NAME=SOURCE@HOST[,HOST...][?OPTION[&OPTION...]] (options: body, header=NAME), e.g. "
    "OPENAI_API_KEY=env:OPENAI_API_KEY@api.openai.com (sources: env:VAR, file:PATH, "
    "op://VAULT/ITEM/FIELD, shared:NAME)";

absl::Status Bad(absl::string_view text, absl::string_view problem) {
  std::string shown(text.substr(0, 80));  // cut short, printable only
  for (char& c : shown) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--secret \"", shown, "\": ", problem, "; ", kForm));
}

bool IsEnvName(absl::string_view s) {
  if (s.empty() || s.size() > 128 || absl::ascii_isdigit(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace

bool IsSharedName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

namespace {

// An HTTP field name (RFC 9110 5.1: a token), at most 64 bytes.
bool IsHeaderName(absl::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
           absl::string_view("!#$%'*+-.^_`|~").find(c) != absl::string_view::npos;
  });
}

// A DNS name as the egress rules take it: labels of letters, digits, '-' and '_'.
bool IsHostName(absl::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(s, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

SourceKind SecretSpec::kind() const {
  if (absl::StartsWith(source, "env:")) return SourceKind::kEnv;
  if (absl::StartsWith(source, "file:")) return SourceKind::kFile;
  if (absl::StartsWith(source, "shared:")) return SourceKind::kShared;
  return SourceKind::kOnePassword;
}

std::string SecretSpec::reference() const {
  switch (kind()) {
    case SourceKind::kEnv:
      return source.substr(4);
    case SourceKind::kFile:
      return source.substr(5);
    case SourceKind::kShared:
      return source.substr(7);
    case SourceKind::kOnePassword:
      return source;
  }
  return source;
}

absl::StatusOr<SecretSpec> ParseSecretSpec(std::string_view input) {
  absl::string_view text(input.data(), input.size());
  SecretSpec spec;
  size_t eq = text.find('=');
  if (eq == absl::string_view::npos) return Bad(text, "no '='");
  spec.name = std::string(text.substr(0, eq));
  if (!IsEnvName(spec.name)) {
    return Bad(text, "the name must be an environment variable name (letters, digits, '_')");
  }
  absl::string_view rest = text.substr(eq + 1);
  size_t at = rest.rfind('@');
  if (at == absl::string_view::npos) {
    return Bad(text, "no '@HOST': a secret is sent only to the hosts it is bound to");
  }
  spec.source = std::string(rest.substr(0, at));
  absl::string_view hosts = rest.substr(at + 1);
  if (size_t q = hosts.find('?'); q != absl::string_view::npos) {
    for (absl::string_view option : absl::StrSplit(hosts.substr(q + 1), '&')) {
      if (option == "body" && !spec.body) {
        spec.body = true;
      } else if (absl::ConsumePrefix(&option, "header=") && IsHeaderName(option)) {
        std::string header = absl::AsciiStrToLower(option);
        if (std::find(spec.headers.begin(), spec.headers.end(), header) == spec.headers.end()) {
          spec.headers.push_back(header);
        }
      } else {
        return Bad(text, absl::StrCat("\"", option.substr(0, 64),
                                      "\" is not an option (give body, or header=NAME)"));
      }
    }
    if (spec.headers.size() > kMaxSecretHeaders) {
      return Bad(text, absl::StrCat("at most ", kMaxSecretHeaders, " headers"));
    }
    hosts = hosts.substr(0, q);
  }
  if (absl::StartsWith(spec.source, "env:")) {
    if (!IsEnvName(spec.source.substr(4))) return Bad(text, "env: needs a variable name");
  } else if (absl::StartsWith(spec.source, "file:")) {
    if (spec.source.size() == 5) return Bad(text, "file: needs a path");
    if (std::any_of(spec.source.begin(), spec.source.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
      return Bad(text, "the file: path holds control characters");
    }
  } else if (absl::StartsWith(spec.source, "op://")) {
    std::vector<absl::string_view> parts = absl::StrSplit(spec.source.substr(5), '/');
    if (parts.size() < 3 ||
        std::any_of(parts.begin(), parts.end(), [](absl::string_view p) { return p.empty(); })) {
      return Bad(text, "an op:// reference is op://VAULT/ITEM/FIELD");
    }
    if (std::any_of(spec.source.begin(), spec.source.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
      return Bad(text, "the op:// reference holds control characters");
    }
  } else if (absl::StartsWith(spec.source, "shared:")) {
    if (!IsSharedName(spec.source.substr(7))) {
      return Bad(text,
                 "shared: needs the name of a source the operator shares (letters, digits, "
                 "'-', '_', '.')");
    }
  } else {
    return Bad(text,
               "unknown source (use env:VAR, file:PATH, op://VAULT/ITEM/FIELD or shared:NAME)");
  }
  for (absl::string_view h : absl::StrSplit(hosts, ',')) {
    std::string host = absl::AsciiStrToLower(h);
    if (!IsHostName(host)) {
      return Bad(text, absl::StrCat("\"", h.substr(0, 64), "\" is not a host name"));
    }
    if (std::find(spec.hosts.begin(), spec.hosts.end(), host) == spec.hosts.end()) {
      spec.hosts.push_back(host);
    }
  }
  if (spec.hosts.size() > kMaxSecretHosts) {
    return Bad(text, absl::StrCat("at most ", kMaxSecretHosts, " hosts"));
  }
  return spec;
}

std::vector<std::string> SecretSpec::EffectiveHeaders() const {
  if (!headers.empty()) return headers;
  return {std::begin(kDefaultSecretHeaders), std::end(kDefaultSecretHeaders)};
}

std::string FormatSecretSpec(const SecretSpec& spec) {
  std::vector<std::string> options;
  if (spec.body) options.push_back("body");
  for (const std::string& h : spec.headers) options.push_back("header=" + h);
  return absl::StrCat(spec.name, "=", spec.source, "@", absl::StrJoin(spec.hosts, ","),
                      options.empty() ? "" : "?", absl::StrJoin(options, "&"));
}

}  // namespace airlock::secrets
