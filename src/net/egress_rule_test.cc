#include "src/net/egress_rule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace airlock::net {
namespace {

using Kind = EgressRule::Kind;

EgressRule Parse(std::string_view text, RuleContext context = RuleContext::kSession) {
  absl::StatusOr<EgressRule> rule = ParseEgressRule(text, context);
  EXPECT_TRUE(rule.ok()) << text << ": " << rule.status();
  return rule.value_or(EgressRule{});
}

// The message of the error a rule gives; fails the test if it parses.
std::string Error(std::string_view text, RuleContext context = RuleContext::kSession) {
  absl::StatusOr<EgressRule> rule = ParseEgressRule(text, context);
  EXPECT_FALSE(rule.ok()) << text << " parsed as " << (rule.ok() ? rule->ToString() : "");
  if (rule.ok()) return "";
  EXPECT_EQ(rule.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(rule.status().message());
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(EgressRuleTest, ParsesNames) {
  EgressRule rule = Parse("pypi.org");
  EXPECT_EQ(rule.kind, Kind::kName);
  EXPECT_EQ(rule.name, "pypi.org");
  EXPECT_EQ(rule.ports, (std::vector<uint16_t>{80, 443}));

  rule = Parse("*.example.com:8443");
  EXPECT_EQ(rule.kind, Kind::kNameSuffix);
  EXPECT_EQ(rule.name, "example.com");
  EXPECT_EQ(rule.ports, (std::vector<uint16_t>{8443}));

  rule = Parse("api.x.com:*");
  EXPECT_EQ(rule.kind, Kind::kName);
  EXPECT_TRUE(rule.ports.empty());

  EXPECT_EQ(Parse("*.co.uk").name, "co.uk");
  EXPECT_EQ(Parse("_acme-challenge.example.com").name, "_acme-challenge.example.com");
  EXPECT_EQ(Parse("localhost").name, "localhost");
  EXPECT_EQ(Parse("xn--bcher-kva.de").name, "xn--bcher-kva.de");
  EXPECT_EQ(Parse("a.b:65535").ports, (std::vector<uint16_t>{65535}));
  EXPECT_EQ(Parse("a.b:1").ports, (std::vector<uint16_t>{1}));
}

TEST(EgressRuleTest, FoldsCaseAndOneTrailingDot) {
  EXPECT_EQ(Parse("PyPI.ORG").name, "pypi.org");
  EXPECT_EQ(Parse("pypi.org.").name, "pypi.org");
  EXPECT_EQ(Parse("pypi.org.:443").name, "pypi.org");
  EXPECT_EQ(Parse("*.Example.COM.").name, "example.com");
  EXPECT_PRED2(Has, Error("pypi.org.."), "empty label");
}

TEST(EgressRuleTest, ParsesAddresses) {
  EgressRule rule = Parse("10.20.0.0/16:5432");
  EXPECT_EQ(rule.kind, Kind::kAddress);
  EXPECT_EQ(rule.prefix.ToString(), "10.20.0.0/16");
  EXPECT_EQ(rule.ports, (std::vector<uint16_t>{5432}));

  rule = Parse("10.20.1.5");
  EXPECT_EQ(rule.prefix.ToString(), "10.20.1.5/32");
  EXPECT_EQ(rule.ports, (std::vector<uint16_t>{80, 443}));

  rule = Parse("[2001:db8::]/32:443");
  EXPECT_EQ(rule.prefix.base.family, AF_INET6);
  EXPECT_EQ(rule.prefix.ToString(), "2001:db8::/32");
  EXPECT_EQ(rule.ports, (std::vector<uint16_t>{443}));

  rule = Parse("[2001:DB8::1]:443");
  EXPECT_EQ(rule.prefix.ToString(), "2001:db8::1/128");

  // An IPv4-mapped range is its IPv4 range.
  EXPECT_EQ(Parse("[::ffff:10.0.0.0]/104").ToString(), "10.0.0.0/8");
  EXPECT_EQ(Parse("[::ffff:10.0.0.1]:22").ToString(), "10.0.0.1:22");
}

TEST(EgressRuleTest, CanonicalTextRoundTrips) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"pypi.org", "pypi.org"},
      {"PYPI.org.", "pypi.org"},
      {"*.example.com:8443", "*.example.com:8443"},
      {"api.x.com:*", "api.x.com:*"},
      {"10.20.0.0/16:5432", "10.20.0.0/16:5432"},
      {"10.20.1.5", "10.20.1.5"},
      {"10.20.1.5/32", "10.20.1.5"},
      {"10.20.1.5/32:*", "10.20.1.5:*"},
      {"10.20.0.0/016", "10.20.0.0/16"},
      {"pypi.org:0443", "pypi.org:443"},
      {"[2001:db8::]/32:443", "[2001:db8::]/32:443"},
      {"[2001:0db8:0000::1]", "[2001:db8::1]"},
      {"[2001:db8::1]/128:*", "[2001:db8::1]:*"},
  };
  for (const auto& [text, canonical] : cases) {
    EgressRule rule = Parse(text);
    EXPECT_EQ(rule.ToString(), canonical) << text;
    EXPECT_EQ(Parse(rule.ToString()), rule) << text;
  }
  const std::vector<std::pair<std::string, std::string>> ceiling = {
      {"*", "*"},
      {"*:*", "*:*"},
      {"*:443", "*:443"},
      {"0.0.0.0/0", "0.0.0.0/0"},
      {"[::]/0:*", "[::]/0:*"},
      {"*.com", "*.com"},
  };
  for (const auto& [text, canonical] : ceiling) {
    EgressRule rule = Parse(text, RuleContext::kCeilingAllow);
    EXPECT_EQ(rule.ToString(), canonical) << text;
    EXPECT_EQ(Parse(rule.ToString(), RuleContext::kCeilingAllow), rule) << text;
  }
}

