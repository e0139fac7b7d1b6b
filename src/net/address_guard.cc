#include "src/net/address_guard.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"
#include "src/common/errno_status.h"

namespace airlock::net {
namespace {

// A range the guard knows. When embedded_at >= 0 the range's addresses carry an IPv4 address at
// that byte offset (the range's length is 8 * embedded_at bits), and it is that IPv4 address
// which decides; otherwise the whole range is internal and `what` says what it is.
struct KnownRange {
  IpPrefix prefix;
  const char* what;
  int embedded_at = -1;
};

KnownRange Range(const char* base, int length, const char* what, int embedded_at = -1) {
  std::optional<IpAddress> address = IpAddress::Parse(base);
  // The table below is constant; a typo in it is a bug, caught by the first test that runs.
  if (!address.has_value() || IpPrefix::Of(*address, length).base != *address) abort();
  return KnownRange{IpPrefix{*address, length}, what, embedded_at};
}

// Ordered so that the first range containing an address is its most specific one.
const std::vector<KnownRange>& V4Ranges() {
  static const std::vector<KnownRange>* ranges = new std::vector<KnownRange>{
      Range("0.0.0.0", 32, "the unspecified address"),
      Range("0.0.0.0", 8, "a \"this network\" address"),
      Range("10.0.0.0", 8, "a private address"),
      Range("100.64.0.0", 10, "a carrier-grade NAT address"),
      Range("127.0.0.0", 8, "a loopback address"),
      Range("169.254.169.254", 32, "the cloud metadata address"),
      Range("169.254.0.0", 16, "a link-local address"),
      Range("172.16.0.0", 12, "a private address"),
      Range("192.0.0.0", 24, "an IETF protocol assignment"),
      Range("192.0.2.0", 24, "a documentation address"),
      Range("192.168.0.0", 16, "a private address"),
      Range("198.18.0.0", 15, "a benchmarking address"),
      Range("198.51.100.0", 24, "a documentation address"),
      Range("203.0.113.0", 24, "a documentation address"),
      Range("224.0.0.0", 4, "a multicast address"),
      Range("255.255.255.255", 32, "the broadcast address"),
      Range("240.0.0.0", 4, "a reserved address"),
  };
  return *ranges;
}

// For the ranges that embed an IPv4 address, `what` names the form.
const std::vector<KnownRange>& V6Ranges() {
  static const std::vector<KnownRange>* ranges = new std::vector<KnownRange>{
      Range("::", 128, "the unspecified address"),
      Range("::1", 128, "the loopback address"),
      Range("::ffff:0:0", 96, "an IPv4-mapped", 12),
      Range("::ffff:0:0:0", 96, "an IPv4-translated", 12),
      Range("::", 96, "an IPv4-compatible", 12),
      Range("64:ff9b::", 96, "a NAT64", 12),
      // Where a local-use NAT64 prefix puts the IPv4 address depends on the site's prefix
      // length, so all of it is internal.
      Range("64:ff9b:1::", 48, "a local-use NAT64 address"),
      Range("100::", 64, "a discard-only address"),
      // Teredo embeds an obfuscated client address and a server address: all of it is internal.
      Range("2001::", 32, "a Teredo address"),
      Range("2001:db8::", 32, "a documentation address"),
      Range("2002::", 16, "a 6to4", 2),
      Range("fc00::", 7, "a unique local (private) address"),
      Range("fe80::", 10, "a link-local address"),
      Range("fec0::", 10, "a site-local address"),
      Range("ff00::", 8, "a multicast address"),
  };
  return *ranges;
}

const std::vector<KnownRange>& RangesFor(int family) {
  return family == AF_INET6 ? V6Ranges() : V4Ranges();
}

const KnownRange* FindRange(const IpAddress& address) {
  for (const KnownRange& range : RangesFor(address.family)) {
    if (range.prefix.Contains(address)) return &range;
  }
  return nullptr;
}

IpAddress V4At(const IpAddress& address, int offset) {
  return IpAddress::V4(address.bytes[offset], address.bytes[offset + 1], address.bytes[offset + 2],
                       address.bytes[offset + 3]);
}

// Whether the address is internal by the tables alone (not the host's addresses).
bool InRanges(const IpAddress& address, std::string* why) {
  const KnownRange* range = FindRange(address);
  if (range == nullptr) return false;
  if (range->embedded_at >= 0) {
    IpAddress v4 = V4At(address, range->embedded_at);
    std::string v4_why;
    if (!InRanges(v4, &v4_why)) return false;
    if (why != nullptr) {
      *why = absl::StrFormat("%s is %s address for %s, and %s", address.ToString(), range->what,
                             v4.ToString(), v4_why);
    }
    return true;
  }
  if (why != nullptr) {
    *why = absl::StrFormat("%s is %s", address.ToString(), range->what);
    if (range->prefix.length < address.bit_length()) {
      absl::StrAppendFormat(why, " (in %s)", range->prefix.ToString());
    }
  }
  return true;
}

// The IPv4 range that the addresses of prefix (inside a range that embeds IPv4 at offset)
// carry: the embedded bits that prefix fixes.
IpPrefix EmbeddedPrefix(const IpPrefix& prefix, const KnownRange& range) {
  int fixed = std::min(prefix.length - range.prefix.length, 32);
  return IpPrefix::Of(V4At(prefix.base, range.embedded_at), fixed);
}

bool AllInternal(const IpPrefix& prefix, const std::vector<IpAddress>& host_addresses) {
  if (prefix.length >= prefix.base.bit_length()) {
    return IsInternalAddress(prefix.base, host_addresses, nullptr);
  }
  bool overlaps = false;
  for (const KnownRange& range : RangesFor(prefix.base.family)) {
    if (range.prefix.Contains(prefix)) {
      if (range.embedded_at < 0) return true;
      return AllInternal(EmbeddedPrefix(prefix, range), host_addresses);
    }
    overlaps = overlaps || prefix.Contains(range.prefix);
  }
  if (!overlaps) return false;
  // Internal in part: split the range in two and look at each half.
  IpPrefix low = IpPrefix::Of(prefix.base, prefix.length + 1);
  IpPrefix high = low;
  high.base.bytes[prefix.length / 8] |= static_cast<uint8_t>(0x80 >> (prefix.length % 8));
  return AllInternal(low, host_addresses) && AllInternal(high, host_addresses);
}

}  // namespace

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  // inet_pton reads a C string: no NULs, and nothing longer than an address can be.
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN || text.find('\0') != text.npos) {
    return std::nullopt;
  }
  std::string copy(text);
  IpAddress address;
  if (inet_pton(AF_INET, copy.c_str(), address.bytes.data()) == 1) {
    address.family = AF_INET;
    return address;
  }
  if (inet_pton(AF_INET6, copy.c_str(), address.bytes.data()) == 1) {
    address.family = AF_INET6;
    return address;
  }
  return std::nullopt;
}

