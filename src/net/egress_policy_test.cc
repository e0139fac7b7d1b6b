#include "src/net/egress_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace airlock::net {
namespace {

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

IpAddress Ip(const char* text) {
  std::optional<IpAddress> address = IpAddress::Parse(text);
  EXPECT_TRUE(address.has_value()) << text;
  return address.value_or(IpAddress{});
}

std::vector<EgressRule> Rules(const std::vector<std::string>& texts) {
  std::vector<EgressRule> rules;
  for (const std::string& text : texts) {
    absl::StatusOr<EgressRule> rule = ParseEgressRule(text);
    EXPECT_TRUE(rule.ok()) << rule.status();
    if (rule.ok()) rules.push_back(*rule);
  }
  return rules;
}

std::shared_ptr<const EgressCeiling> Ceiling(std::string_view text) {
  absl::StatusOr<EgressCeiling> ceiling = ParseEgressCeiling(text);
  EXPECT_TRUE(ceiling.ok()) << ceiling.status();
  return std::make_shared<const EgressCeiling>(ceiling.ok() ? *ceiling : EgressCeiling::Default());
}

EgressPolicy Policy(const std::vector<std::string>& rules, std::string_view ceiling = "allow *:*",
                    std::vector<IpAddress> host = {}) {
  return EgressPolicy(Rules(rules), Ceiling(ceiling), std::move(host));
}

std::string CeilingError(std::string_view text) {
  absl::StatusOr<EgressCeiling> ceiling = ParseEgressCeiling(text);
  EXPECT_FALSE(ceiling.ok()) << text;
  if (ceiling.ok()) return "";
  EXPECT_EQ(ceiling.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(ceiling.status().message());
}

// Whether the ceiling admits a session rule, and why not.
std::string NotAdmitted(const EgressCeiling& ceiling, std::string_view rule_text) {
  absl::StatusOr<EgressRule> rule = ParseEgressRule(rule_text);
  EXPECT_TRUE(rule.ok()) << rule.status();
  std::string why;
  if (ceiling.Admits(*rule, &why)) return "";
  EXPECT_FALSE(why.empty());
  return why;
}

TEST(EgressCeilingTest, ParsesDirectivesCommentsAndBlankLines) {
  absl::StatusOr<EgressCeiling> ceiling = ParseEgressCeiling(
      "# the operator's ceiling\n"
      "\n"
      "allow *:*   # anything public\r\n"
      "\tdeny  *.evil.com\n"
      "allow 10.20.0.0/16:5432\n"
      "deny *:25");
  ASSERT_TRUE(ceiling.ok()) << ceiling.status();
  ASSERT_EQ(ceiling->lines().size(), 4u);
  EXPECT_EQ(ceiling->lines()[1].line_number, 4);
  EXPECT_EQ(ceiling->lines()[1].text, "*.evil.com");
  EXPECT_FALSE(ceiling->lines()[1].allow);
  EXPECT_EQ(ceiling->ToString(),
            "allow *:*\ndeny *.evil.com:*\nallow 10.20.0.0/16:5432\ndeny *:25\n");
  absl::StatusOr<EgressCeiling> again = ParseEgressCeiling(ceiling->ToString());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ToString(), ceiling->ToString());

  EXPECT_EQ(EgressCeiling::Default().ToString(), "allow *:*\n");
  EXPECT_TRUE(ParseEgressCeiling("").ok());
  EXPECT_TRUE(ParseEgressCeiling("allow 0.0.0.0/0:*\nallow [::]/0:*\n").ok());
}

TEST(EgressCeilingTest, ErrorsNameTheLine) {
  EXPECT_EQ(CeilingError("allow *:*\n\n# x\ndeny *foo\n"),
            "egress ceiling line 4: \"*foo\": a wildcard must be \"*.\" followed by a domain, as "
            "in *.example.com");
  EXPECT_EQ(CeilingError("permit pypi.org"),
            "egress ceiling line 1: \"permit\": a line is \"allow RULE\" or \"deny RULE\", as in "
            "allow *.example.com");
  EXPECT_EQ(CeilingError("allow *\nallow"),
            "egress ceiling line 2: give a rule after allow, as in allow *.example.com");
  EXPECT_PRED2(Has, CeilingError("\nallow a.com b.com"),
               "egress ceiling line 2: one rule per line");
  EXPECT_PRED2(Has, CeilingError("allow pypi.org:0"), "line 1: \"pypi.org:0\": port 0");
  EXPECT_PRED2(Has, CeilingError("ALLOW pypi.org"), "line 1");
  EXPECT_PRED2(Has, CeilingError("allow 10.20.1.0/16"), "the range is 10.20.0.0/16");
  EXPECT_PRED2(Has, CeilingError(std::string(kMaxCeilingBytes + 1, '#')), "at most");
  std::string many;
  for (size_t i = 0; i <= kMaxCeilingLines; ++i) many += "allow a.com\n";
  EXPECT_PRED2(Has, CeilingError(many), "too many lines");
}

TEST(EgressCeilingTest, DenyWinsOverAllow) {
  std::shared_ptr<const EgressCeiling> ceiling = Ceiling(
      "allow *:*\n"
      "deny *.evil.com\n"
      "deny *:25\n"
      "allow mail.example.com:25\n");
  std::string why;
  EXPECT_FALSE(ceiling->AdmitsName("a.evil.com", 443, &why));
  EXPECT_EQ(why, "the operator's ceiling denies *.evil.com (ceiling line 2)");
  EXPECT_FALSE(ceiling->AdmitsName("a.b.evil.com", 8080, nullptr));
  EXPECT_TRUE(ceiling->AdmitsName("evil.com", 443, nullptr));  // not strictly below
  EXPECT_TRUE(ceiling->AdmitsName("notevil.com", 443, nullptr));
  EXPECT_FALSE(ceiling->AdmitsName("mail.example.com", 25, &why));
  EXPECT_EQ(why, "the operator's ceiling denies *:25 (ceiling line 3)");
  EXPECT_TRUE(ceiling->AdmitsName("mail.example.com", 587, nullptr));

  std::shared_ptr<const EgressCeiling> names_only = Ceiling("allow pypi.org\nallow *.debian.org");
  EXPECT_TRUE(names_only->AdmitsName("pypi.org", 443, nullptr));
  EXPECT_FALSE(names_only->AdmitsName("pypi.org", 8080, &why));
  EXPECT_EQ(why, "the operator's ceiling does not allow pypi.org on port 8080");
  EXPECT_TRUE(names_only->AdmitsName("deb.debian.org", 80, nullptr));
  EXPECT_FALSE(names_only->AdmitsName("npmjs.org", 443, nullptr));
}

TEST(EgressCeilingTest, AdmitsRefusesSessionRulesThatCanNeverMatch) {
  std::shared_ptr<const EgressCeiling> ceiling =
      Ceiling("allow *:*\ndeny *.evil.com\ndeny bad.example.com:*\ndeny *.co.uk:443");
  EXPECT_EQ(NotAdmitted(*ceiling, "x.evil.com"),
            "the operator's ceiling denies *.evil.com (ceiling line 2)");
  EXPECT_PRED2(Has, NotAdmitted(*ceiling, "*.a.evil.com:*"), "denies *.evil.com");
  EXPECT_EQ(NotAdmitted(*ceiling, "evil.com"), "");
  EXPECT_EQ(NotAdmitted(*ceiling, "*.example.com"), "");  // only one name below it is denied
  EXPECT_PRED2(Has, NotAdmitted(*ceiling, "bad.example.com"), "denies bad.example.com");
  EXPECT_EQ(NotAdmitted(*ceiling, "*.co.uk"), "");  // port 80 is left
  EXPECT_PRED2(Has, NotAdmitted(*ceiling, "*.co.uk:443"), "denies *.co.uk");

  // Internal ranges need the ceiling to name them; public ones do not.
  EXPECT_EQ(NotAdmitted(*ceiling, "10.20.0.0/16"),
            "10.20.0.0/16 is internal: 10.20.0.0 is a private address (in 10.0.0.0/8); the "
            "operator's ceiling does not allow it (an operator admits it with \"allow "
            "10.20.0.0/16\" in the --egress-ceiling file)");
  EXPECT_PRED2(Has, NotAdmitted(*ceiling, "169.254.169.254:80"), "cloud metadata");
  EXPECT_PRED2(Has, NotAdmitted(*ceiling, "127.0.0.1:*"),
               "127.0.0.1 is internal: 127.0.0.1 is a loopback address");
  EXPECT_PRED2(Has, NotAdmitted(*ceiling, "[fd00::]/8"), "unique local");
  EXPECT_EQ(NotAdmitted(*ceiling, "1.1.1.0/24:853"), "");
  EXPECT_EQ(NotAdmitted(*ceiling, "10.0.0.0/7"), "");  // 11/8 is public

  std::shared_ptr<const EgressCeiling> lab =
      Ceiling("allow *:*\nallow 10.20.0.0/16:5432\nallow 127.0.0.1/32:*\ndeny 1.2.3.0/24");
  EXPECT_EQ(NotAdmitted(*lab, "10.20.1.5:5432"), "");
  EXPECT_EQ(NotAdmitted(*lab, "10.20.0.0/16:*"), "");
  EXPECT_PRED2(Has, NotAdmitted(*lab, "10.20.1.5:22"), "allow 10.20.1.5:22");
  EXPECT_EQ(NotAdmitted(*lab, "127.0.0.1:8080"), "");
  EXPECT_EQ(NotAdmitted(*lab, "1.2.3.4"),
            "the operator's ceiling denies 1.2.3.0/24 (ceiling line 4)");

  // A ceiling of names admits only those names, on their ports, and no IP literals.
  std::shared_ptr<const EgressCeiling> names =
      Ceiling("allow pypi.org\nallow a.example.com:8443\nallow *.debian.org");
  EXPECT_EQ(NotAdmitted(*names, "pypi.org"), "");
  EXPECT_EQ(NotAdmitted(*names, "pypi.org:*"), "");
  EXPECT_EQ(NotAdmitted(*names, "pypi.org:8080"),
            "the operator's ceiling does not allow pypi.org:8080");
  EXPECT_PRED2(Has, NotAdmitted(*names, "npmjs.org"), "does not allow npmjs.org");
  EXPECT_EQ(NotAdmitted(*names, "*.example.com:*"), "");  // a.example.com:8443
  EXPECT_PRED2(Has, NotAdmitted(*names, "*.example.com"), "does not allow *.example.com");
  EXPECT_EQ(NotAdmitted(*names, "*.security.debian.org"), "");
  EXPECT_PRED2(Has, NotAdmitted(*names, "1.1.1.1"), "does not allow connections to 1.1.1.1");

  // An empty ceiling admits nothing.
  std::shared_ptr<const EgressCeiling> none = Ceiling("# nothing\n");
  EXPECT_PRED2(Has, NotAdmitted(*none, "pypi.org"), "does not allow pypi.org");
  EXPECT_NE(NotAdmitted(*none, "1.1.1.1"), "");
}

TEST(EgressPolicyTest, NamesNeedASessionRuleOnTheirPort) {
  EgressPolicy policy = Policy({"pypi.org", "*.example.com:8443", "api.x.com:*"});
  Decision d = policy.CheckName("pypi.org", 443);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.rule, "pypi.org");
  EXPECT_EQ(d.reason, "");
  EXPECT_TRUE(policy.CheckName("PyPI.org.", 80).allowed);
  EXPECT_EQ(policy.CheckName("a.b.example.com", 8443).rule, "*.example.com:8443");
  EXPECT_EQ(policy.CheckName("api.x.com", 9999).rule, "api.x.com:*");