TEST(EgressRuleTest, WildcardsMatchNamesStrictlyBelowTheirDomain) {
  EgressRule rule = Parse("*.example.com");
  EXPECT_TRUE(rule.MatchesName("a.example.com"));
  EXPECT_TRUE(rule.MatchesName("a.b.example.com"));
  EXPECT_FALSE(rule.MatchesName("example.com"));
  EXPECT_FALSE(rule.MatchesName("badexample.com"));
  EXPECT_FALSE(rule.MatchesName("a.badexample.com"));
  EXPECT_FALSE(rule.MatchesName(".example.com"));
  EXPECT_FALSE(rule.MatchesName("example.com.evil.net"));
  EXPECT_FALSE(rule.MatchesName("com"));
  EXPECT_FALSE(rule.MatchesName(""));

  EgressRule exact = Parse("example.com");
  EXPECT_TRUE(exact.MatchesName("example.com"));
  EXPECT_FALSE(exact.MatchesName("a.example.com"));
  EXPECT_FALSE(exact.MatchesName("example.co"));

  EXPECT_TRUE(Parse("*", RuleContext::kCeilingAllow).MatchesName("anything.at.all"));
  EXPECT_FALSE(Parse("10.0.0.0/8").MatchesName("example.com"));
}

TEST(EgressRuleTest, MatchesPortsAndAddresses) {
  EgressRule rule = Parse("pypi.org");
  EXPECT_TRUE(rule.MatchesPort(80));
  EXPECT_TRUE(rule.MatchesPort(443));
  EXPECT_FALSE(rule.MatchesPort(8080));
  EXPECT_TRUE(Parse("pypi.org:*").MatchesPort(8080));
  EXPECT_FALSE(Parse("pypi.org:8080").MatchesPort(443));

  EgressRule range = Parse("10.20.0.0/16");
  EXPECT_TRUE(range.MatchesAddress(*IpAddress::Parse("10.20.3.4")));
  EXPECT_TRUE(range.MatchesAddress(*IpAddress::Parse("::ffff:10.20.3.4")));
  EXPECT_FALSE(range.MatchesAddress(*IpAddress::Parse("10.21.3.4")));
  EXPECT_FALSE(Parse("pypi.org").MatchesAddress(*IpAddress::Parse("10.20.3.4")));
}

