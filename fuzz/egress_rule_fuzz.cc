// Fuzz target: egress rules as a user gives them to --allow, the operator's ceiling file, and
// the names a guest asks about.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/net/egress_policy.h"
#include "src/net/egress_rule.h"

namespace {

namespace net = airlock::net;
using Kind = net::EgressRule::Kind;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// Whatever parses prints canonically, and the canonical text parses back to the same rule.
void CheckRule(std::string_view text, net::RuleContext context) {
  absl::StatusOr<net::EgressRule> rule = net::ParseEgressRule(text, context);
  if (!rule.ok()) {
    Check(rule.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  std::string canonical = rule->ToString();
  absl::StatusOr<net::EgressRule> again = net::ParseEgressRule(canonical, context);
  Check(again.ok() && *again == *rule && again->ToString() == canonical);
  Check(rule->ports.size() <= 2);
  for (uint16_t port : rule->ports) Check(port != 0);
  switch (rule->kind) {
    case Kind::kName: {
      absl::StatusOr<std::string> name = net::NormalizeHostName(rule->name);
      Check(name.ok() && *name == rule->name && rule->MatchesName(rule->name));
      break;
    }
    case Kind::kNameSuffix:
      Check(net::NormalizeHostName(rule->name).ok() && !rule->MatchesName(rule->name));
      Check(rule->MatchesName("a." + rule->name));
      Check(context != net::RuleContext::kSession || rule->name.find('.') != std::string::npos);
      break;
    case Kind::kAddress:
      Check(net::IpPrefix::Of(rule->prefix.base, rule->prefix.length) == rule->prefix);
      Check(rule->MatchesAddress(rule->prefix.base));
      Check(context != net::RuleContext::kSession || rule->prefix.length > 0);
      break;
    case Kind::kAnyName:
      Check(context != net::RuleContext::kSession);
      break;
  }
}

// A ceiling's answers agree with each other for the names its lines give.
void CheckCeiling(const net::EgressCeiling& parsed) {
  auto ceiling = std::make_shared<const net::EgressCeiling>(parsed);
  size_t checked = 0;
  for (const net::EgressCeiling::Line& line : ceiling->lines()) {
    if (line.rule.kind != Kind::kName || ++checked > 8) continue;
    net::EgressRule session = line.rule;
    session.ports = {};
    net::EgressPolicy policy({session}, ceiling, {});
    net::PortSet ports = policy.PortsForName(line.rule.name);
    std::vector<uint16_t> probes = {1, 25, 80, 443, 8080, 65535};
    for (const net::EgressCeiling::Line& other : ceiling->lines()) {
      for (uint16_t port : other.rule.ports) probes.push_back(port);
    }
    bool any_allowed = false;
    for (uint16_t port : probes) {
      bool allowed = policy.CheckName(line.rule.name, port).allowed;
      Check(ports.Contains(port) == allowed);
      any_allowed = any_allowed || allowed;
    }
    // Admits never refuses a rule that allows something.
    Check(!any_allowed || ceiling->Admits(session, nullptr));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckRule(text, net::RuleContext::kSession);
  CheckRule(text, net::RuleContext::kCeilingAllow);
  CheckRule(text, net::RuleContext::kCeilingDeny);

  absl::StatusOr<net::EgressCeiling> ceiling = net::ParseEgressCeiling(text);
  if (ceiling.ok()) {
    std::string canonical = ceiling->ToString();
    absl::StatusOr<net::EgressCeiling> again = net::ParseEgressCeiling(canonical);
    Check(again.ok() && again->ToString() == canonical);
    CheckCeiling(*ceiling);
  } else {
    Check(ceiling.status().code() == absl::StatusCode::kInvalidArgument);
  }

  // A name from a guest is allowed only if it is a valid host name.
  static const net::EgressPolicy* policy = [] {
    std::vector<net::EgressRule> rules;
    for (const char* rule : {"*.pypi.org", "pypi.org:*", "10.0.0.0/8"}) {
      rules.push_back(*net::ParseEgressRule(rule));
    }
    return new net::EgressPolicy(std::move(rules), nullptr, {});
  }();
  if (policy->CheckName(text, 443).allowed) Check(net::NormalizeHostName(text).ok());

  if (std::optional<net::IpAddress> address = net::IpAddress::Parse(text)) {
    Check(net::IpAddress::Parse(address->ToString()) == address);
    std::string why;
    Check(!net::IsInternalAddress(*address, {}, &why) || !why.empty());
    Check(!policy->CheckAddress("x.pypi.org", *address, 443).allowed ||
          !net::IsInternalAddress(*address, {}, nullptr));
  }
  return 0;
}