  d = policy.CheckName("api.y.com", 443);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "");
  EXPECT_EQ(d.reason, "no rule allows api.y.com:443; allow it with --allow api.y.com");
  EXPECT_EQ(policy.CheckName("api.y.com", 8080).reason,
            "no rule allows api.y.com:8080; allow it with --allow api.y.com:8080");
  EXPECT_EQ(policy.CheckName("pypi.org", 8080).reason,
            "pypi.org is allowed but port 8080 is not; allow it with --allow pypi.org:8080");
  EXPECT_EQ(policy.CheckName("a.example.com", 443).reason,
            "a.example.com is allowed but port 443 is not; allow it with --allow a.example.com");
  EXPECT_PRED2(Has, policy.CheckName("example.com", 8443).reason, "no rule allows example.com");
  EXPECT_PRED2(Has, policy.CheckName("badexample.com", 8443).reason, "no rule allows");
}

TEST(EgressPolicyTest, NamesAGuestSendsAreCheckedBeforeMatching) {
  EgressPolicy policy = Policy({"*.pypi.org"});
  // A NUL would end the name at "evil.com" for the resolver.
  Decision d = policy.CheckName(std::string("evil.com\0.pypi.org", 18), 443);
  EXPECT_FALSE(d.allowed);
  EXPECT_PRED2(Has, d.reason, "\"evil.com\\x00.pypi.org\"");
  EXPECT_FALSE(policy.CheckName("evil.com .pypi.org", 443).allowed);
  EXPECT_FALSE(policy.CheckName("a..pypi.org", 443).allowed);
  EXPECT_FALSE(policy.CheckName(std::string(300, 'a') + ".pypi.org", 443).allowed);
  EXPECT_FALSE(policy.CheckName("", 443).allowed);
  EXPECT_TRUE(policy.CheckName("x.pypi.org", 443).allowed);
  EXPECT_FALSE(policy.CheckName("x.pypi.org", 0).allowed);
  EXPECT_TRUE(policy.PortsForName(std::string("evil.com\0.pypi.org", 18)).empty());
}