TEST(EgressRuleTest, ACallersWildcardOverAPublicSuffixIsTooBroad) {
  for (const char* broad : {"*.co.uk", "*.github.io", "*.com"}) {
    absl::StatusOr<EgressRule> rule = ParseSessionRule(broad);
    ASSERT_FALSE(rule.ok()) << broad;
    EXPECT_NE(rule.status().message().find("too broad"), absl::string_view::npos) << broad;
  }
  EXPECT_NE(ParseSessionRule("*.co.uk").status().message().find("co.uk is a public suffix"),
            absl::string_view::npos);
  EXPECT_TRUE(ParseSessionRule("*.example.co.uk").ok());
  EXPECT_TRUE(ParseSessionRule("*.me.github.io").ok());
  // Rules granted already, the presets' and the operator's ceiling are read as they are.
  EXPECT_EQ(Parse("*.github.io").name, "github.io");
  EXPECT_TRUE(PresetRules("github").ok());
  EXPECT_EQ(Parse("*.co.uk", RuleContext::kCeilingAllow).name, "co.uk");
}

TEST(EgressRuleTest, ARuleCoversOnlyWhatItAllowsItself) {
  // /raw only in a session's rules, "*" only in the ceiling's.
  auto parse = [](std::string_view text) {
    return Parse(text, text.ends_with("/raw") ? RuleContext::kSession : RuleContext::kCeilingAllow);
  };
  auto covers = [&](std::string_view wide, std::string_view narrow) {
    return parse(wide).Covers(parse(narrow));
  };
  EXPECT_TRUE(covers("pypi.org", "pypi.org"));
  EXPECT_TRUE(covers("pypi.org", "pypi.org:443"));
  EXPECT_FALSE(covers("pypi.org:443", "pypi.org"));  // 80 too
  EXPECT_FALSE(covers("pypi.org", "pypi.org:8080"));
  EXPECT_FALSE(covers("pypi.org", "pypi.org:*"));
  EXPECT_TRUE(covers("pypi.org:*", "pypi.org:8080"));
  EXPECT_FALSE(covers("pypi.org", "evil.org"));
  EXPECT_FALSE(covers("pypi.org", "*.pypi.org"));
  EXPECT_TRUE(covers("*.example.com", "api.example.com"));
  EXPECT_TRUE(covers("*.example.com", "*.example.com"));
  EXPECT_TRUE(covers("*.example.com", "*.eu.example.com"));
  EXPECT_FALSE(covers("*.example.com", "example.com"));
  EXPECT_FALSE(covers("*.eu.example.com", "*.example.com"));
  EXPECT_FALSE(covers("*.example.com", "api.example.com.evil.org"));
  EXPECT_TRUE(covers("*", "anything.org"));
  EXPECT_TRUE(covers("*", "*.anything.org"));
  EXPECT_FALSE(covers("*", "10.0.0.1"));  // names only
  EXPECT_TRUE(covers("10.20.0.0/16", "10.20.3.0/24"));
  EXPECT_TRUE(covers("10.20.0.0/16", "10.20.3.4"));
  EXPECT_FALSE(covers("10.20.3.0/24", "10.20.0.0/16"));
  EXPECT_FALSE(covers("10.20.0.0/16", "api.example.com"));
  EXPECT_FALSE(covers("api.example.com", "10.20.3.4"));
  EXPECT_FALSE(covers("git.example.com", "git.example.com/raw"));
  EXPECT_TRUE(covers("git.example.com/raw", "git.example.com/raw"));
  EXPECT_TRUE(covers("git.example.com/raw", "git.example.com"));
}

