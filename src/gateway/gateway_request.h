// The head of the first request on a connection to airlockd's HTTP gateway, read far enough to
// route it: which session's guest port it is for, and the token that may admit it. Nothing
// else of the request is interpreted; once routed, the connection's bytes (this head included,
// unchanged) go to the guest's server.
//
// Every byte comes from whoever can reach the gateway. A head is at most kMaxGatewayHeadBytes;
// each call parses the buffer from the start, so once a prefix gives a result other than
// kNeedMore every longer prefix gives the same one. Accepted: "METHOD SP TARGET SP HTTP/1.0|1.1"
// and header lines "Name: value" (a token name, no folding, CRLF or LF endings), exactly one
// Host. The route is taken from
//   - the Host: "PORT-ID.DOMAIN[:port]" (case-insensitive; PORT 1..65535 without leading
//     zeros, ID a session id: 12 lowercase hex digits), for browsers; or else
//   - the headers X-Airlock-Session: ID and X-Airlock-Port: PORT, for clients that cannot use
//     a wildcard name (each at most once).
// A token may come as the query parameter airlock_token (origin-form targets), the header
// X-Airlock-Token, or cookies named airlock_token (every one is kept: a page of another
// exposure under the same domain may have set one of its own).
#ifndef AIRLOCK_GATEWAY_GATEWAY_REQUEST_H_
#define AIRLOCK_GATEWAY_GATEWAY_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace airlock::gateway {

inline constexpr size_t kMaxGatewayHeadBytes = 16 * 1024;
inline constexpr absl::string_view kTokenParameter = "airlock_token";
inline constexpr absl::string_view kTokenCookie = "airlock_token";

struct GatewayRequest {
  std::string method;  // as sent
  std::string target;  // the request-target as sent
  std::string host;    // the Host header as sent
  // The route; session_id empty when the request names none.
  std::string session_id;
  uint16_t port = 0;
  bool by_header = false;  // routed by X-Airlock-Session/-Port rather than by Host
  // The token of the query parameter, and the target without that parameter (where a browser
  // is sent back to once the token is in a cookie); query_token empty: none in the target.
  std::string query_token;
  std::string target_without_token;
  // Every other token the request carries: X-Airlock-Token first, then each cookie's.
  std::vector<std::string> tokens;
  bool websocket = false;  // Upgrade: websocket
  size_t head_bytes = 0;   // through the empty line
  // Every header as sent, its name in lower case (for the gateway's own API: X-API-KEY,
  // Content-Length...; routed connections pass them through unread).
  std::vector<std::pair<std::string, std::string>> headers;

  // The value of the first header of that (lower-case) name; nullptr if none.
  const std::string* Header(absl::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n == name) return &v;
    }
    return nullptr;
  }

  friend bool operator==(const GatewayRequest&, const GatewayRequest&) = default;
};

enum class GatewayParse {
  kNeedMore,   // a valid prefix of a head: call again with more bytes
  kDone,       // *request holds the head
  kMalformed,  // not a request head this gateway accepts; see *error
};

// bytes: everything the client has sent so far (bytes past kMaxGatewayHeadBytes are not looked
// at). domain: airlockd --http-domain, lower case (e.g. "airlock.localhost"). On kDone fills
// *request; otherwise resets it. On kMalformed sets *error to a message for the client.
[[nodiscard]] GatewayParse ParseGatewayRequest(absl::string_view bytes, absl::string_view domain,
                                               GatewayRequest* request, std::string* error);

// A chunked request body (Transfer-Encoding: chunked) from its first byte: the data of every
// chunk into *body, at most max bytes (more is kMalformed with that said in *error). Chunk
// extensions and trailers are read and dropped. Like ParseGatewayRequest, a pure function of
// the bytes so far: kNeedMore until the last chunk and the trailers' end.
[[nodiscard]] GatewayParse DecodeChunked(absl::string_view bytes, size_t max, std::string* body,
                                         std::string* error);

// A chunked request body decoded as its bytes arrive, for a body that is a stream (a client
// stream of Connect envelopes): what DecodeChunked reads, given piece by piece, and each
// chunk's data handed on as soon as it is in, whole or not.
class ChunkedDecoder {
 public:
  // Takes the next bytes of the body and appends the data they carry to *data: kNeedMore
  // until the last chunk and the trailers' end (kDone: bytes after it are not looked at),
  // kMalformed with *error for what DecodeChunked refuses (a size line over 1 KiB, a size not
  // hexadecimal or over 8 digits, a chunk not ending with CRLF, a trailer line over
  // kMaxGatewayHeadBytes). It holds at most one size line or trailer line of undecoded bytes.
  [[nodiscard]] GatewayParse Add(absl::string_view bytes, std::string* data, std::string* error);

 private:
  enum class State { kSize, kData, kDataEnd, kTrailers, kDone, kMalformed };
  State state_ = State::kSize;
  std::string pending_;  // bytes not decoded yet
  size_t left_ = 0;      // of the chunk being read
};

// The host name of an exposure: "PORT-ID.DOMAIN".
std::string ExposureHost(uint16_t port, absl::string_view session_id, absl::string_view domain);

}  // namespace airlock::gateway

#endif  // AIRLOCK_GATEWAY_GATEWAY_REQUEST_H_
