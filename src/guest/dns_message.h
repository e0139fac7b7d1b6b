// DNS messages (RFC 1035, EDNS from RFC 6891) for the agent's resolver on 127.0.0.1:53: the
// parser of the queries that the guest's programs send, and the builder of the answers.
//
// Runs inside the guest, so it depends on nothing but the C++ standard library. Every query
// may come from a hostile program: the parser checks each length and count before it reads,
// follows a compression pointer only strictly backwards and at most a fixed number of times,
// and caps a name at 255 wire bytes, so it reads nothing outside the packet and does bounded
// work. The builder never writes more than the client can take over its transport.
//
// Not supported, by design: zone transfers, updates, DNSSEC, EDNS options (a client's cookie or
// padding is read past and not echoed), and any opcode but QUERY.
#ifndef AIRLOCK_GUEST_DNS_MESSAGE_H_
#define AIRLOCK_GUEST_DNS_MESSAGE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::guest {

inline constexpr size_t kDnsHeaderSize = 12;
// A name's wire form (length bytes, labels and the final zero) is at most this long.
inline constexpr size_t kDnsMaxNameWireBytes = 255;
inline constexpr size_t kDnsMaxLabelBytes = 63;
// The largest message either transport can carry (TCP's u16 length prefix).
inline constexpr size_t kDnsMaxMessage = 65535;
// A UDP reply is at most this long without EDNS (RFC 1035 4.2.1)...
inline constexpr size_t kDnsMaxUdpWithoutEdns = 512;
// ...and at most the client's EDNS size but never more than this (the DNS flag day 2020
// value, which avoids IP fragmentation). It is also the size the agent advertises.
inline constexpr size_t kDnsMaxUdpWithEdns = 1232;

inline constexpr uint16_t kDnsTypeA = 1;
inline constexpr uint16_t kDnsTypeSoa = 6;
inline constexpr uint16_t kDnsTypeAaaa = 28;
inline constexpr uint16_t kDnsTypeOpt = 41;
inline constexpr uint16_t kDnsClassIn = 1;

// The one question of a query, with what the reply depends on.
struct DnsQuestion {
  uint16_t id = 0;
  bool recursion_desired = false;
  // Dotted, without a trailing dot, "" for the root; ASCII upper case folded to lower case.
  // Labels may hold any bytes but '.' and NUL (not only hostname characters), so whoever
  // decides on the name must not assume more.
  std::string name;
  // The same name with the case the client sent, which the reply's question echoes: clients
  // that randomise case (DNS 0x20) drop a reply that does not match. Used only when it equals
  // `name` but for ASCII case; otherwise the reply echoes `name`.
  std::string name_as_sent;
  uint16_t qtype = kDnsTypeA;
  uint16_t qclass = kDnsClassIn;
  bool has_edns = false;       // the query had an OPT record
  uint16_t edns_udp_size = 0;  // the client's advertised UDP size, as sent (may be < 512)
  uint8_t edns_version = 0;    // a version above 0 is answered kBadVers (RFC 6891 6.1.3)
};

enum class DnsParse {
  kOk,
  // Not a well-formed query. Answer BuildDnsError(packet, DnsRcode::kFormErr).
  kMalformed,
  // A response, or an opcode other than QUERY. Answer BuildDnsError(packet, DnsRcode::kNotImp),
  // which is empty (send nothing) for a response.
  kNotQuery,
};

// Parses one query from a UDP datagram or one TCP message (without its length prefix). Fills *q
// only on kOk; otherwise *error says what was wrong. A query must have QR 0, opcode QUERY,
// exactly one question, no answer or authority records, at most a few additional ones (of
// which at most one OPT, with the root name), and nothing after its last record.
[[nodiscard]] DnsParse ParseDnsQuery(std::string_view packet, DnsQuestion* q, std::string* error);

enum class DnsRcode : uint8_t {
  kNoError = 0,
  kFormErr = 1,
  kServFail = 2,
  kNxDomain = 3,
  kNotImp = 4,
  kRefused = 5,
  // Extended (RFC 6891): only expressible when the query had an OPT record; without one, a
  // reply carries kServFail instead.
  kBadVers = 16,
};

enum class DnsTransport { kUdp, kTcp };