TEST(EgressPolicyTest, TheCeilingDecidesFirst) {
  EgressPolicy policy =
      Policy({"*.evil.com", "pypi.org:*"}, "allow *:*\ndeny *.evil.com\ndeny *:25");
  Decision d = policy.CheckName("x.evil.com", 443);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "the operator's ceiling denies *.evil.com (ceiling line 2)");
  EXPECT_EQ(policy.CheckName("pypi.org", 25).reason,
            "the operator's ceiling denies *:25 (ceiling line 3)");
  EXPECT_TRUE(policy.CheckName("pypi.org", 26).allowed);
}

TEST(EgressPolicyTest, PortsForName) {
  EgressPolicy policy = Policy({"pypi.org", "*.example.com:8443", "a.example.com:22", "x.com:*"},
                               "allow *:*\ndeny *:25\ndeny a.example.com:8443");
  EXPECT_EQ(policy.PortsForName("pypi.org"), (PortSet{.ports = {80, 443}}));
  EXPECT_EQ(policy.PortsForName("b.example.com"), (PortSet{.ports = {8443}}));
  EXPECT_EQ(policy.PortsForName("a.example.com"), (PortSet{.ports = {22}}));
  EXPECT_EQ(policy.PortsForName("X.com."), (PortSet{.any = true, .excluded = {25}}));
  EXPECT_TRUE(policy.PortsForName("y.com").empty());
  EXPECT_TRUE(policy.PortsForName("example.com").empty());

  EgressPolicy narrow = Policy({"x.com:*"}, "allow *:443\nallow x.com:8080");
  EXPECT_EQ(narrow.PortsForName("x.com"), (PortSet{.ports = {443, 8080}}));
}

