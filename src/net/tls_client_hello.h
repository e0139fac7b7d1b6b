// Reads the server name (SNI) and ALPN list out of a TLS ClientHello, as the egress proxy sees it
// arrive from a guest on port 443, so the proxy can check that the guest talks to the name it was
// allowed before it relays a byte.
//
// Every byte may come from a hostile guest. The parser is a pure function of the bytes it is
// given: each call re-reads the buffer from the start, looks at no more than kMaxClientHelloBytes
// of it, checks every length against what encloses it before using it, and copies nothing it has
// not bounded. It decides from the bytes in order, so once a prefix of a connection's bytes gives
// a result other than kNeedMore, every longer prefix gives the same result, info and error.
//
// Accepted wire format (RFC 8446 section 5.1, 4.1.2; RFC 6066 section 3; RFC 7301):
//   records    u8 type 22 (handshake), u16 version 0x0301..0x0304, u16 length 1..2^14, fragment;
//              the handshake message may be split over any number of consecutive handshake
//              records, and no other record type may come before it is complete
//   handshake  u8 type 1 (ClientHello), u24 length, body
//   body       u16 legacy_version (0x03xx), 32 bytes random, u8-length session id (<= 32),
//              u16-length cipher suites (even, >= 2), u8-length compression methods (>= 1),
//              then nothing, or a u16-length extension list that ends exactly where the body does
//   extension  u16 type, u16-length data; no type twice
//     0 server_name  u16-length list holding exactly one entry: u8 type 0 (host_name),
//                    u16-length name of 1..255 printable ASCII bytes (0x21..0x7e)
//     16 ALPN        u16-length list (non-empty) of u8-length protocol names (each non-empty)
//     0xfe0d encrypted_client_hello (ECH): only noted (its contents are not read)
// Bytes after the ClientHello (the rest of its record, later records) are not looked at.
#ifndef AIRLOCK_NET_TLS_CLIENT_HELLO_H_
#define AIRLOCK_NET_TLS_CLIENT_HELLO_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace airlock::net {

// The proxy buffers at most this many bytes of a connection while it waits for the ClientHello.
// A ClientHello that is not complete within them is refused ("ClientHello larger than 32 KiB").
inline constexpr size_t kMaxClientHelloBytes = 32 * 1024;
// RFC 6066: a HostName is at most 255 bytes.
inline constexpr size_t kMaxServerNameBytes = 255;

struct ClientHelloInfo {
  // The host_name of the server_name extension, ASCII lower-cased; empty if the extension is
  // absent. Returned as sent otherwise (an IP literal, a trailing dot): matching it against the
  // allowed name is the caller's business.
  std::string sni;
  // The protocol names of the ALPN extension, in the client's order, as raw bytes; empty if the
  // extension is absent.
  std::vector<std::string> alpn;
  // The ClientHello offers Encrypted Client Hello: the server it names (sni) may be only the
  // public name of a front that serves many (real ECH and the "GREASE" some clients send to
  // every server look the same, by design).
  bool encrypted_client_hello = false;

  friend bool operator==(const ClientHelloInfo&, const ClientHelloInfo&) = default;
};

enum class PeekResult {
  kNeedMore,   // a valid prefix of a ClientHello: call again when more bytes have arrived
  kDone,       // *info holds the complete ClientHello's SNI and ALPN
  kNotTls,     // the connection does not start with a TLS handshake record (e.g. plain HTTP)
  kMalformed,  // a TLS handshake record, but not a ClientHello this parser accepts; see *error
};

// Parses the start of a connection. bytes: everything the guest has sent so far on it (bytes
// past kMaxClientHelloBytes are not looked at). On kDone fills *info; on any other result resets
// it. On kNotTls and kMalformed sets *error (if not null) to a message for the user; otherwise
// clears it.
[[nodiscard]] PeekResult PeekClientHello(std::span<const uint8_t> bytes, ClientHelloInfo* info,
                                         std::string* error);

}  // namespace airlock::net

#endif  // AIRLOCK_NET_TLS_CLIENT_HELLO_H_
