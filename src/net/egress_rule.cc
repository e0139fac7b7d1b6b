#include "src/net/egress_rule.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "src/net/public_suffix.h"

namespace airlock::net {
namespace {

const std::vector<uint16_t>& DefaultPorts() {
  static const std::vector<uint16_t>* ports = new std::vector<uint16_t>{80, 443};
  return *ports;
}

absl::string_view AbslView(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}

absl::Status Bad(std::string_view text, std::string_view problem) {
  return absl::InvalidArgumentError(absl::StrFormat("%s: %s", QuoteForMessage(text), problem));
}

bool IsDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsDigitsAndDots(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

constexpr std::string_view kNotIpv4 =
    "not a valid IPv4 address; an IPv4 address is four numbers 0-255 without leading zeros, as "
    "in 10.20.1.5";

// Checks and normalizes a host name. The error's message is the problem alone, for the caller
// to put after the quoted input.
absl::StatusOr<std::string> CheckName(std::string_view text) {
  std::string name = absl::AsciiStrToLower(AbslView(text));
  if (!name.empty() && name.back() == '.') name.pop_back();
  if (name.empty()) return absl::InvalidArgumentError("an empty host name");
  if (name.size() > kMaxHostNameLength) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the name is %d characters; a host name is at most %d", name.size(), kMaxHostNameLength));
  }
  std::string_view rest = name;
  std::string_view label;
  while (true) {
    size_t dot = rest.find('.');
    label = rest.substr(0, dot);
    if (label.empty()) {
      return absl::InvalidArgumentError(
          "an empty label (two dots in a row, or a dot at the start); write the name as in "
          "pypi.org");
    }
    if (label.size() > kMaxLabelLength) {
      return absl::InvalidArgumentError(
          absl::StrFormat("the label \"%s...\" is %d characters; a label is at most %d",
                          label.substr(0, 16), label.size(), kMaxLabelLength));
    }
    for (char c : label) {
      if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') continue;
      if (c > ' ' && c < 0x7f) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "'%c' cannot be in a host name; a host name has letters, digits, '-', '_' and dots",
            c));
      }
      return absl::InvalidArgumentError(
          "a host name has only ASCII letters, digits, '-', '_' and dots; give an "
          "internationalised name in its xn-- form");
    }
    if (label.front() == '-' || label.back() == '-') {
      return absl::InvalidArgumentError(absl::StrFormat(
          "the label \"%s\" starts or ends with '-', which a host name cannot", label));
    }
    if (dot == std::string_view::npos) break;
    rest = rest.substr(dot + 1);
  }
  if (IsDigits(label)) {
    return absl::InvalidArgumentError("not a host name: its last label is all digits");
  }
  return name;
}

absl::StatusOr<std::vector<uint16_t>> ParsePorts(std::string_view text, std::string_view host,
                                                 std::optional<std::string_view> port,
                                                 RuleContext context) {
  if (!port.has_value()) {
    if (context == RuleContext::kCeilingDeny) return std::vector<uint16_t>{};
    return DefaultPorts();
  }
  if (port->empty()) return Bad(text, "give a port after ':' (1-65535), or '*' for any port");
  if (*port == "*") return std::vector<uint16_t>{};
  if (size_t comma = port->find(','); comma != std::string_view::npos) {
    std::string_view first = port->substr(0, comma);
    std::string_view second = port->substr(comma + 1);
    second = second.substr(0, second.find(','));
    return Bad(text, absl::StrFormat("one port per rule; give a rule for each port, as in "
                                     "%s:%s and %s:%s",
                                     host, first, host, second));
  }
  if (IsDigits(*port)) {
    int value = port->size() > 5 ? 0 : std::atoi(std::string(*port).c_str());
    if (value < 1 || value > 65535) {
      return Bad(text, absl::StrFormat("port %s is out of range; a port is 1-65535", *port));
    }
    return std::vector<uint16_t>{static_cast<uint16_t>(value)};
  }
  return Bad(text, absl::StrFormat("\"%s\" is not a port; give a number 1-65535, or '*' for any "
                                   "port",
                                   absl::CHexEscape(AbslView(*port))));
}