std::vector<int> Ports() {
  std::vector<int> ports;
  for (int port = 0; port <= 9000; ++port) ports.push_back(port);
  for (int port : {32768, 65534, 65535}) ports.push_back(port);
  return ports;
}

TEST(EgressPolicyTest, PortsForNameAgreesWithCheckNameOnEveryPort) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"pypi.org", "x.com:*", "*.x.com:8080"}, "allow *:*"},
      {{"x.com:*", "a.x.com:22"}, "allow *:*\ndeny *:25\ndeny x.com:443\ndeny *.x.com:*"},
      {{"x.com:*", "*.x.com"}, "allow *:443\nallow x.com:8080\nallow *.x.com:*\ndeny a.x.com:80"},
      {{"x.com:9"}, "allow *:*\ndeny *:*"},
      {{"x.com"}, ""},
  };
  for (const auto& [rules, ceiling] : cases) {
    EgressPolicy policy = Policy(rules, ceiling);
    for (const char* name : {"x.com", "a.x.com", "b.x.com", "pypi.org", "y.org"}) {
      PortSet ports = policy.PortsForName(name);
      // Every port a rule names is below 9000; the rest behave alike.
      for (int port : Ports()) {
        ASSERT_EQ(ports.Contains(port), policy.CheckName(name, port).allowed)
            << name << ":" << port << " under " << ceiling;
      }
    }
  }
}

