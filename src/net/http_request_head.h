// Reads the method, target and host of the first request on a plaintext HTTP/1.x connection, as
// the egress proxy sees it arrive from a guest on port 80, so the proxy can check that the guest
// talks to the name it was allowed before it relays a byte.
//
// Every byte may come from a hostile guest. The request line and headers are parsed by
// libhttp-parser, never given more than kMaxRequestHeadBytes; each call parses the buffer from
// the start, so the result is a pure function of the bytes: once a prefix of a connection's
// bytes gives a result other than kNeedMore, every longer prefix gives the same result, head and
// error. Only the first request's head is read; its body and any pipelined requests after it are
// not looked at (HttpRequestGate, http_request_gate.h, checks each later request's head).
//
// A head is accepted when it is HTTP/1.0 or 1.1 with a method other than CONNECT and:
//   - the request-target is origin-form ("/path"), asterisk-form ("*") or absolute-form
//     ("http://authority/path" or https; no user info);
//   - it has exactly one Host header (HTTP/1.0 in absolute-form may have none: the target's
//     authority is the host); with an absolute-form target, the Host names the same host;
//   - each authority is a host name of letters, digits, '-', '.' and '_', an IPv4 address, or an
//     IPv6 address in brackets, optionally followed by ":port" (1..65535).
#ifndef AIRLOCK_NET_HTTP_REQUEST_HEAD_H_
#define AIRLOCK_NET_HTTP_REQUEST_HEAD_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace airlock::net {

// The proxy buffers at most this many bytes of a connection while it waits for the request head.
// A head (request line and headers, through the empty line) longer than this is refused.
inline constexpr size_t kMaxRequestHeadBytes = 16 * 1024;

struct HttpRequestHead {
  std::string method;  // as on the wire: "GET"
  // The host to check against the allowed name: ASCII lower-cased, port stripped, an IPv6
  // address without its brackets. From the Host header, or the absolute-form target's authority.
  std::string host;
  std::string target;  // the request-target as sent

  friend bool operator==(const HttpRequestHead&, const HttpRequestHead&) = default;
};

enum class HeadResult {
  kNeedMore,   // a valid prefix of a request head: call again when more bytes have arrived
  kDone,       // the head is complete and *head holds it
  kMalformed,  // not an HTTP/1.x request head this parser accepts; see *error
};

// Parses the start of a connection. bytes: everything the guest has sent so far on it (bytes past
// kMaxRequestHeadBytes are not looked at). On kDone fills *head; otherwise resets it. On
// kMalformed sets *error (if not null) to a message for the user; otherwise clears it.
[[nodiscard]] HeadResult PeekHttpRequestHead(std::span<const uint8_t> bytes, HttpRequestHead* head,
                                             std::string* error);

}  // namespace airlock::net

#endif  // AIRLOCK_NET_HTTP_REQUEST_HEAD_H_