absl::StatusOr<EgressRule> AddressRule(std::string_view text, const IpAddress& address,
                                       std::optional<std::string_view> length_text,
                                       std::optional<std::string_view> port, std::string_view host,
                                       RuleContext context) {
  const bool v6 = address.family == AF_INET6;
  const int bits = address.bit_length();
  int length = bits;
  if (length_text.has_value()) {
    if (length_text->empty()) {
      return Bad(text, v6 ? "give a prefix length after '/', as in [2001:db8::]/32"
                          : "give a prefix length after '/', as in 10.20.0.0/16");
    }
    if (!IsDigits(*length_text) || length_text->size() > 3) {
      return Bad(text,
                 absl::StrFormat("\"%s\" is not a prefix length; give a number 0-%d after '/'",
                                 absl::CHexEscape(AbslView(*length_text)), bits));
    }
    length = std::atoi(std::string(*length_text).c_str());
    if (length > bits) {
      return Bad(text,
                 absl::StrFormat("prefix length %d is out of range; an IPv%d prefix length is 0-%d",
                                 length, v6 ? 6 : 4, bits));
    }
  }
  absl::StatusOr<std::vector<uint16_t>> ports = ParsePorts(text, host, port, context);
  if (!ports.ok()) return ports.status();

  EgressRule rule;
  rule.kind = EgressRule::Kind::kAddress;
  rule.ports = *std::move(ports);
  rule.prefix = IpPrefix::Of(address, length);
  // An IPv4-mapped range is the IPv4 range it stands for.
  static const IpPrefix kMapped = IpPrefix::Of(*IpAddress::Parse("::ffff:0:0"), 96);
  if (kMapped.Contains(rule.prefix)) {
    rule.prefix = IpPrefix::Of(Unmapped(rule.prefix.base), length - 96);
  }
  if (rule.prefix.length == 0 && context == RuleContext::kSession) {
    return Bad(text, "matches every address; name the hosts or a narrower range");
  }
  if (IpPrefix::Of(address, length).base != address) {
    return Bad(text, absl::StrFormat("host bits are set; the range is %s", rule.ToString()));
  }
  return rule;
}

absl::StatusOr<EgressRule> BracketedRule(std::string_view text, RuleContext context) {
  size_t close = text.find(']');
  if (close == std::string_view::npos) {
    return Bad(text, "missing ']' after the IPv6 address, as in [2001:db8::1]:443");
  }
  std::string_view inside = text.substr(1, close - 1);
  std::string_view rest = text.substr(close + 1);
  if (size_t slash = inside.find('/'); slash != std::string_view::npos) {
    return Bad(text, absl::StrFormat("the prefix length goes after the bracket, as in [%s]%s",
                                     inside.substr(0, slash), inside.substr(slash)));
  }
  std::optional<IpAddress> address = IpAddress::Parse(inside);
  if (!address.has_value()) {
    return Bad(text, "not a valid IPv6 address; write one as in [2001:db8::1]");
  }
  if (address->family != AF_INET6) {
    return Bad(text, absl::StrFormat("brackets are for IPv6 addresses; write %s%s", inside, rest));
  }
  std::optional<std::string_view> length;
  std::optional<std::string_view> port;
  if (!rest.empty() && rest.front() == '/') {
    size_t colon = rest.find(':');
    length = rest.substr(1, colon == std::string_view::npos ? colon : colon - 1);
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon);
  }
  if (!rest.empty()) {
    if (rest.front() != ':') {
      return Bad(text, "expected /LENGTH or :PORT after ']', as in [2001:db8::]/32:443");
    }
    port = rest.substr(1);
  }
  return AddressRule(text, *address, length, port, text.substr(0, close + 1), context);
}