TEST(EgressPolicyTest, ResolvedAddressesMustNotBeInternal) {
  EgressPolicy policy = Policy({"rebind.example.com"});
  EXPECT_TRUE(policy.CheckAddress("rebind.example.com", Ip("151.101.0.223"), 443).allowed);
  EXPECT_EQ(policy.CheckAddress("rebind.example.com", Ip("151.101.0.223"), 443).rule,
            "rebind.example.com");

  Decision d = policy.CheckAddress("rebind.example.com", Ip("127.0.0.1"), 443);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "");
  EXPECT_EQ(d.reason,
            "rebind.example.com resolved to 127.0.0.1: 127.0.0.1 is a loopback address (in "
            "127.0.0.0/8); the operator's ceiling does not allow it (an operator admits it with "
            "\"allow 127.0.0.1:443\" in the --egress-ceiling file)");
  EXPECT_PRED2(Has, policy.CheckAddress("rebind.example.com", Ip("10.1.2.3"), 443).reason,
               "10.1.2.3 is a private address");
  EXPECT_PRED2(Has, policy.CheckAddress("rebind.example.com", Ip("169.254.169.254"), 80).reason,
               "169.254.169.254 is the cloud metadata address");
  EXPECT_PRED2(Has, policy.CheckAddress("rebind.example.com", Ip("::ffff:127.0.0.1"), 443).reason,
               "IPv4-mapped address for 127.0.0.1");
  EXPECT_PRED2(Has, policy.CheckAddress("rebind.example.com", Ip("64:ff9b::a00:1"), 443).reason,
               "NAT64 address for 10.0.0.1");
  EXPECT_PRED2(Has, policy.CheckAddress("rebind.example.com", Ip("::1"), 443).reason, "loopback");
  EXPECT_PRED2(Has, policy.CheckAddress("rebind.example.com", Ip("fd12::1"), 443).reason,
               "unique local");
  // The name is checked again.
  EXPECT_PRED2(Has, policy.CheckAddress("other.example.com", Ip("151.101.0.223"), 443).reason,
               "no rule allows other.example.com:443");
  EXPECT_PRED2(Has, policy.CheckAddress("rebind.example.com", Ip("151.101.0.223"), 22).reason,
               "port 22 is not");
}

TEST(EgressPolicyTest, TheCeilingCanAdmitInternalAddresses) {
  EgressPolicy policy = Policy({"localtest.example", "db.internal.example:5432"},
                               "allow *:*\nallow 127.0.0.1/32:*\nallow 10.20.0.0/16:5432");
  EXPECT_TRUE(policy.CheckAddress("localtest.example", Ip("127.0.0.1"), 443).allowed);
  EXPECT_TRUE(policy.CheckAddress("localtest.example", Ip("::ffff:127.0.0.1"), 80).allowed);
  EXPECT_FALSE(policy.CheckAddress("localtest.example", Ip("127.0.0.2"), 443).allowed);
  EXPECT_FALSE(policy.CheckAddress("localtest.example", Ip("64:ff9b::7f00:1"), 443).allowed);
  EXPECT_TRUE(policy.CheckAddress("db.internal.example", Ip("10.20.3.4"), 5432).allowed);
  EXPECT_FALSE(policy.CheckAddress("db.internal.example", Ip("10.21.3.4"), 5432).allowed);
}