TEST(EgressRuleTest, MalformedRulesSayWhatToWriteInstead) {
  EXPECT_EQ(Error("*foo"),
            "\"*foo\": a wildcard must be \"*.\" followed by a domain, as in *.example.com");
  EXPECT_EQ(Error("*."),
            "\"*.\": a wildcard must be \"*.\" followed by a domain, as in *.example.com");
  EXPECT_EQ(Error("*.."),
            "\"*..\": a wildcard must be \"*.\" followed by a domain, as in *.example.com");
  EXPECT_EQ(Error("foo*"),
            "\"foo*\": a wildcard may only be a leading \"*.\", as in *.example.com");
  EXPECT_EQ(Error("*.*.com"),
            "\"*.*.com\": a wildcard may only be a leading \"*.\", as in *.example.com");
  EXPECT_PRED2(Has, Error("a.*.com"), "only be a leading");
  EXPECT_PRED2(Has, Error("a..b"), "empty label (two dots in a row");
  EXPECT_PRED2(Has, Error(".a.b"), "empty label");
  EXPECT_EQ(Error("*.com"),
            "\"*.com\": too broad: it matches every name under the top-level domain com; give a "
            "domain, as in *.example.com");
  EXPECT_PRED2(Has, Error("*.COM."), "too broad");
  EXPECT_PRED2(Has, Error(""), "an empty rule; give a host name (pypi.org)");
  EXPECT_PRED2(Has, Error("pypi org"), "contains whitespace");
  EXPECT_PRED2(Has, Error(" pypi.org"), "contains whitespace");
  EXPECT_PRED2(Has, Error("pypi.org\n"), "contains whitespace");
  EXPECT_EQ(Error("https://x.example.com/simple"),
            "\"https://x.example.com/simple\": give a host name, not a URL: x.example.com");
  EXPECT_PRED2(Has, Error("https://user:pw@x.example.com:8443/"), "not a URL: x.example.com:8443");
  EXPECT_PRED2(Has, Error("https://"), "give a host name, not a URL, as in pypi.org");
  EXPECT_PRED2(Has, Error("pypi.org/simple"), "not a URL or path: pypi.org");
  EXPECT_EQ(Error("user@host.example"),
            "\"user@host.example\": give a host name without a user name: host.example");
  EXPECT_PRED2(Has, Error("user@"), "without a user name, as in pypi.org");
  EXPECT_EQ(Error("*"),
            "\"*\": matches every host name; name the hosts, as in pypi.org or *.example.com");
  EXPECT_PRED2(Has, Error("*:443"), "matches every host name");
}

TEST(EgressRuleTest, MalformedNames) {
  EXPECT_PRED2(Has, Error(std::string(64, 'a') + ".com"), "a label is at most 63");
  EXPECT_TRUE(ParseEgressRule(std::string(63, 'a') + ".com").ok());
  std::string long_name;
  while (long_name.size() < 250) long_name += "abcdefghi.";
  long_name += "com";  // 253 characters
  ASSERT_EQ(long_name.size(), 253u);
  EXPECT_TRUE(ParseEgressRule(long_name).ok());
  EXPECT_TRUE(ParseEgressRule(long_name + ".").ok());
  EXPECT_PRED2(Has, Error("a" + long_name), "a host name is at most 253");
  EXPECT_PRED2(Has, Error(std::string(400, 'a')), "too long");
  EXPECT_PRED2(Has, Error("-a.com"), "starts or ends with '-'");
  EXPECT_PRED2(Has, Error("a-.com"), "starts or ends with '-'");
  EXPECT_PRED2(Has, Error("a!b.com"), "'!' cannot be in a host name");
  EXPECT_PRED2(Has,
               Error("b\xc3\xbc"
                     "cher.de"),
               "xn--");
  EXPECT_PRED2(Has, Error(std::string("a\0b.com", 7)),
               "\"a\\x00\\x62.com\": has a character that cannot be in a rule");
  EXPECT_PRED2(Has, Error("1.2.3"), "not a valid IPv4 address");
  EXPECT_PRED2(Has, Error("256.1.1.1"), "four numbers 0-255");
  EXPECT_PRED2(Has, Error("010.1.1.1"), "not a valid IPv4 address");
  EXPECT_PRED2(Has, Error("1.2.3.4.5:80"), "not a valid IPv4 address");
  EXPECT_PRED2(Has, Error("example.123"), "last label is all digits");
  EXPECT_PRED2(Has, Error(":443"), "give a host name before the port");
}