absl::StatusOr<EgressRule> NameRule(std::string_view text, std::string_view host,
                                    std::optional<std::string_view> port, RuleContext context) {
  EgressRule rule;
  if (host == "*") {
    if (context == RuleContext::kSession) {
      return Bad(text, "matches every host name; name the hosts, as in pypi.org or *.example.com");
    }
    rule.kind = EgressRule::Kind::kAnyName;
  } else {
    const bool wildcard = host.starts_with("*.");
    std::string_view body = wildcard ? host.substr(2) : host;
    if ((host.front() == '*' && !wildcard) || (wildcard && (body.empty() || body == "."))) {
      return Bad(text, "a wildcard must be \"*.\" followed by a domain, as in *.example.com");
    }
    if (body.find('*') != std::string_view::npos) {
      return Bad(text, "a wildcard may only be a leading \"*.\", as in *.example.com");
    }
    absl::StatusOr<std::string> name = CheckName(body);
    if (!name.ok()) return Bad(text, std::string(name.status().message()));
    if (wildcard && name->find('.') == std::string::npos && context == RuleContext::kSession) {
      return Bad(text, absl::StrFormat("too broad: it matches every name under the top-level "
                                       "domain %s; give a domain, as in *.example.%s",
                                       *name, *name));
    }

    rule.kind = wildcard ? EgressRule::Kind::kNameSuffix : EgressRule::Kind::kName;
    rule.name = *std::move(name);
  }
  absl::StatusOr<std::vector<uint16_t>> ports = ParsePorts(text, host, port, context);
  if (!ports.ok()) return ports.status();
  rule.ports = *std::move(ports);
  return rule;
}

struct Preset {
  std::string_view name;
  std::vector<std::string_view> rules;
};

// Sorted by name.
const std::vector<Preset>& Presets() {
  static const std::vector<Preset>* presets = new std::vector<Preset>{
      {"anthropic", {"api.anthropic.com"}},
      {"crates", {"crates.io", "*.crates.io"}},
      {"debian", {"deb.debian.org", "security.debian.org", "*.debian.org"}},
      {"github",
       {"github.com", "*.github.com", "*.githubusercontent.com", "codeload.github.com", "ghcr.io",
        "pkg-containers.githubusercontent.com"}},
      {"golang", {"proxy.golang.org", "sum.golang.org", "storage.googleapis.com"}},
      {"huggingface", {"huggingface.co", "*.huggingface.co", "*.hf.co"}},
      {"npm", {"registry.npmjs.org", "registry.yarnpkg.com"}},
      {"openai", {"api.openai.com"}},
      {"openrouter", {"openrouter.ai"}},
      {"pypi", {"pypi.org", "files.pythonhosted.org"}},
  };
  return *presets;
}

}  // namespace

std::string QuoteForMessage(std::string_view text) {
  constexpr size_t kMaxQuoted = 80;
  std::string escaped = absl::CHexEscape(AbslView(text.substr(0, kMaxQuoted)));
  return absl::StrFormat("\"%s%s\"", escaped, text.size() > kMaxQuoted ? "..." : "");
}

bool EgressRule::MatchesName(std::string_view lower_name) const {
  switch (kind) {
    case Kind::kName:
      return lower_name == name;
    case Kind::kNameSuffix:
      return lower_name.size() > name.size() + 1 && lower_name.ends_with(name) &&
             lower_name[lower_name.size() - name.size() - 1] == '.';
    case Kind::kAnyName:
      return true;
    case Kind::kAddress:
      return false;
  }
  return false;
}

bool EgressRule::MatchesAddress(const IpAddress& address) const {
  return kind == Kind::kAddress && (prefix.Contains(address) || prefix.Contains(Unmapped(address)));
}

bool EgressRule::Covers(const EgressRule& other) const {
  if (other.raw && !raw) return false;
  if (!ports.empty()) {
    if (other.ports.empty()) return false;
    for (uint16_t port : other.ports) {
      if (!MatchesPort(port)) return false;
    }
  }
  switch (other.kind) {
    case Kind::kName:
      return MatchesName(other.name);
    case Kind::kNameSuffix:
      // Names strictly below other.name: below this suffix too if other.name is this suffix or
      // a name below it.
      return kind == Kind::kAnyName ||
             (kind == Kind::kNameSuffix && (other.name == name || MatchesName(other.name)));
    case Kind::kAddress:
      return kind == Kind::kAddress && prefix.Contains(other.prefix);
    case Kind::kAnyName:
      return kind == Kind::kAnyName;
  }
  return false;
}

