#include "src/net/egress_policy.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace airlock::net {
namespace {

using Line = EgressCeiling::Line;

constexpr int kPortCount = 65535;

// PortSet algebra. Every result is normalized: sorted lists, and "any but all 65535" is empty.
PortSet Normalized(PortSet set) {
  std::vector<uint16_t>& list = set.any ? set.excluded : set.ports;
  std::sort(list.begin(), list.end());
  list.erase(std::unique(list.begin(), list.end()), list.end());
  list.erase(std::remove(list.begin(), list.end(), 0), list.end());
  (set.any ? set.ports : set.excluded).clear();
  if (set.any && set.excluded.size() == kPortCount) return PortSet{};
  return set;
}

PortSet AllPorts() { return PortSet{.any = true}; }

// A rule's ports: empty means any.
PortSet RulePorts(const std::vector<uint16_t>& ports) {
  if (ports.empty()) return AllPorts();
  return Normalized(PortSet{.ports = ports});
}

std::vector<uint16_t> Union(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  std::vector<uint16_t> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::vector<uint16_t> Intersection(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  std::vector<uint16_t> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::vector<uint16_t> Difference(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  std::vector<uint16_t> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

PortSet Complement(const PortSet& a) {
  if (a.any) return Normalized(PortSet{.ports = a.excluded});
  return Normalized(PortSet{.any = true, .excluded = a.ports});
}

PortSet Join(const PortSet& a, const PortSet& b) {
  if (!a.any && !b.any) return PortSet{.ports = Union(a.ports, b.ports)};
  if (a.any && b.any) {
    return Normalized({.any = true, .excluded = Intersection(a.excluded, b.excluded)});
  }
  const PortSet& any = a.any ? a : b;
  const PortSet& listed = a.any ? b : a;
  return Normalized({.any = true, .excluded = Difference(any.excluded, listed.ports)});
}

PortSet Meet(const PortSet& a, const PortSet& b) {
  if (!a.any && !b.any) return PortSet{.ports = Intersection(a.ports, b.ports)};
  if (a.any && b.any) return Normalized({.any = true, .excluded = Union(a.excluded, b.excluded)});
  const PortSet& any = a.any ? a : b;
  const PortSet& listed = a.any ? b : a;
  return PortSet{.ports = Difference(listed.ports, any.excluded)};
}

PortSet Minus(const PortSet& a, const PortSet& b) { return Meet(a, Complement(b)); }

bool IsNameRule(const EgressRule& rule) { return rule.kind != EgressRule::Kind::kAddress; }

// The ports of the allow (or deny) lines that match.
template <typename Match>
PortSet PortsOfLines(const std::vector<Line>& lines, bool allow, Match match) {
  PortSet ports;
  for (const Line& line : lines) {
    if (line.allow == allow && match(line.rule)) ports = Join(ports, RulePorts(line.rule.ports));
  }
  return ports;
}

std::string DenyWhy(const Line& line) {
  std::string why = absl::StrFormat("the operator's ceiling denies %s", line.text);
  if (line.line_number > 0) absl::StrAppendFormat(&why, " (ceiling line %d)", line.line_number);
  return why;
}

// A rule for exactly address (its IPv4 form if mapped), on port: what to suggest adding.
EgressRule SingleAddressRule(const IpAddress& address, std::vector<uint16_t> ports) {
  IpAddress plain = Unmapped(address);
  EgressRule rule;
  rule.kind = EgressRule::Kind::kAddress;
  rule.prefix = IpPrefix::Of(plain, plain.bit_length());
  rule.ports = std::move(ports);
  return rule;
}

// The ports to write in a suggested --allow: none for 80 and 443, which are the default.
std::vector<uint16_t> SuggestedPorts(uint16_t port) {
  if (port == 80 || port == 443) return {80, 443};
  return {port};
}

// "1.2.3.4:443", "[2001:db8::1]:443".
std::string AddressAndPort(const IpAddress& address, uint16_t port) {
  if (address.family == AF_INET6) return absl::StrFormat("[%s]:%d", address.ToString(), port);
  return absl::StrFormat("%s:%d", address.ToString(), port);
}

// A name just below base (or any name, when base is empty) that no line names exactly. What the
// ceiling decides for it, it decides for every such name. Empty when no name fits below base.
std::string GenericNameBelow(std::string_view base, const std::vector<Line>& lines) {
  for (int i = 0;; ++i) {
    std::string label =
        i < 26 ? std::string(1, static_cast<char>('a' + i)) : absl::StrFormat("a%d", i);
    std::string name = base.empty() ? label : absl::StrFormat("%s.%s", label, base);
    if (name.size() > kMaxHostNameLength) return "";
    bool named = std::any_of(lines.begin(), lines.end(), [&](const Line& line) {
      return line.rule.kind == EgressRule::Kind::kName && line.rule.name == name;
    });
    if (!named) return name;
  }
}

}  // namespace

bool PortSet::Contains(uint16_t port) const {
  if (port == 0) return false;
  const std::vector<uint16_t>& list = any ? excluded : ports;
  return std::binary_search(list.begin(), list.end(), port) != any;
}

EgressCeiling EgressCeiling::Default() {
  Line line;
  line.allow = true;
  line.rule.kind = EgressRule::Kind::kAnyName;
  line.rule.ports = {};
  line.text = "*:*";
  return EgressCeiling({std::move(line)});
}

bool EgressCeiling::AdmitsName(std::string_view name, uint16_t port, std::string* why) const {
  for (const Line& line : lines_) {
    if (!line.allow && IsNameRule(line.rule) && line.rule.MatchesName(name) &&
        line.rule.MatchesPort(port)) {
      if (why != nullptr) *why = DenyWhy(line);
      return false;
    }
  }
  for (const Line& line : lines_) {
    if (line.allow && IsNameRule(line.rule) && line.rule.MatchesName(name) &&
        line.rule.MatchesPort(port)) {
      return true;
    }
  }
  if (why != nullptr) {
    *why = absl::StrFormat("the operator's ceiling does not allow %s on port %d", name, port);
  }
  return false;
}

PortSet EgressCeiling::PortsForName(std::string_view name) const {
  auto matches = [&](const EgressRule& rule) { return IsNameRule(rule) && rule.MatchesName(name); };
  return Minus(PortsOfLines(lines_, true, matches), PortsOfLines(lines_, false, matches));
}

bool EgressCeiling::AdmitsAddress(const IpAddress& address, uint16_t port, bool ip_literal,
                                  const std::vector<IpAddress>& host_addresses,
                                  std::string* why) const {
  std::optional<IpAddress> embedded = EmbeddedIpv4(address);
  for (const Line& line : lines_) {
    if (line.allow || !line.rule.MatchesPort(port)) continue;
    bool denied = line.rule.kind == EgressRule::Kind::kAddress
                      ? line.rule.MatchesAddress(address) ||
                            (embedded.has_value() && line.rule.MatchesAddress(*embedded))
                      : ip_literal && line.rule.kind == EgressRule::Kind::kAnyName;
    if (denied) {
      if (why != nullptr) *why = DenyWhy(line);
      return false;
    }
  }
  const bool host = IsHostAddress(address, host_addresses);
  for (const Line& line : lines_) {
    if (!line.allow || !line.rule.MatchesAddress(address) || !line.rule.MatchesPort(port)) continue;
    // A range does not open the host's own services; only a line naming the address does.
    if (host && line.rule.prefix.length < line.rule.prefix.base.bit_length()) continue;
    return true;
  }
  std::string internal;
  if (IsInternalAddress(address, host_addresses, &internal)) {
    if (why != nullptr) {
      *why = absl::StrFormat(
          "%s; the operator's ceiling does not allow it (an operator admits it with \"allow %s\" "
          "in the --egress-ceiling file)",
          internal, SingleAddressRule(address, {port}).ToString());
    }
    return false;
  }
  if (!ip_literal) return true;
  for (const Line& line : lines_) {
    if (line.allow && line.rule.kind == EgressRule::Kind::kAnyName && line.rule.MatchesPort(port)) {
      return true;
    }
  }
  if (why != nullptr) {
    *why = absl::StrFormat(
        "the operator's ceiling does not allow connections to IP addresses such as %s on port %d",
        address.ToString(), port);
  }
  return false;
}

bool EgressCeiling::Admits(const EgressRule& session_rule, std::string* why) const {
  const PortSet wanted = RulePorts(session_rule.ports);
  if (session_rule.kind == EgressRule::Kind::kAddress) {
    const IpPrefix& range = session_rule.prefix;
    PortSet denied = PortsOfLines(lines_, false, [&](const EgressRule& rule) {
      return rule.kind == EgressRule::Kind::kAnyName ||
             (rule.kind == EgressRule::Kind::kAddress && rule.prefix.Contains(range));
    });
    PortSet allowed = PortsOfLines(lines_, true, [&](const EgressRule& rule) {
      return rule.kind == EgressRule::Kind::kAddress && rule.prefix.Overlaps(range);
    });
    std::string internal;
    const bool all_internal = IsInternalPrefix(range, {}, &internal);
    if (!all_internal) {
      allowed = Join(allowed, PortsOfLines(lines_, true, [](const EgressRule& rule) {
                       return rule.kind == EgressRule::Kind::kAnyName;
                     }));
    }
    if (!Meet(wanted, Minus(allowed, denied)).empty()) return true;
    if (why == nullptr) return false;
    for (const Line& line : lines_) {
      if (!line.allow && !Meet(wanted, RulePorts(line.rule.ports)).empty() &&
          (line.rule.kind == EgressRule::Kind::kAnyName ||
           (line.rule.kind == EgressRule::Kind::kAddress && line.rule.prefix.Contains(range)))) {
        *why = DenyWhy(line);
        return false;
      }
    }
    if (all_internal) {
      EgressRule range_only = session_rule;
      range_only.ports = {80, 443};  // the default, which ToString leaves out
      *why = absl::StrFormat(
          "%s is internal: %s; the operator's ceiling does not allow it (an operator admits it "
          "with \"allow %s\" in the --egress-ceiling file)",
          range_only.ToString(), internal, session_rule.ToString());
    } else {
      *why = absl::StrFormat("the operator's ceiling does not allow connections to %s",
                             session_rule.ToString());
    }
    return false;
  }

  // A name rule: look for one name it matches that the ceiling admits on one of its ports.
  // Names the ceiling treats alike are represented by one (GenericNameBelow), so the search is
  // exact: every name the rule matches is either named by an allow line or decided as the
  // generic name below the deepest suffix that covers it.
  std::vector<std::string> candidates;
  if (session_rule.kind == EgressRule::Kind::kName) {
    candidates.push_back(session_rule.name);
  } else {
    const std::string base =
        session_rule.kind == EgressRule::Kind::kNameSuffix ? session_rule.name : "";
    candidates.push_back(GenericNameBelow(base, lines_));
    for (const Line& line : lines_) {
      if (!line.allow || !session_rule.MatchesName(line.rule.name)) continue;
      if (line.rule.kind == EgressRule::Kind::kName) candidates.push_back(line.rule.name);
      if (line.rule.kind == EgressRule::Kind::kNameSuffix) {
        candidates.push_back(GenericNameBelow(line.rule.name, lines_));
      }
    }
  }
  for (const std::string& name : candidates) {
    if (!name.empty() && !Meet(wanted, PortsForName(name)).empty()) return true;
  }
  if (why == nullptr) return false;
  for (const Line& line : lines_) {
    if (line.allow || !IsNameRule(line.rule) || Meet(wanted, RulePorts(line.rule.ports)).empty()) {
      continue;
    }
    for (const std::string& name : candidates) {
      if (!name.empty() && line.rule.MatchesName(name)) {
        *why = DenyWhy(line);
        return false;
      }
    }
  }
  *why = absl::StrFormat("the operator's ceiling does not allow %s", session_rule.ToString());
  return false;
}

std::string EgressCeiling::ToString() const {
  std::string text;
  for (const Line& line : lines_) {
    absl::StrAppendFormat(&text, "%s %s\n", line.allow ? "allow" : "deny", line.rule.ToString());
  }
  return text;
}

absl::StatusOr<EgressCeiling> ParseEgressCeiling(std::string_view text) {
  if (text.size() > kMaxCeilingBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the egress ceiling is %d bytes; it may be at most %d", text.size(), kMaxCeilingBytes));
  }
  std::vector<Line> lines;
  int number = 0;
  std::string_view rest = text;
  while (!rest.empty()) {
    ++number;
    size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    auto bad = [&](std::string_view problem) {
      return absl::InvalidArgumentError(
          absl::StrFormat("egress ceiling line %d: %s", number, problem));
    };
    line = line.substr(0, line.find('#'));
    std::vector<std::string_view> words;
    while (true) {
      size_t start = line.find_first_not_of(" \t\r");
      if (start == std::string_view::npos) break;
      line = line.substr(start);
      size_t stop = line.find_first_of(" \t\r");
      words.push_back(line.substr(0, stop));
      if (words.size() > 2) break;
      line = stop == std::string_view::npos ? std::string_view() : line.substr(stop);
    }
    if (words.empty()) continue;
    const bool verb = words[0] == "allow" || words[0] == "deny";
    if (!verb) {
      return bad(
          absl::StrFormat("%s: a line is \"allow RULE\" or \"deny RULE\", as in allow "
                          "*.example.com",
                          QuoteForMessage(words[0])));
    }
    if (words.size() == 1) {
      return bad(
          absl::StrFormat("give a rule after %s, as in %s *.example.com", words[0], words[0]));
    }
    if (words.size() > 2) {
      return bad(absl::StrFormat("one rule per line; write %s %s and %s %s on lines of their own",
                                 words[0], QuoteForMessage(words[1]), words[0],
                                 QuoteForMessage(words[2])));
    }
    const bool allow = words[0] == "allow";
    absl::StatusOr<EgressRule> rule =
        ParseEgressRule(words[1], allow ? RuleContext::kCeilingAllow : RuleContext::kCeilingDeny);
    if (!rule.ok()) return bad(std::string(rule.status().message()));
    if (lines.size() == kMaxCeilingLines) {
      return bad(
          absl::StrFormat("too many lines; an egress ceiling has at most %d", kMaxCeilingLines));
    }
    lines.push_back(Line{allow, *std::move(rule), std::string(words[1]), number});
  }
  return EgressCeiling(std::move(lines));
}

absl::StatusOr<EgressPolicy> EgressPolicy::Create(std::vector<EgressRule> session_rules,
                                                  std::shared_ptr<const EgressCeiling> ceiling,
                                                  std::vector<IpAddress> host_addresses) {
  EgressPolicy policy(std::move(session_rules), std::move(ceiling), std::move(host_addresses));
  for (const EgressRule& rule : policy.session_rules_) {
    if (rule.kind == EgressRule::Kind::kAnyName) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cannot allow %s: \"*\" is for the operator's ceiling; a session names its hosts, as "
          "in pypi.org or *.example.com",
          QuoteForMessage(rule.ToString())));
    }
    std::string why;
    if (!policy.ceiling_->Admits(rule, &why)) {
      return absl::PermissionDeniedError(
          absl::StrFormat("cannot allow %s: %s", QuoteForMessage(rule.ToString()), why));
    }
  }
  return policy;
}

