#include "src/net/address_guard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace airlock::net {
namespace {

IpAddress Ip(const char* text) {
  std::optional<IpAddress> address = IpAddress::Parse(text);
  EXPECT_TRUE(address.has_value()) << text;
  return address.value_or(IpAddress{});
}

IpPrefix Prefix(const char* base, int length) { return IpPrefix{Ip(base), length}; }

// The reason an address is internal, or "" when it is not.
std::string Why(const char* address, const std::vector<IpAddress>& host = {}) {
  std::string why;
  if (!IsInternalAddress(Ip(address), host, &why)) return "";
  EXPECT_FALSE(why.empty()) << address;
  return why;
}

bool HasText(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(IpAddressTest, ParsesAndPrintsBothFamilies) {
  IpAddress v4 = Ip("10.1.2.3");
  EXPECT_EQ(v4.family, AF_INET);
  EXPECT_EQ(v4, IpAddress::V4(10, 1, 2, 3));
  EXPECT_EQ(v4.ToString(), "10.1.2.3");
  IpAddress v6 = Ip("2001:DB8:0:0::1");
  EXPECT_EQ(v6.family, AF_INET6);
  EXPECT_EQ(v6.ToString(), "2001:db8::1");
  EXPECT_EQ(Ip("::ffff:127.0.0.1").ToString(), "::ffff:127.0.0.1");
  EXPECT_NE(Ip("::ffff:127.0.0.1"), Ip("127.0.0.1"));
}

TEST(IpAddressTest, RefusesAnythingButAPlainAddress) {
  for (const char* bad :
       {"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "010.1.1.1", "1.2.3.4/32", "[::1]", "fe80::1%eth0",
        "::1/128", "example.com", " 1.2.3.4", "1.2.3.4 ", "0x7f.0.0.1", "2130706433"}) {
    EXPECT_FALSE(IpAddress::Parse(bad).has_value()) << bad;
  }
  EXPECT_FALSE(IpAddress::Parse(std::string_view("1.2.3.4\0junk", 12)).has_value());
  EXPECT_FALSE(IpAddress::Parse(std::string(100, '1')).has_value());
}

TEST(IpPrefixTest, ContainsOverlapsAndMasks) {
  IpPrefix p = IpPrefix::Of(Ip("10.20.1.5"), 16);
  EXPECT_EQ(p.ToString(), "10.20.0.0/16");
  EXPECT_TRUE(p.Contains(Ip("10.20.255.255")));
  EXPECT_FALSE(p.Contains(Ip("10.21.0.0")));
  EXPECT_FALSE(p.Contains(Ip("::ffff:10.20.0.1")));  // another family; see Unmapped()
  EXPECT_TRUE(p.Contains(Prefix("10.20.4.0", 24)));
  EXPECT_FALSE(p.Contains(Prefix("10.0.0.0", 8)));
  EXPECT_TRUE(p.Overlaps(Prefix("10.0.0.0", 8)));
  EXPECT_FALSE(p.Overlaps(Prefix("11.0.0.0", 8)));
  EXPECT_TRUE(Prefix("0.0.0.0", 0).Contains(Ip("255.255.255.255")));
  EXPECT_EQ(IpPrefix::Of(Ip("2001:db8:ffff::1"), 32).ToString(), "2001:db8::/32");
  EXPECT_EQ(IpPrefix::Of(Ip("10.1.2.3"), 99).length, 32);
  EXPECT_EQ(IpPrefix::Of(Ip("10.1.2.3"), 7).ToString(), "10.0.0.0/7");
}

TEST(AddressGuardTest, Ipv4InternalRangesSayWhatTheyAre) {
  EXPECT_EQ(Why("127.0.0.1"), "127.0.0.1 is a loopback address (in 127.0.0.0/8)");
  EXPECT_EQ(Why("169.254.169.254"), "169.254.169.254 is the cloud metadata address");
  EXPECT_TRUE(HasText(Why("169.254.1.1"), "link-local"));
  EXPECT_EQ(Why("10.1.2.3"), "10.1.2.3 is a private address (in 10.0.0.0/8)");
  EXPECT_TRUE(HasText(Why("172.31.255.255"), "private"));
  EXPECT_TRUE(HasText(Why("192.168.0.1"), "private"));
  EXPECT_TRUE(HasText(Why("100.64.0.1"), "carrier-grade NAT"));
  EXPECT_TRUE(HasText(Why("100.127.255.255"), "carrier-grade NAT"));
  EXPECT_TRUE(HasText(Why("0.0.0.0"), "unspecified"));
  EXPECT_TRUE(HasText(Why("0.1.2.3"), "0.0.0.0/8"));
  EXPECT_TRUE(HasText(Why("192.0.0.8"), "192.0.0.0/24"));
  EXPECT_TRUE(HasText(Why("192.0.2.1"), "documentation"));
  EXPECT_TRUE(HasText(Why("198.51.100.7"), "documentation"));
  EXPECT_TRUE(HasText(Why("203.0.113.9"), "documentation"));
  EXPECT_TRUE(HasText(Why("198.19.255.1"), "benchmarking"));
  EXPECT_TRUE(HasText(Why("224.0.0.251"), "multicast"));
  EXPECT_TRUE(HasText(Why("239.255.255.250"), "multicast"));
  EXPECT_TRUE(HasText(Why("240.0.0.1"), "reserved"));
  EXPECT_EQ(Why("255.255.255.255"), "255.255.255.255 is the broadcast address");
}

TEST(AddressGuardTest, PublicIpv4IsNotInternalAtTheEdgesOfRanges) {
  for (const char* address :
       {"1.1.1.1",         "8.8.8.8",         "9.255.255.255", "11.0.0.0",        "100.63.255.255",
        "100.128.0.0",     "126.255.255.255", "128.0.0.0",     "169.253.255.255", "169.255.0.0",
        "172.15.255.255",  "172.32.0.0",      "192.0.1.0",     "192.0.3.0",       "192.167.255.255",
        "192.169.0.0",     "198.17.255.255",  "198.20.0.0",    "198.51.99.255",   "203.0.112.255",
        "223.255.255.255", "151.101.0.223"}) {
    EXPECT_EQ(Why(address), "") << address;
  }
  EXPECT_FALSE(IsInternalAddress(Ip("8.8.8.8"), {}, nullptr));
}

TEST(AddressGuardTest, Ipv6InternalRanges) {
  EXPECT_EQ(Why("::1"), "::1 is the loopback address");
  EXPECT_EQ(Why("::"), ":: is the unspecified address");
  EXPECT_TRUE(HasText(Why("fd00::1"), "unique local"));
  EXPECT_TRUE(HasText(Why("fc00::1"), "unique local"));
  EXPECT_TRUE(HasText(Why("fe80::1"), "link-local"));
  EXPECT_TRUE(HasText(Why("febf::1"), "link-local"));
  EXPECT_TRUE(HasText(Why("fec0::1"), "site-local"));
  EXPECT_TRUE(HasText(Why("ff02::1"), "multicast"));
  EXPECT_TRUE(HasText(Why("2001:db8::1"), "documentation"));
  EXPECT_TRUE(HasText(Why("100::1"), "discard-only"));
  EXPECT_TRUE(HasText(Why("2001::1"), "Teredo"));
  EXPECT_TRUE(HasText(Why("2001:0:4136:e378:8000:63bf:3fff:fdd2"), "Teredo"));
  EXPECT_TRUE(HasText(Why("64:ff9b:1::808:808"), "local-use NAT64"));
  for (const char* address : {"2606:4700::1111", "2a00:1450:4001:82a::200e", "2001:4860::8888",
                              "100:0:0:1::1", "2001:1::1", "2001:db9::1", "fbff::1", "ff::1"}) {
    EXPECT_EQ(Why(address), "") << address;
  }
}

TEST(AddressGuardTest, EmbeddedIpv4IsCheckedAsIpv4) {
  EXPECT_EQ(Why("::ffff:127.0.0.1"),
            "::ffff:127.0.0.1 is an IPv4-mapped address for 127.0.0.1, and 127.0.0.1 is a "
            "loopback address (in 127.0.0.0/8)");
  EXPECT_TRUE(HasText(Why("::ffff:169.254.169.254"), "cloud metadata"));
  EXPECT_TRUE(HasText(Why("64:ff9b::a00:1"), "NAT64 address for 10.0.0.1"));
  EXPECT_TRUE(HasText(Why("64:ff9b::7f00:1"), "127.0.0.1 is a loopback"));
  EXPECT_TRUE(HasText(Why("2002:a9fe:a9fe::1"), "6to4 address for 169.254.169.254"));
  EXPECT_TRUE(HasText(Why("::10.0.0.1"), "IPv4-compatible"));
  EXPECT_TRUE(HasText(Why("::ffff:0:c0a8:1"), "IPv4-translated"));
  // The same forms of a public address are public.
  for (const char* address :
       {"::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "::8.8.8.8", "::ffff:0:808:808"}) {
    EXPECT_EQ(Why(address), "") << address;
  }
}

TEST(AddressGuardTest, UnmappedAndEmbedded) {
  EXPECT_EQ(Unmapped(Ip("::ffff:1.2.3.4")), Ip("1.2.3.4"));
  EXPECT_EQ(Unmapped(Ip("64:ff9b::102:304")), Ip("64:ff9b::102:304"));
  EXPECT_EQ(Unmapped(Ip("1.2.3.4")), Ip("1.2.3.4"));
  EXPECT_EQ(EmbeddedIpv4(Ip("64:ff9b::102:304")), Ip("1.2.3.4"));
  EXPECT_EQ(EmbeddedIpv4(Ip("2002:102:304::")), Ip("1.2.3.4"));
  EXPECT_EQ(EmbeddedIpv4(Ip("::ffff:1.2.3.4")), Ip("1.2.3.4"));
  EXPECT_FALSE(EmbeddedIpv4(Ip("2606:4700::1111")).has_value());
  EXPECT_FALSE(EmbeddedIpv4(Ip("1.2.3.4")).has_value());
}

TEST(AddressGuardTest, TheHostsOwnAddressesAreInternal) {
  std::vector<IpAddress> host = {Ip("203.0.114.7"), Ip("2a01:4f8::7"), Ip("10.0.0.5")};
  EXPECT_EQ(Why("203.0.114.7", host), "203.0.114.7 is one of this host's own addresses");
  EXPECT_TRUE(HasText(Why("::ffff:203.0.114.7", host), "own addresses"));
  EXPECT_TRUE(HasText(Why("2a01:4f8::7", host), "own addresses"));
  EXPECT_EQ(Why("10.0.0.5", host),
            "10.0.0.5 is a private address (in 10.0.0.0/8), and one of this host's own addresses");
  EXPECT_EQ(Why("203.0.114.8", host), "");
  EXPECT_TRUE(IsHostAddress(Ip("::ffff:10.0.0.5"), host));
  EXPECT_FALSE(IsHostAddress(Ip("10.0.0.6"), host));
}

TEST(AddressGuardTest, InternalPrefixes) {
  std::string why;
  EXPECT_TRUE(IsInternalPrefix(Prefix("10.20.0.0", 16), {}, &why));
  EXPECT_EQ(why, "10.20.0.0 is a private address (in 10.0.0.0/8)");
  EXPECT_TRUE(IsInternalPrefix(Prefix("127.0.0.1", 32), {}, nullptr));
  EXPECT_TRUE(IsInternalPrefix(Prefix("224.0.0.0", 3), {}, nullptr));  // multicast + reserved
  EXPECT_TRUE(IsInternalPrefix(Prefix("169.254.169.0", 24), {}, nullptr));
  EXPECT_FALSE(IsInternalPrefix(Prefix("10.0.0.0", 7), {}, nullptr));  // 11/8 is public
  EXPECT_FALSE(IsInternalPrefix(Prefix("0.0.0.0", 0), {}, nullptr));
  EXPECT_FALSE(IsInternalPrefix(Prefix("8.8.8.0", 24), {}, nullptr));
  EXPECT_TRUE(IsInternalPrefix(Prefix("fe80::", 64), {}, nullptr));
  EXPECT_TRUE(IsInternalPrefix(Prefix("::ffff:10.0.0.0", 104), {}, nullptr));
  EXPECT_FALSE(IsInternalPrefix(Prefix("::ffff:0.0.0.0", 96), {}, nullptr));
  EXPECT_TRUE(IsInternalPrefix(Prefix("2002:c0a8::", 32), {}, nullptr));  // 6to4 192.168/16
  EXPECT_FALSE(IsInternalPrefix(Prefix("2002::", 16), {}, nullptr));
  EXPECT_FALSE(IsInternalPrefix(Prefix("::", 0), {}, nullptr));
  EXPECT_FALSE(IsInternalPrefix(Prefix("f800::", 6), {}, nullptr));  // fc00::/7 is half of it
  EXPECT_TRUE(IsInternalPrefix(Prefix("1.2.3.4", 32), {Ip("1.2.3.4")}, nullptr));
}

TEST(AddressGuardTest, HostAddressesAreListed) {
  absl::StatusOr<std::vector<IpAddress>> addresses = HostAddresses();
  ASSERT_TRUE(addresses.ok()) << addresses.status();
  EXPECT_TRUE(std::is_sorted(addresses->begin(), addresses->end()));
  for (const IpAddress& address : *addresses) {
    EXPECT_TRUE(IsInternalAddress(address, *addresses, nullptr)) << address.ToString();
  }
}

}  // namespace
}  // namespace airlock::net
