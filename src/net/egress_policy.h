// A session's egress policy: its own rules (--allow) under the operator's ceiling.
//
// The guest has no NIC. Every DNS question and every connection it makes reaches the host as a
// name or an address, with a port (src/guest/agent_net.h), and the host asks this policy twice:
// CheckName before it resolves a name or answers a DNS question, then CheckAddress for each
// address it would connect to. A destination is allowed only when a session rule allows it and
// the operator's ceiling admits it; the ceiling also keeps sessions off internal addresses
// (address_guard.h) unless it names them, so a name that resolves to 127.0.0.1 or
// 169.254.169.254 (DNS rebinding) is refused even though the name was allowed.
//
// The ceiling file (airlockd --egress-ceiling FILE) has one directive per line; '#' starts a
// comment, blank lines are ignored:
//   allow *:*                  the default: any name, any port, any public address
//   allow *.corp.example:443   names (rule syntax of egress_rule.h; "*" is any name)
//   deny *.evil.com            a deny without a port denies every port; deny wins over allow
//   allow 10.20.0.0/16:5432    admits an internal range: names that resolve into it, and literals
//   allow 127.0.0.1/32:*       (a host's own address is admitted only by a line naming it alone)
//   deny 203.0.113.0/24
// A name on a port is within the ceiling when an allow line matches both and no deny line does.
// An address is within it when no deny range contains it (nor the IPv4 address it embeds), and
// either an allow range contains it, or it is not internal and it came from an allowed name. A
// connection to an IP literal (no name) to a public address needs an allow range or an allow
// "*" line for its port, and no deny "*" line for it: an operator who lists only names admits
// no literals.
//
// Both classes are immutable once built; their const methods may be called from any thread.
#ifndef AIRLOCK_NET_EGRESS_POLICY_H_
#define AIRLOCK_NET_EGRESS_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "src/net/address_guard.h"
#include "src/net/egress_rule.h"

namespace airlock::net {

inline constexpr size_t kMaxCeilingBytes = 256 * 1024;
inline constexpr size_t kMaxCeilingLines = 4096;  // directives, not counting comments and blanks

// A set of ports (1-65535): every port but `excluded` when `any`, else exactly `ports`.
struct PortSet {
  bool any = false;
  std::vector<uint16_t> ports;     // when !any: sorted, no duplicates
  std::vector<uint16_t> excluded;  // when any: sorted, no duplicates

  bool Contains(uint16_t port) const;
  bool empty() const { return !any && ports.empty(); }
  bool operator==(const PortSet&) const = default;
};

// The outcome of a check. Denials carry a reason for the user that says what to add.
struct Decision {
  bool allowed = false;
  // When allowed: the canonical text of the session rule that allowed it.
  std::string rule;
  // When denied: why, and what to do, e.g.
  //   no rule allows api.x.com:443; allow it with --allow api.x.com
  //   api.x.com is allowed but port 8080 is not; allow it with --allow api.x.com:8080
  //   the operator's ceiling denies *.evil.com (ceiling line 3)
  std::string reason;
  // When allowed by a /raw rule: the connection is carried without a Host or SNI check.
  bool raw = false;
};

// What the operator allows any session on this host at most.
class EgressCeiling {
 public:
  struct Line {
    bool allow = true;
    EgressRule rule;
    std::string text;     // the rule as the file wrote it, for messages
    int line_number = 0;  // 1-based; 0 for the built-in default
  };

  // "allow *:*": any name on any port, and any public address; no internal address.
  static EgressCeiling Default();

