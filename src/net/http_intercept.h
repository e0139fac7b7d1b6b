// The HTTP/1.x layer of an intercepted connection: the egress proxy has terminated the guest's TLS
// (a per-session CA) for a host that has secrets bound to it, and this class sits between the
// plaintext it reads from the guest and the plaintext it writes to the real server.
//
// Toward the server it swaps each bound secret's placeholder for the real value in request
// headers (and, for `Authorization: Basic`, inside the decoded credentials), and in the body only
// when the binding opts in (the body is then buffered, de-chunked and sent with a recomputed
// Content-Length). Toward the guest it replaces the real value (and the Basic form it built, and
// the value's hex, base64 and URL encodings) with the placeholder in response headers and bodies,
// so a server that echoes the secret does not leak it; a response whose length changes is
// re-framed as chunked (HTTP/1.1) or ends with the connection (HTTP/1.0). A request that carries
// a value loses its Range and If-Range fields: a partial response could hold a slice of it.
//
// Every byte from the guest is hostile. Requests are parsed strictly, because a framing the proxy
// and the server read differently would let a second request (with a placeholder swapped in)
// ride inside the body of the first: no obs-fold, CRLF line ends only, header lines and heads
// under caps, one Host equal to the intercepted name (no domain fronting), Content-Length values
// that agree, Transfer-Encoding only as "chunked" alone and never with Content-Length, no CONNECT
// and no protocol upgrades. A request that breaks a rule gets an HTTP error response written to
// the guest and the connection ends (the call returns the error).
//
// Responses come from the real server, but are parsed with the same caps. `Accept-Encoding` is
// forced to identity on the way up, and a response that is compressed anyway ends in a 502: its
// bytes could hide the secret from the mask.
//
// The placeholders of the session's other secrets (not bound to this host) pass unchanged and are
// reported as warnings. Not thread-safe: one instance per connection, driven by one thread.
#ifndef AIRLOCK_NET_HTTP_INTERCEPT_H_
#define AIRLOCK_NET_HTTP_INTERCEPT_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "src/common/wipe.h"

namespace airlock::net {

// Caps on what the interceptor holds for one connection.
inline constexpr size_t kMaxHttpHeadBytes = 64 * 1024;
inline constexpr size_t kMaxHttpLineBytes = 8 * 1024;
inline constexpr size_t kMaxHttpHeaders = 256;
// A body that a binding lets the secret into is buffered whole, up to this.
inline constexpr size_t kMaxSubstitutedBodyBytes = 8 * 1024 * 1024;

struct InterceptedSecret {
  std::string name;                  // as the user named it: OPENAI_API_KEY
  std::string placeholder;           // what the guest holds
  std::string value;                 // the real secret; empty for a secret not bound to this host
  bool body = false;                 // the binding lets the value into request bodies
  std::vector<std::string> headers;  // and into these request headers (lower case) only
};

// Something the interceptor did or saw that the session's network log records.
struct InterceptEvent {
  std::string secret;  // its name
  bool used = false;   // true: the value was sent; false: a warning (placeholder left as is)
  std::string where;   // "header Authorization", "body", or why it was left alone
};

class HttpIntercept {
 public:
  // host: the intercepted name (the SNI the guest sent, checked by the proxy), lower case.
  // port: the port the guest connected to (a Host header may name it). secrets: those bound to
  // this host (with values) and the session's others (without: warnings only).
  HttpIntercept(std::string host, uint16_t port, std::vector<InterceptedSecret> secrets);
  // Wipes its copies of the values (and the forms of them it masks) and what it buffered.
  ~HttpIntercept();
  HttpIntercept(const HttpIntercept&) = delete;
  HttpIntercept& operator=(const HttpIntercept&) = delete;