// Builds the reply to q: the header (id and RD copied, QR and RA set, AA clear), q's question,
// and then:
//  - with kNoError, an A record for each of a_records, owned by q's name, with ttl;
//  - with kNxDomain, or kNoError and no a_records (NODATA: the name exists, not this type), an
//    SOA record in the authority section so that resolvers cache the negative answer for
//    negative_ttl seconds (its TTL and MINIMUM). Its owner is the parent of q's name (the root
//    for a single label), a zone that q's name lies in as RFC 2308 resolvers expect; its
//    server and mailbox names are under airlock.internal;
//  - an OPT record, if the query had one.
// Other rcodes carry only the question. Over UDP the reply is at most 512 bytes without EDNS,
// or the client's EDNS size clamped to [512, 1232]; over TCP at most 65535. A records that do
// not fit are left out, whole, and TC is set so that the client retries over TCP. TTLs above
// 2^31 - 1 are clamped (RFC 2181 8).
//
// q.name must be one that ParseDnsQuery could produce; otherwise (a caller's bug) the reply is
// a header-only kServFail.
std::string BuildDnsResponse(const DnsQuestion& q, DnsRcode rcode,
                             const std::vector<std::array<uint8_t, 4>>& a_records, uint32_t ttl,
                             uint32_t negative_ttl, DnsTransport transport = DnsTransport::kUdp);

// The reply to a packet that ParseDnsQuery refused: a header with the packet's id, opcode and RD,
// QR and RA set, no records, and rcode (kFormErr or kNotImp). Empty, meaning send nothing, if the
// packet is shorter than a header or is itself a response (QR set): answering a response could
// start a loop between two servers.
std::string BuildDnsError(std::string_view packet, DnsRcode rcode);

// Any DNS message, decoded as far as the tests and the fuzz target need to check what
// BuildDnsResponse and BuildDnsError write. Names are dotted with their case as sent;
// compressed names are expanded.
struct DnsRecord {
  std::string name;
  uint16_t type = 0;
  uint16_t rclass = 0;
  uint32_t ttl = 0;
  std::string rdata;  // as on the wire; names inside it are not expanded
};
struct DnsMessage {
  struct Question {
    std::string name;
    uint16_t qtype = 0;
    uint16_t qclass = 0;
  };
  uint16_t id = 0;
  uint16_t flags = 0;  // header bytes 2-3: QR, opcode, AA, TC, RD, RA, Z, AD, CD, rcode
  std::vector<Question> questions;
  std::vector<DnsRecord> answers;
  std::vector<DnsRecord> authority;
  std::vector<DnsRecord> additional;
};
// Flag bits of DnsMessage::flags.
inline constexpr uint16_t kDnsFlagQr = 0x8000;
inline constexpr uint16_t kDnsFlagAa = 0x0400;
inline constexpr uint16_t kDnsFlagTc = 0x0200;
inline constexpr uint16_t kDnsFlagRd = 0x0100;
inline constexpr uint16_t kDnsFlagRa = 0x0080;
inline constexpr int DnsOpcode(uint16_t flags) { return (flags >> 11) & 0xf; }
inline constexpr int DnsHeaderRcode(uint16_t flags) { return flags & 0xf; }

// Decodes a whole message with the same checks on names as ParseDnsQuery, and no further
// rules on its sections. Returns false with *error on malformed bytes or anything after the
// last record. Its output can be a few times larger than the packet (expanded names), so the
// agent parses queries with ParseDnsQuery, which caps the record counts first.
[[nodiscard]] bool ParseDnsMessage(std::string_view packet, DnsMessage* message,
                                   std::string* error);

// DNS over TCP (RFC 1035 4.2.2, RFC 7766): each message is preceded by its length, u16
// big-endian. Returns the prefix and the message; empty if the message is over 65535 bytes
// (BuildDnsResponse never makes one).
std::string FrameDnsTcpMessage(std::string_view message);

// Splits a DNS-over-TCP byte stream into messages. Holds at most one message (65535 bytes), so
// a client cannot make it buffer more. Not thread-safe.
class DnsTcpSplitter {
 public:
  // Takes bytes from the front of *input until a message is complete (true, *message is its
  // bytes without the prefix, possibly empty) or *input is used up (false, keep what it holds).
  bool Next(std::string_view* input, std::string* message);

 private:
  uint8_t prefix_[2] = {};
  size_t prefix_have_ = 0;
  std::string message_;
};

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_DNS_MESSAGE_H_