  // Whether a name (normalized: NormalizeHostName) on a port is within the ceiling. When not,
  // *why (if not null) says which line denies it, or that no line allows it.
  bool AdmitsName(std::string_view name, uint16_t port, std::string* why) const;
  // The ports a name (normalized) is within the ceiling on.
  PortSet PortsForName(std::string_view name) const;
  // Whether a connection to address on port is within the ceiling: ip_literal when the guest
  // connected to the address itself rather than to a name allowed before (see the top of this
  // file). host_addresses are the host's own addresses.
  bool AdmitsAddress(const IpAddress& address, uint16_t port, bool ip_literal,
                     const std::vector<IpAddress>& host_addresses, std::string* why) const;
  // Whether a session rule could ever match a destination within the ceiling; false (with *why)
  // when it cannot, e.g. a name the ceiling denies outright, or an internal range the ceiling
  // does not name, so that --allow is refused up front. The host's own addresses are not known
  // here: CheckAddress refuses them later.
  bool Admits(const EgressRule& session_rule, std::string* why) const;

  const std::vector<Line>& lines() const { return lines_; }
  // The directives, one per line, canonical ("allow *:*\ndeny *.evil.com:*\n"); parses back to
  // a ceiling with the same rules.
  std::string ToString() const;

 private:
  friend absl::StatusOr<EgressCeiling> ParseEgressCeiling(std::string_view text);
  explicit EgressCeiling(std::vector<Line> lines) : lines_(std::move(lines)) {}

  std::vector<Line> lines_;
};

// Parses a ceiling file (see the top of this file). Errors are InvalidArgument and name the
// line: `egress ceiling line 4: "*foo": a wildcard must be "*." followed by a domain, ...`.
// A file with no allow line is valid: sessions may then reach nothing.
[[nodiscard]] absl::StatusOr<EgressCeiling> ParseEgressCeiling(std::string_view text);

class EgressPolicy {
 public:
  // Checks every session rule first: a "*" rule is InvalidArgument, and a rule the ceiling can
  // never admit is PermissionDenied with the ceiling's reason, so --allow fails up front.
  // A null ceiling is EgressCeiling::Default().
  [[nodiscard]] static absl::StatusOr<EgressPolicy> Create(
      std::vector<EgressRule> session_rules, std::shared_ptr<const EgressCeiling> ceiling,
      std::vector<IpAddress> host_addresses);

  // No checks: a rule outside the ceiling simply never allows anything. host_addresses are the
  // host's own addresses (HostAddresses()); they are always internal. A null ceiling is
  // EgressCeiling::Default().
  // session_denies: rules (parsed as kCeilingDeny: no port means every port) whose
  // destinations the session may not reach whatever its other rules allow.
  EgressPolicy(std::vector<EgressRule> session_rules, std::shared_ptr<const EgressCeiling> ceiling,
               std::vector<IpAddress> host_addresses, std::vector<EgressRule> session_denies = {});

  // Before resolution (a DNS question, a connection to a name): whether name may be reached on
  // port. The name may be anything a guest sent; one that is not a valid host name is denied.
  Decision CheckName(std::string_view name, uint16_t port) const;

  // The ports name may be reached on: those of the session rules that match it, within the
  // ceiling. PortsForName(n).Contains(p) == CheckName(n, p).allowed for every port.
  PortSet PortsForName(std::string_view name) const;

  // After resolution, for each address: name is the name the guest asked for (checked again
  // with CheckName), or empty when it connected to an IP literal, which a session address rule
  // must then allow on port. Either way the ceiling and the address guard decide on address.
  Decision CheckAddress(std::string_view name, const IpAddress& address, uint16_t port) const;

  const std::vector<EgressRule>& session_rules() const { return session_rules_; }
  const EgressCeiling& ceiling() const { return *ceiling_; }

 private:
  // The session deny rule that matches name (normalized; empty: none) or address on port.
  const EgressRule* DenyFor(std::string_view name, const IpAddress* address, uint16_t port) const;

  std::vector<EgressRule> session_rules_;
  std::vector<EgressRule> session_denies_;
  std::shared_ptr<const EgressCeiling> ceiling_;
  std::vector<IpAddress> host_addresses_;
};

}  // namespace airlock::net

#endif  // AIRLOCK_NET_EGRESS_POLICY_H_