TEST(EgressPolicyTest, TheHostsOwnAddressesNeedALineNamingThem) {
  std::vector<IpAddress> host = {Ip("203.0.114.7"), Ip("127.0.0.1")};
  EgressPolicy policy = Policy({"me.example"}, "allow *:*", host);
  Decision d = policy.CheckAddress("me.example", Ip("203.0.114.7"), 443);
  EXPECT_FALSE(d.allowed);
  EXPECT_PRED2(Has, d.reason, "203.0.114.7 is one of this host's own addresses");
  EXPECT_FALSE(policy.CheckAddress("me.example", Ip("::ffff:203.0.114.7"), 443).allowed);
  EXPECT_TRUE(policy.CheckAddress("me.example", Ip("203.0.114.8"), 443).allowed);

  EgressPolicy broad = Policy({"me.example"}, "allow *:*\nallow 203.0.114.0/24:*", host);
  EXPECT_FALSE(broad.CheckAddress("me.example", Ip("203.0.114.7"), 443).allowed);
  EgressPolicy exact = Policy({"me.example"}, "allow *:*\nallow 203.0.114.7/32:443", host);
  EXPECT_TRUE(exact.CheckAddress("me.example", Ip("203.0.114.7"), 443).allowed);
  EXPECT_FALSE(exact.CheckAddress("me.example", Ip("203.0.114.7"), 22).allowed);
  EgressPolicy loopback = Policy({"me.example"}, "allow *:*\nallow 127.0.0.0/8:*", host);
  EXPECT_FALSE(loopback.CheckAddress("me.example", Ip("127.0.0.1"), 443).allowed);
  EXPECT_TRUE(loopback.CheckAddress("me.example", Ip("127.0.0.2"), 443).allowed);
}

TEST(EgressPolicyTest, IpLiteralsNeedAnAddressRule) {
  EgressPolicy policy = Policy({"pypi.org", "1.1.1.0/24", "9.9.9.9:853", "[2606:4700::]/32:443"});
  Decision d = policy.CheckAddress("", Ip("8.8.8.8"), 443);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "no rule allows 8.8.8.8:443; allow it with --allow 8.8.8.8");
  EXPECT_EQ(policy.CheckAddress("", Ip("8.8.8.8"), 53).reason,
            "no rule allows 8.8.8.8:53; allow it with --allow 8.8.8.8:53");
  EXPECT_EQ(policy.CheckAddress("", Ip("2a00:1450::1"), 443).reason,
            "no rule allows [2a00:1450::1]:443; allow it with --allow [2a00:1450::1]");

  d = policy.CheckAddress("", Ip("1.1.1.1"), 443);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.rule, "1.1.1.0/24");
  EXPECT_TRUE(policy.CheckAddress("", Ip("::ffff:1.1.1.1"), 443).allowed);
  EXPECT_EQ(policy.CheckAddress("", Ip("1.1.1.1"), 22).reason,
            "1.1.1.1 is allowed but port 22 is not; allow it with --allow 1.1.1.1:22");
  EXPECT_TRUE(policy.CheckAddress("", Ip("9.9.9.9"), 853).allowed);
  EXPECT_EQ(policy.CheckAddress("", Ip("2606:4700::1111"), 443).rule, "[2606:4700::]/32:443");
  EXPECT_FALSE(policy.CheckAddress("", Ip("1.1.1.1"), 0).allowed);
}

TEST(EgressPolicyTest, IpLiteralsToInternalAddressesNeedTheCeiling) {
  EgressPolicy policy = Policy({"10.20.0.0/16:5432", "127.0.0.1:*"});
  Decision d = policy.CheckAddress("", Ip("10.20.1.5"), 5432);
  EXPECT_FALSE(d.allowed);
  EXPECT_PRED2(Has, d.reason,
               "10.20.1.5 is a private address (in 10.0.0.0/8); the operator's "
               "ceiling does not allow it");

  EgressPolicy lab = Policy({"10.20.0.0/16:5432", "127.0.0.1:*"},
                            "allow *:*\nallow 10.20.0.0/16:5432\nallow "
                            "127.0.0.1/32:*");
  EXPECT_TRUE(lab.CheckAddress("", Ip("10.20.1.5"), 5432).allowed);
  EXPECT_TRUE(lab.CheckAddress("", Ip("127.0.0.1"), 8000).allowed);
  EXPECT_FALSE(lab.CheckAddress("", Ip("10.20.1.5"), 22).allowed);
  EXPECT_FALSE(lab.CheckAddress("", Ip("10.21.1.5"), 5432).allowed);
}