  // Plaintext from the guest. Appends what goes to the server to *upstream, and what the
  // interceptor answers the guest itself (a 100 Continue, an error response) to *guest. An error:
  // the request was refused (*guest holds the response); end the connection after sending it.
  [[nodiscard]] absl::Status FromGuest(absl::string_view bytes, std::string* upstream,
                                       std::string* guest);
  // Plaintext from the server. Appends what goes to the guest. An error: the response could not
  // be read safely; *guest may hold a 502 (when nothing of that response was sent yet). End the
  // connection after sending it.
  [[nodiscard]] absl::Status FromUpstream(absl::string_view bytes, std::string* guest);
  // The server closed its side. Appends the rest of a response that ends with the connection.
  // An error: a response was cut short (the guest's connection should be reset, not ended).
  [[nodiscard]] absl::Status UpstreamEnded(std::string* guest);

  // The connection to the server failed (its certificate did not verify, say): appends a 502
  // that says why, unless part of a response went to the guest already.
  void FailUpstream(absl::string_view reason, std::string* guest);

  // What happened since the last call.
  std::vector<InterceptEvent> TakeEvents();

  // Whether the guest's side is between requests (nothing buffered, no body in progress).
  bool GuestIdle() const;

 private:
  enum class Body { kNone, kLength, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kToClose };
  struct Replacement {
    std::string from, to, secret;
  };
  // A stream of body bytes passes through, with a tail held back so a pattern split between two
  // reads is still found.
  class Masker {
   public:
    ~Masker() { Wipe(held_); }
    void Reset(const std::vector<Replacement>* table) {
      table_ = table;
      held_.clear();
    }
    // Appends the masked bytes that are final; holds back a possible pattern start.
    void Add(absl::string_view in, std::string* out, std::vector<std::string>* hits) {
      held_.append(in.data(), in.size());
      Scan(false, out, hits);
    }
    // The stream ended: appends what was held back.
    void Finish(std::string* out, std::vector<std::string>* hits) { Scan(true, out, hits); }

   private:
    void Scan(bool final, std::string* out, std::vector<std::string>* hits);
    const std::vector<Replacement>* table_ = nullptr;
    std::string held_;
  };
  struct Framing {
    Body body = Body::kNone;
    uint64_t remaining = 0;
  };

  absl::Status Refuse(int code, absl::string_view reason, std::string* guest);
  absl::Status GuestHead(absl::string_view head, std::string* upstream, std::string* guest);
  absl::Status GuestBody(std::string* upstream, std::string* guest);
  absl::Status FinishBufferedBody(std::string* upstream);
  absl::Status UpstreamHead(absl::string_view head, std::string* guest);
  absl::Status UpstreamBody(std::string* guest);
  absl::Status BadResponse(absl::string_view reason, std::string* guest);
  std::string Mask(absl::string_view text, std::vector<std::string>* hits) const;
  void ReportMasked(const std::vector<std::string>& hits);
  void ReportRangeDropped(const std::string& secret);
  std::string SubstituteHeader(absl::string_view name, absl::string_view value);
  void WarnOtherPlaceholders(absl::string_view bytes, absl::string_view where);

  const std::string host_;
  const uint16_t port_;
  std::vector<InterceptedSecret> secrets_;
  std::vector<InterceptEvent> events_;

  // Guest side.
  std::string guest_in_;
  Framing request_;
  bool buffering_ = false;   // the current request's body is collected for substitution
  std::string held_head_;    // its head, sent when the body is complete
  std::string body_buffer_;  // its de-chunked body
  std::string warn_tail_;    // the end of the last body bytes, to find a split placeholder
  bool guest_failed_ = false;

  // Server side.
  struct Pending {
    bool head_method = false;  // HEAD: the response has no body
  };
  std::deque<Pending> pending_;
  std::string upstream_in_;
  Framing response_;
  bool rechunk_ = false;           // the response's body is sent as chunks of masked bytes
  bool started_response_ = false;  // part of the current response went to the guest
  std::string trailers_;           // of a chunked response, masked
  bool upstream_failed_ = false;
  std::vector<Replacement> mask_;  // real value -> placeholder, and the Basic forms built
  Masker masker_;
};

}  // namespace airlock::net

#endif  // AIRLOCK_NET_HTTP_INTERCEPT_H_