EgressPolicy::EgressPolicy(std::vector<EgressRule> session_rules,
                           std::shared_ptr<const EgressCeiling> ceiling,
                           std::vector<IpAddress> host_addresses,
                           std::vector<EgressRule> session_denies)
    : session_rules_(std::move(session_rules)),
      session_denies_(std::move(session_denies)),
      ceiling_(ceiling != nullptr
                   ? std::move(ceiling)
                   : std::make_shared<const EgressCeiling>(EgressCeiling::Default())),
      host_addresses_(std::move(host_addresses)) {}

const EgressRule* EgressPolicy::DenyFor(std::string_view name, const IpAddress* address,
                                        uint16_t port) const {
  for (const EgressRule& rule : session_denies_) {
    if (!rule.MatchesPort(port)) continue;
    if (!name.empty() && IsNameRule(rule) && rule.MatchesName(name)) return &rule;
    if (address != nullptr && rule.MatchesAddress(*address)) return &rule;
  }
  return nullptr;
}

Decision EgressPolicy::CheckName(std::string_view name, uint16_t port) const {
  Decision decision;
  absl::StatusOr<std::string> normalized = NormalizeHostName(name);
  if (!normalized.ok()) {
    decision.reason = std::string(normalized.status().message());
    return decision;
  }
  if (port == 0) {
    decision.reason = "port 0 cannot be connected to";
    return decision;
  }
  if (!ceiling_->AdmitsName(*normalized, port, &decision.reason)) return decision;
  if (const EgressRule* deny = DenyFor(*normalized, nullptr, port)) {
    decision.reason =
        absl::StrFormat("the session denies %s (network rm lifts it)", deny->ToString());
    return decision;
  }
  bool name_allowed = false;
  for (const EgressRule& rule : session_rules_) {
    if (!IsNameRule(rule) || !rule.MatchesName(*normalized)) continue;
    if (rule.MatchesPort(port)) {
      decision.allowed = true;
      decision.rule = rule.ToString();
      decision.raw = rule.raw;
      return decision;
    }
    name_allowed = true;
  }
  EgressRule suggestion;
  suggestion.name = *normalized;
  suggestion.ports = SuggestedPorts(port);
  if (name_allowed) {
    decision.reason = absl::StrFormat("%s is allowed but port %d is not; allow it with --allow %s",
                                      *normalized, port, suggestion.ToString());
  } else {
    decision.reason = absl::StrFormat("no rule allows %s:%d; allow it with --allow %s", *normalized,
                                      port, suggestion.ToString());
  }
  return decision;
}

