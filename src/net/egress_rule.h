// An egress rule: one destination a session may reach, as written after `--allow` and in the
// operator's ceiling file (egress_policy.h).
//
//   pypi.org             that name, ports 80 and 443 (the default)
//   *.example.com:8443   any name strictly below example.com (not example.com itself), port 8443
//   api.example.com:*    that name, any port
//   10.20.0.0/16:5432    an IPv4 range; 10.20.1.5 alone means 10.20.1.5/32
//   [2001:db8::]/32:443  an IPv6 range; [2001:db8::1]:443 a single address
//   *                    any name (the ceiling only)
//
// Names are compared lower-case, without a trailing dot. Rule text comes from users and
// operators; parsing it is bounded, and every error quotes the input and says what to write
// instead (fuzz/egress_rule_fuzz.cc). A parsed rule's ToString() parses back to an equal rule.
#ifndef AIRLOCK_NET_EGRESS_RULE_H_
#define AIRLOCK_NET_EGRESS_RULE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "src/net/address_guard.h"

namespace airlock::net {

inline constexpr size_t kMaxHostNameLength = 253;
inline constexpr size_t kMaxLabelLength = 63;
// Longer rule text is refused before it is looked at: a name, brackets, a length and a port.
inline constexpr size_t kMaxRuleLength = 300;

// Where rule text comes from, which decides what it may say and what a missing port means.
enum class RuleContext {
  // A session's --allow: no "*", no wildcard directly over a top-level domain (*.com), no
  // range of every address (0.0.0.0/0, [::]/0). No port means ports 80 and 443.
  kSession,
  // An "allow" line of the operator's ceiling: any of the above. No port means 80 and 443.
  kCeilingAllow,
  // A "deny" line of the ceiling: as kCeilingAllow, but no port means every port, so that a
  // deny is never narrower than it reads.
  kCeilingDeny,
};

struct EgressRule {
  enum class Kind {
    kName,        // name: exactly that name
    kNameSuffix,  // name: the suffix without "*."; matches names strictly below it
    kAddress,     // prefix: addresses in the range
    kAnyName,     // "*": any name (the ceiling only)
  };

  Kind kind = Kind::kName;
  std::string name;  // kName, kNameSuffix: lower-case, no trailing dot
  IpPrefix prefix;   // kAddress; an IPv4-mapped IPv6 range is stored as its IPv4 range
  // Empty: any port. The parser makes only {80, 443} (no port given), {} (":*") or one port.
  std::vector<uint16_t> ports = {80, 443};
  // "NAME[:PORT]/raw" (session rules for names only): connections it allows on ports 80 and 443
  // are carried without checking their HTTP Host or TLS SNI, for protocols other than HTTP and
  // TLS there (SSH over 443, say), at the price of not knowing which name the guest talks to.
  bool raw = false;

  // For kName, kNameSuffix and kAnyName rules; lower_name is lower-case without a trailing dot
  // (NormalizeHostName). Address rules match no name.
  bool MatchesName(std::string_view lower_name) const;
  // For kAddress rules; an IPv4-mapped address matches as its IPv4 address.
  bool MatchesAddress(const IpAddress& address) const;
  bool MatchesPort(uint16_t port) const;
  // Whether every destination `other` allows, this rule allows too (and carries it as checked
  // as `other` asks: a raw rule is covered only by a raw one). For a rule asked for inside a
  // configured set, such as a model's --allow inside what the user gave `airlock mcp`.
  bool Covers(const EgressRule& other) const;

  // Canonical text: "pypi.org" (the default ports are not written), "*.example.com:8443",
  // "10.20.0.0/16:5432", "10.20.1.5", "[2001:db8::]/32:443", "api.x.com:*", "*:*". Ports that
  // the parser cannot make (several, other than 80 and 443) are written "x:80,8080", which is
  // for reading only.
  std::string ToString() const;

  bool operator==(const EgressRule&) const = default;
};

// Parses one rule (see the top of this file). Errors are InvalidArgument, quote the input, and
// say what to write instead, e.g.
//   "*foo": a wildcard must be "*." followed by a domain, as in *.example.com
[[nodiscard]] absl::StatusOr<EgressRule> ParseEgressRule(
    std::string_view text, RuleContext context = RuleContext::kSession);

// A host name as rules compare it: lower-case, one trailing dot removed, and checked (labels of
// 1-63 letters, digits, '-' and '_', not starting or ending with '-'; at most 253 characters;
// not all digits in the last label). For names from a guest's DNS question or connection: a
// name that is not valid matches no rule.
[[nodiscard]] absl::StatusOr<std::string> NormalizeHostName(std::string_view name);

// The text in double quotes for an error message: escaped (C style), and cut short if long, so that
// hostile bytes cannot forge a log line.
std::string QuoteForMessage(std::string_view text);

// The rules of a preset for a common ecosystem, with the CDN hosts it downloads from: "pypi",
// "npm", "github", "debian", "huggingface", "crates", "golang", "anthropic", "openai",
// "openrouter". An unknown preset is InvalidArgument naming the known ones. A rule for a session
// (--allow) that the guest can serve: ParseEgressRule, and its ports listed, since the guest can
// only listen on named ports ("api.x.com:*" is refused with a message saying to name the port).
[[nodiscard]] absl::StatusOr<EgressRule> ParseSessionRule(std::string_view text);

[[nodiscard]] absl::StatusOr<std::vector<EgressRule>> PresetRules(std::string_view preset);
// The known presets, sorted.
std::vector<std::string> PresetNames();

}  // namespace airlock::net

#endif  // AIRLOCK_NET_EGRESS_RULE_H_