bool EgressRule::MatchesPort(uint16_t port) const {
  return ports.empty() || std::find(ports.begin(), ports.end(), port) != ports.end();
}

std::string EgressRule::ToString() const {
  std::string text;
  switch (kind) {
    case Kind::kName:
      text = name;
      break;
    case Kind::kNameSuffix:
      text = "*." + name;
      break;
    case Kind::kAnyName:
      text = "*";
      break;
    case Kind::kAddress:
      if (prefix.base.family == AF_INET6) {
        text = absl::StrFormat("[%s]", prefix.base.ToString());
      } else {
        text = prefix.base.ToString();
      }
      if (prefix.length < prefix.base.bit_length())
        absl::StrAppendFormat(&text, "/%d", prefix.length);
      break;
  }
  if (ports.empty()) {
    text += ":*";
  } else if (ports != DefaultPorts()) {
    text += ":" + absl::StrJoin(ports, ",");
  }
  if (raw) text += "/raw";
  return text;
}

absl::StatusOr<EgressRule> ParseEgressRule(std::string_view text, RuleContext context) {
  constexpr std::string_view kRaw = "/raw";
  if (text.size() > kRaw.size() && text.substr(text.size() - kRaw.size()) == kRaw) {
    std::string_view inner = text.substr(0, text.size() - kRaw.size());
    if (context != RuleContext::kSession) {
      return Bad(text, "/raw is for a session's rules, not the ceiling");
    }
    if (inner.size() > kRaw.size() && inner.substr(inner.size() - kRaw.size()) == kRaw) {
      return Bad(text, "give /raw once");
    }
    absl::StatusOr<EgressRule> rule = ParseEgressRule(inner, context);
    if (!rule.ok()) return rule;
    if (rule->kind == EgressRule::Kind::kAddress) {
      return Bad(text,
                 "an address rule's connections are carried as they are; /raw is for names "
                 "(their connections on ports 80 and 443 then skip the Host and SNI check)");
    }
    rule->raw = true;
    return rule;
  }
  if (text.empty()) {
    return Bad(text,
               "an empty rule; give a host name (pypi.org), a wildcard (*.example.com) or an "
               "address range (10.20.0.0/16)");
  }
  if (text.size() > kMaxRuleLength) {
    return Bad(text, absl::StrFormat("%d characters is too long for a rule; a host name is at "
                                     "most %d",
                                     text.size(), kMaxHostNameLength));
  }
  if (size_t scheme = text.find("://"); scheme != std::string_view::npos) {
    std::string_view host = text.substr(scheme + 3);
    host = host.substr(0, host.find_first_of("/?#"));
    if (size_t at = host.rfind('@'); at != std::string_view::npos) host = host.substr(at + 1);
    // host has no "://", so this recursion ends at once.
    if (!host.empty() && ParseEgressRule(host, context).ok()) {
      return Bad(text, absl::StrFormat("give a host name, not a URL: %s", host));
    }
    return Bad(text, "give a host name, not a URL, as in pypi.org");
  }
  for (char c : text) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      return Bad(text, "contains whitespace; give one rule at a time, as in pypi.org");
    }
    if (c <= ' ' || c >= 0x7f) {
      return Bad(text,
                 "has a character that cannot be in a rule; give an internationalised name in "
                 "its xn-- form");
    }
  }
  if (size_t at = text.rfind('@'); at != std::string_view::npos) {
    std::string_view host = text.substr(at + 1);
    // host has no '@', so this recursion ends at once.
    if (!host.empty() && ParseEgressRule(host, context).ok()) {
      return Bad(text, absl::StrFormat("give a host name without a user name: %s", host));
    }
    return Bad(text, "give a host name without a user name, as in pypi.org");
  }
  if (text.front() == '[') return BracketedRule(text, context);

  if (std::count(text.begin(), text.end(), ':') >= 2) {
    std::string_view address = text.substr(0, text.find('/'));
    std::string_view length = text.substr(address.size());
    return Bad(text, absl::StrFormat("an IPv6 address goes in brackets, as in [%s]%s or [%s]%s:443",
                                     address, length, address, length));
  }
  if (size_t slash = text.find('/'); slash != std::string_view::npos) {
    std::string_view before = text.substr(0, slash);
    std::string_view after = text.substr(slash + 1);
    std::optional<IpAddress> address = IpAddress::Parse(before);
    if (address.has_value()) {
      size_t colon = after.find(':');
      std::optional<std::string_view> port;
      if (colon != std::string_view::npos) port = after.substr(colon + 1);
      std::string_view range =
          colon == std::string_view::npos ? text : text.substr(0, slash + 1 + colon);
      return AddressRule(text, *address, after.substr(0, colon), port, range, context);
    }
    if (IsDigitsAndDots(before)) return Bad(text, kNotIpv4);
    // before has no '/', so this recursion ends at once.
    if (!before.empty() && ParseEgressRule(before, context).ok()) {
      return Bad(text, absl::StrFormat("give a host name, not a URL or path: %s", before));
    }
    return Bad(text, "give a host name, not a URL or path, as in pypi.org");
  }

  std::string_view host = text;
  std::optional<std::string_view> port;
  if (size_t colon = text.find(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) return Bad(text, "give a host name before the port, as in pypi.org:443");
  if (std::optional<IpAddress> address = IpAddress::Parse(host); address.has_value()) {
    return AddressRule(text, *address, std::nullopt, port, host, context);
  }
  if (IsDigitsAndDots(host)) return Bad(text, kNotIpv4);
  return NameRule(text, host, port, context);
}