IpAddress IpAddress::V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  IpAddress address;
  address.family = AF_INET;
  address.bytes[0] = a;
  address.bytes[1] = b;
  address.bytes[2] = c;
  address.bytes[3] = d;
  return address;
}

std::string IpAddress::ToString() const {
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(family == AF_INET6 ? AF_INET6 : AF_INET, bytes.data(), text, sizeof(text)) ==
      nullptr) {
    return "?";
  }
  return text;
}

IpPrefix IpPrefix::Of(const IpAddress& address, int length) {
  IpPrefix prefix;
  prefix.length = std::clamp(length, 0, address.bit_length());
  prefix.base = address;
  for (int i = prefix.length; i < 128; ++i) {
    prefix.base.bytes[i / 8] &= static_cast<uint8_t>(~(0x80 >> (i % 8)));
  }
  return prefix;
}

bool IpPrefix::Contains(const IpAddress& address) const {
  if (address.family != base.family) return false;
  return Of(address, length).base == base;
}

bool IpPrefix::Contains(const IpPrefix& other) const {
  return other.length >= length && Contains(other.base);
}

bool IpPrefix::Overlaps(const IpPrefix& other) const {
  return Contains(other) || other.Contains(*this);
}

std::string IpPrefix::ToString() const { return absl::StrFormat("%s/%d", base.ToString(), length); }

IpAddress Unmapped(const IpAddress& address) {
  static const KnownRange mapped = Range("::ffff:0:0", 96, "an IPv4-mapped", 12);
  if (!mapped.prefix.Contains(address)) return address;
  return V4At(address, mapped.embedded_at);
}

std::optional<IpAddress> EmbeddedIpv4(const IpAddress& address) {
  if (address.family != AF_INET6) return std::nullopt;
  const KnownRange* range = FindRange(address);
  if (range == nullptr || range->embedded_at < 0) return std::nullopt;
  return V4At(address, range->embedded_at);
}

bool IsHostAddress(const IpAddress& address, const std::vector<IpAddress>& host_addresses) {
  IpAddress plain = Unmapped(address);
  for (const IpAddress& host : host_addresses) {
    if (Unmapped(host) == plain) return true;
  }
  return false;
}

bool IsInternalAddress(const IpAddress& address, const std::vector<IpAddress>& host_addresses,
                       std::string* why) {
  bool host = IsHostAddress(address, host_addresses);
  if (InRanges(address, why)) {
    if (host && why != nullptr) *why += ", and one of this host's own addresses";
    return true;
  }
  if (host && why != nullptr) {
    *why = absl::StrFormat("%s is one of this host's own addresses", address.ToString());
  }
  return host;
}

bool IsInternalPrefix(const IpPrefix& prefix, const std::vector<IpAddress>& host_addresses,
                      std::string* why) {
  if (!AllInternal(prefix, host_addresses)) return false;
  if (why != nullptr) IsInternalAddress(prefix.base, host_addresses, why);
  return true;
}

absl::StatusOr<std::vector<IpAddress>> HostAddresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return ErrnoStatus("getifaddrs");
  std::vector<IpAddress> addresses;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr) continue;
    IpAddress address;
    if (entry->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(entry->ifa_addr);
      address.family = AF_INET;
      std::memcpy(address.bytes.data(), &in->sin_addr, 4);
    } else if (entry->ifa_addr->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr);
      address.family = AF_INET6;
      std::memcpy(address.bytes.data(), &in6->sin6_addr, 16);
    } else {
      continue;
    }
    addresses.push_back(address);
  }
  freeifaddrs(list);
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  return addresses;
}

}  // namespace airlock::net