TEST(EgressPolicyTest, TheCeilingLimitsIpLiterals) {
  // Deny ranges cover the IPv4 address a NAT64 or 6to4 address carries.
  EgressPolicy policy =
      Policy({"dns.example", "8.8.8.0/24:*", "[64:ff9b::]/96:*"}, "allow *:*\ndeny 8.8.8.0/24");
  EXPECT_EQ(policy.CheckAddress("", Ip("8.8.8.8"), 443).reason,
            "the operator's ceiling denies 8.8.8.0/24 (ceiling line 2)");
  EXPECT_FALSE(policy.CheckAddress("", Ip("64:ff9b::808:808"), 443).allowed);
  EXPECT_FALSE(policy.CheckAddress("dns.example", Ip("8.8.8.8"), 443).allowed);
  EXPECT_FALSE(policy.CheckAddress("dns.example", Ip("2002:808:808::1"), 443).allowed);
  EXPECT_TRUE(policy.CheckAddress("dns.example", Ip("8.8.4.4"), 443).allowed);

  // A ceiling that lists only names admits no literals; "*" lines limit their ports.
  EgressPolicy names = Policy({"1.1.1.1:*"}, "allow pypi.org");
  EXPECT_PRED2(Has, names.CheckAddress("", Ip("1.1.1.1"), 443).reason,
               "does not allow connections to IP addresses such as 1.1.1.1 on port 443");
  EgressPolicy https = Policy({"1.1.1.1:*"}, "allow *:443\ndeny *:8443");
  EXPECT_TRUE(https.CheckAddress("", Ip("1.1.1.1"), 443).allowed);
  EXPECT_FALSE(https.CheckAddress("", Ip("1.1.1.1"), 22).allowed);
  EgressPolicy no_smtp = Policy({"1.1.1.1:*"}, "allow *:*\ndeny *:25");
  EXPECT_EQ(no_smtp.CheckAddress("", Ip("1.1.1.1"), 25).reason,
            "the operator's ceiling denies *:25 (ceiling line 2)");
}

TEST(EgressPolicyTest, CreateRefusesRulesOutsideTheCeiling) {
  auto ceiling = Ceiling("allow *:*\ndeny *.evil.com");
  absl::StatusOr<EgressPolicy> policy =
      EgressPolicy::Create(Rules({"pypi.org", "x.evil.com"}), ceiling, {});
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(policy.status().message(),
            "cannot allow \"x.evil.com\": the operator's ceiling denies *.evil.com (ceiling line "
            "2)");

  policy = EgressPolicy::Create(Rules({"10.20.0.0/16"}), ceiling, {});
  ASSERT_FALSE(policy.ok());
  EXPECT_PRED2(Has, std::string(policy.status().message()), "10.20.0.0/16 is internal");

  EgressRule any;
  any.kind = EgressRule::Kind::kAnyName;
  policy = EgressPolicy::Create({any}, ceiling, {});
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);

  policy = EgressPolicy::Create(Rules({"pypi.org", "1.1.1.0/24"}), nullptr, {});
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_TRUE(policy->CheckName("pypi.org", 443).allowed);
  EXPECT_EQ(policy->ceiling().ToString(), "allow *:*\n");
  EXPECT_EQ(policy->session_rules().size(), 2u);

  absl::StatusOr<std::vector<EgressRule>> preset = PresetRules("github");
  ASSERT_TRUE(preset.ok());
  policy = EgressPolicy::Create(*preset, nullptr, {});
  ASSERT_TRUE(policy.ok());
  EXPECT_TRUE(policy->CheckName("objects.githubusercontent.com", 443).allowed);
  EXPECT_FALSE(policy->CheckName("githubusercontent.com", 443).allowed);
}

}  // namespace
}  // namespace airlock::net