absl::StatusOr<std::string> NormalizeHostName(std::string_view name) {
  absl::StatusOr<std::string> normalized = CheckName(name);
  if (!normalized.ok()) return Bad(name, std::string(normalized.status().message()));
  return normalized;
}

absl::StatusOr<std::vector<EgressRule>> PresetRules(std::string_view preset) {
  for (const Preset& known : Presets()) {
    if (known.name != preset) continue;
    std::vector<EgressRule> rules;
    for (std::string_view text : known.rules) {
      absl::StatusOr<EgressRule> rule = ParseEgressRule(text);
      if (!rule.ok()) {
        // The table is constant: a rule in it that does not parse is a bug.
        std::fprintf(stderr, "preset %s: %s\n", std::string(preset).c_str(),
                     rule.status().ToString().c_str());
        std::abort();
      }
      rules.push_back(*std::move(rule));
    }
    return rules;
  }
  return absl::InvalidArgumentError(absl::StrFormat("unknown preset %s; the presets are %s",
                                                    QuoteForMessage(preset),
                                                    absl::StrJoin(PresetNames(), ", ")));
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const Preset& preset : Presets()) names.emplace_back(preset.name);
  return names;
}

absl::StatusOr<EgressRule> ParseSessionRule(std::string_view text) {
  absl::StatusOr<EgressRule> rule = ParseEgressRule(text, RuleContext::kSession);
  if (!rule.ok()) return rule;
  if (rule->ports.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteForMessage(text),
                     ": a session rule needs its port named (the guest listens on the ports "
                     "allowed); leave it out for 80 and 443, or write one, e.g. :8443"));
  }
  // A new rule from a caller (the presets' own, and rules already granted, are not asked).
  if (rule->kind == EgressRule::Kind::kNameSuffix && IsPublicSuffix(rule->name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteForMessage(text), ": too broad: ", rule->name,
                     " is a public suffix, under which anyone can have names; give a domain, as in "
                     "*.example.",
                     rule->name));
  }
  return rule;
}

}  // namespace airlock::net