PortSet EgressPolicy::PortsForName(std::string_view name) const {
  absl::StatusOr<std::string> normalized = NormalizeHostName(name);
  if (!normalized.ok()) return PortSet{};
  PortSet session;
  for (const EgressRule& rule : session_rules_) {
    if (IsNameRule(rule) && rule.MatchesName(*normalized)) {
      session = Join(session, RulePorts(rule.ports));
    }
  }
  for (const EgressRule& deny : session_denies_) {
    if (IsNameRule(deny) && deny.MatchesName(*normalized)) {
      session = Minus(session, RulePorts(deny.ports));
    }
  }
  return Meet(session, ceiling_->PortsForName(*normalized));
}

Decision EgressPolicy::CheckAddress(std::string_view name, const IpAddress& address,
                                    uint16_t port) const {
  if (!name.empty()) {
    Decision decision = CheckName(name, port);
    if (!decision.allowed) return decision;
    std::string why;
    if (!ceiling_->AdmitsAddress(address, port, /*ip_literal=*/false, host_addresses_, &why)) {
      decision.allowed = false;
      decision.rule.clear();
      decision.reason = absl::StrFormat("%s resolved to %s: %s", *NormalizeHostName(name),
                                        address.ToString(), why);
    } else if (const EgressRule* deny = DenyFor("", &address, port)) {
      decision.allowed = false;
      decision.rule.clear();
      decision.reason =
          absl::StrFormat("%s resolved to %s, which the session denies (%s)",
                          *NormalizeHostName(name), address.ToString(), deny->ToString());
    }
    return decision;
  }
  Decision decision;
  if (port == 0) {
    decision.reason = "port 0 cannot be connected to";
    return decision;
  }
  if (!ceiling_->AdmitsAddress(address, port, /*ip_literal=*/true, host_addresses_,
                               &decision.reason)) {
    return decision;
  }
  if (const EgressRule* deny = DenyFor("", &address, port)) {
    decision.reason =
        absl::StrFormat("the session denies %s (network rm lifts it)", deny->ToString());
    return decision;
  }
  bool address_allowed = false;
  for (const EgressRule& rule : session_rules_) {
    if (!rule.MatchesAddress(address)) continue;
    if (rule.MatchesPort(port)) {
      decision.allowed = true;
      decision.rule = rule.ToString();
      decision.reason.clear();
      return decision;
    }
    address_allowed = true;
  }
  std::string suggestion = SingleAddressRule(address, SuggestedPorts(port)).ToString();
  if (address_allowed) {
    decision.reason = absl::StrFormat("%s is allowed but port %d is not; allow it with --allow %s",
                                      address.ToString(), port, suggestion);
  } else {
    decision.reason = absl::StrFormat("no rule allows %s; allow it with --allow %s",
                                      AddressAndPort(address, port), suggestion);
  }
  return decision;
}

}  // namespace airlock::net
