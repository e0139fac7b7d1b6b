// IP addresses and ranges, and which addresses are internal: the host's side of the world, which
// a session never reaches unless the operator says so.
//
// Egress is decided twice (egress_policy.h): on the name a guest asks for, then on each address
// that name resolves to. This file is the second check. Loopback, private, CGNAT, link-local
// (with the cloud metadata address), documentation, benchmarking, multicast and reserved IPv4
// ranges, their IPv6 counterparts, IPv6 forms that embed an IPv4 address (checked as that IPv4
// address), and the host's own addresses are internal, so a name that resolves to one of them
// (DNS rebinding) is refused. Everything here is a pure function of its arguments except
// HostAddresses().
#ifndef AIRLOCK_NET_ADDRESS_GUARD_H_
#define AIRLOCK_NET_ADDRESS_GUARD_H_

#include <sys/socket.h>

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock::net {

// An IPv4 or IPv6 address. An IPv4 address is in bytes[0..3] and the other bytes are zero, so
// comparisons are exact. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) stays IPv6 here; see
// Unmapped().
struct IpAddress {
  int family = AF_INET;  // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};

  // "10.1.2.3" (four decimal numbers, no leading zeros) or "2001:db8::1" (no brackets, zone or
  // prefix length), as inet_pton reads them; nullopt for anything else.
  static std::optional<IpAddress> Parse(std::string_view text);
  static IpAddress V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d);

  int bit_length() const { return family == AF_INET6 ? 128 : 32; }
  bool bit(int i) const { return (bytes[i / 8] >> (7 - i % 8)) & 1; }
  // "10.1.2.3", "2001:db8::1" (inet_ntop's form).
  std::string ToString() const;

  auto operator<=>(const IpAddress&) const = default;
};

// An address range: the first `length` bits of `base` fixed, the rest (host bits) zero.
struct IpPrefix {
  IpAddress base;
  int length = 0;

  // The range of `length` bits around address (its host bits cleared); length is clamped to
  // 0..address.bit_length().
  static IpPrefix Of(const IpAddress& address, int length);

  // Same family, and the first `length` bits equal.
  bool Contains(const IpAddress& address) const;
  // Every address of other is in this range.
  bool Contains(const IpPrefix& other) const;
  // Some address is in both.
  bool Overlaps(const IpPrefix& other) const;
  // "10.20.0.0/16", "2001:db8::/32"; always with the length.
  std::string ToString() const;

  bool operator==(const IpPrefix&) const = default;
};

// The IPv4 address an IPv4-mapped address (::ffff:a.b.c.d) stands for: a socket that connects to
// either reaches the same host. Any other address is returned unchanged.
IpAddress Unmapped(const IpAddress& address);

// The IPv4 address embedded in an IPv6 address of a form that carries one: IPv4-mapped
// (::ffff:0:0/96), IPv4-translated (::ffff:0:0:0/96), IPv4-compatible (::/96), NAT64
// (64:ff9b::/96) or 6to4 (2002::/16). nullopt for any other address, IPv4 ones included.
std::optional<IpAddress> EmbeddedIpv4(const IpAddress& address);

// Whether address is one of host_addresses (an IPv4-mapped form counts as its IPv4 address).
bool IsHostAddress(const IpAddress& address, const std::vector<IpAddress>& host_addresses);

// Whether a session must never reach address unless the operator's ceiling names it. When true
// and why is not null, *why says what the address is, e.g. "127.0.0.1 is a loopback address (in
// 127.0.0.0/8)" or "169.254.169.254 is the cloud metadata address". host_addresses are the
// host's own addresses (HostAddresses()); they are always internal.
bool IsInternalAddress(const IpAddress& address, const std::vector<IpAddress>& host_addresses,
                       std::string* why);

// Whether every address of prefix is internal (so a rule for it can only ever reach internal
// addresses); *why then describes its first address. A range that is internal only in part
// is not.
bool IsInternalPrefix(const IpPrefix& prefix, const std::vector<IpAddress>& host_addresses,
                      std::string* why);

// The addresses of this host's network interfaces (getifaddrs), sorted, without duplicates.
// An error rather than an empty list, so that a caller cannot silently treat none as internal.
[[nodiscard]] absl::StatusOr<std::vector<IpAddress>> HostAddresses();

}  // namespace airlock::net

#endif  // AIRLOCK_NET_ADDRESS_GUARD_H_