TEST(EgressRuleTest, MalformedPorts) {
  EXPECT_EQ(Error("pypi.org:0"), "\"pypi.org:0\": port 0 is out of range; a port is 1-65535");
  EXPECT_PRED2(Has, Error("pypi.org:65536"), "port 65536 is out of range");
  EXPECT_PRED2(Has, Error("pypi.org:99999999999"), "out of range");
  EXPECT_PRED2(Has, Error("pypi.org:"), "give a port after ':' (1-65535), or '*'");
  EXPECT_EQ(Error("pypi.org:80,443"),
            "\"pypi.org:80,443\": one port per rule; give a rule for each port, as in "
            "pypi.org:80 and pypi.org:443");
  EXPECT_PRED2(Has, Error("pypi.org:http"), "\"http\" is not a port");
  EXPECT_PRED2(Has, Error("pypi.org:-1"), "is not a port");
  EXPECT_PRED2(Has, Error("pypi.org:**"), "is not a port");
  EXPECT_PRED2(Has, Error("10.0.0.0/8:0"), "out of range");
  EXPECT_PRED2(Has, Error("[2001:db8::1]:"), "give a port after");
}

TEST(EgressRuleTest, MalformedAddresses) {
  EXPECT_EQ(Error("10.20.1.0/16"),
            "\"10.20.1.0/16\": host bits are set; the range is 10.20.0.0/16");
  EXPECT_PRED2(Has, Error("10.20.1.0/16:5432"), "the range is 10.20.0.0/16:5432");
  EXPECT_PRED2(Has, Error("[2001:db8::1]/32"), "the range is [2001:db8::]/32");
  EXPECT_PRED2(Has, Error("10.0.0.0/33"),
               "prefix length 33 is out of range; an IPv4 prefix "
               "length is 0-32");
  EXPECT_PRED2(Has, Error("[2001:db8::]/129"), "an IPv6 prefix length is 0-128");
  EXPECT_PRED2(Has, Error("10.0.0.0/"), "give a prefix length after '/'");
  EXPECT_PRED2(Has, Error("10.0.0.0/x"), "\"x\" is not a prefix length");
  EXPECT_PRED2(Has, Error("10.0.0.0/-1"), "is not a prefix length");
  EXPECT_EQ(Error("0.0.0.0/0"),
            "\"0.0.0.0/0\": matches every address; name the hosts or a narrower range");
  EXPECT_PRED2(Has, Error("0.0.0.0/0:443"), "matches every address");
  EXPECT_PRED2(Has, Error("[::]/0"), "matches every address");
  EXPECT_PRED2(Has, Error("[::ffff:0.0.0.0]/96"), "matches every address");
  EXPECT_EQ(Error("2001:db8::1"),
            "\"2001:db8::1\": an IPv6 address goes in brackets, as in [2001:db8::1] or "
            "[2001:db8::1]:443");
  EXPECT_PRED2(Has, Error("2001:db8::/32"), "as in [2001:db8::]/32 or");
  EXPECT_PRED2(Has, Error("::1"), "as in [::1]");
  EXPECT_PRED2(Has, Error("[2001:db8::1"), "missing ']'");
  EXPECT_PRED2(Has, Error("[2001:db8::/32]"),
               "the prefix length goes after the bracket, as in "
               "[2001:db8::]/32");
  EXPECT_PRED2(Has, Error("[10.0.0.1]:80"), "brackets are for IPv6 addresses; write 10.0.0.1:80");
  EXPECT_PRED2(Has, Error("[zz::1]"), "not a valid IPv6 address");
  EXPECT_PRED2(Has, Error("[]"), "not a valid IPv6 address");
  EXPECT_PRED2(Has, Error("[2001:db8::1]x"), "expected /LENGTH or :PORT after ']'");
  EXPECT_PRED2(Has, Error("[2001:db8::1]]"), "expected /LENGTH or :PORT");
}

TEST(EgressRuleTest, TheCeilingMaySayMore) {
  EgressRule any = Parse("*", RuleContext::kCeilingAllow);
  EXPECT_EQ(any.kind, Kind::kAnyName);
  EXPECT_EQ(any.ports, (std::vector<uint16_t>{80, 443}));
  EXPECT_TRUE(Parse("*:*", RuleContext::kCeilingAllow).ports.empty());
  EXPECT_EQ(Parse("0.0.0.0/0", RuleContext::kCeilingAllow).prefix.length, 0);
  EXPECT_EQ(Parse("*.com", RuleContext::kCeilingDeny).name, "com");
  // A deny without a port denies every port.
  EXPECT_TRUE(Parse("*.evil.com", RuleContext::kCeilingDeny).ports.empty());
  EXPECT_EQ(Parse("*.evil.com:25", RuleContext::kCeilingDeny).ports, (std::vector<uint16_t>{25}));
  // Still malformed in a ceiling.
  EXPECT_PRED2(Has, Error("*foo", RuleContext::kCeilingAllow), "a wildcard must be");
  EXPECT_PRED2(Has, Error("10.20.1.0/16", RuleContext::kCeilingDeny), "host bits");
}

TEST(EgressRuleTest, LongInputIsQuotedShort) {
  std::string message = Error(std::string(5000, '!'));
  EXPECT_LT(message.size(), 200u);
  EXPECT_PRED2(Has, message, "...\"");
}

TEST(EgressRuleTest, NormalizesHostNamesFromAGuest) {
  EXPECT_EQ(*NormalizeHostName("Files.PythonHosted.org."), "files.pythonhosted.org");
  EXPECT_FALSE(NormalizeHostName("").ok());
  EXPECT_FALSE(NormalizeHostName(".").ok());
  EXPECT_FALSE(NormalizeHostName("10.1.2.3").ok());
  EXPECT_FALSE(NormalizeHostName("*.example.com").ok());
  EXPECT_FALSE(NormalizeHostName("a b.com").ok());
  absl::StatusOr<std::string> nul = NormalizeHostName(std::string("evil.com\0.pypi.org", 18));
  ASSERT_FALSE(nul.ok());
  EXPECT_PRED2(Has, std::string(nul.status().message()), "\"evil.com\\x00.pypi.org\"");
}

TEST(EgressRuleTest, RawRulesAreForNamesOfSessions) {
  EgressRule rule = Parse("ssh.example.com:443/raw");
  EXPECT_TRUE(rule.raw);
  EXPECT_EQ(rule.ports, std::vector<uint16_t>{443});
  EXPECT_EQ(rule.ToString(), "ssh.example.com:443/raw");
  EXPECT_EQ(Parse(rule.ToString()), rule);
  EXPECT_TRUE(Parse("*.example.com/raw").raw);
  EXPECT_FALSE(Parse("example.com").raw);
  EXPECT_TRUE(Has(Error("10.0.0.0/8:22/raw"), "/raw is for names"));
  EXPECT_TRUE(Has(Error("a.com/raw/raw"), "once"));
  EXPECT_TRUE(Has(Error("a.com/raw", RuleContext::kCeilingAllow), "not the ceiling"));
  EXPECT_FALSE(ParseEgressRule("/raw").ok());
}

TEST(EgressRuleTest, Presets) {
  std::vector<std::string> names = PresetNames();
  EXPECT_EQ(names,
            (std::vector<std::string>{"anthropic", "crates", "debian", "github", "golang",
                                      "huggingface", "npm", "openai", "openrouter", "pypi"}));
  for (const std::string& name : names) {
    absl::StatusOr<std::vector<EgressRule>> rules = PresetRules(name);
    ASSERT_TRUE(rules.ok()) << name;
    EXPECT_FALSE(rules->empty()) << name;
  }
  auto texts = [](std::string_view preset) {
    std::vector<std::string> out;
    absl::StatusOr<std::vector<EgressRule>> rules = PresetRules(preset);
    for (const EgressRule& rule : *rules) out.push_back(rule.ToString());
    return out;
  };
  EXPECT_EQ(texts("pypi"), (std::vector<std::string>{"pypi.org", "files.pythonhosted.org"}));
  EXPECT_EQ(texts("npm"), (std::vector<std::string>{"registry.npmjs.org", "registry.yarnpkg.com"}));
  std::vector<std::string> github = texts("github");
  EXPECT_NE(std::find(github.begin(), github.end(), "*.githubusercontent.com"), github.end());
  EXPECT_NE(std::find(github.begin(), github.end(), "ghcr.io"), github.end());
  std::vector<std::string> hf = texts("huggingface");
  EXPECT_NE(std::find(hf.begin(), hf.end(), "*.hf.co"), hf.end());

  absl::StatusOr<std::vector<EgressRule>> unknown = PresetRules("pip");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(),
            "unknown preset \"pip\"; the presets are anthropic, crates, debian, github, golang, "
            "huggingface, npm, openai, openrouter, pypi");
}

}  // namespace
}  // namespace airlock::net
