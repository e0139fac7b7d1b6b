// Every request on a plaintext HTTP connection (port 80) must name the host the connection was
// allowed for, not only the first: on a kept-alive or pipelined connection a second request
// could otherwise reach any virtual host at the allowed address (a CDN edge serves anyone's).
//
// The gate sits between the guest and the server. Each request head is held until it is whole
// and checked (PeekHttpRequestHead: one Host, equal to the allowed name); its body is passed
// through as HTTP framing says (Content-Length or chunked, libhttp-parser), and the next head
// is held again. A request that asks to upgrade the connection (a WebSocket) is checked like
// any other; the bytes after it are held until the server answers: `101` makes the rest of the
// connection opaque (it is no longer HTTP), anything else keeps the gate reading requests.
// Every byte may come from a hostile guest; fuzzed with http_request_head.
#ifndef AIRLOCK_NET_HTTP_REQUEST_GATE_H_
#define AIRLOCK_NET_HTTP_REQUEST_GATE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace airlock::net {

class HttpRequestGate {
 public:
  // host: the name the connection was allowed for, as PeekHttpRequestHead reports hosts.
  explicit HttpRequestGate(std::string host);
  ~HttpRequestGate();
  HttpRequestGate(const HttpRequestGate&) = delete;
  HttpRequestGate& operator=(const HttpRequestGate&) = delete;

  // The guest's next bytes. Appends to *forward what may go to the server now (the rest is held
  // until it can be checked). PERMISSION_DENIED naming the host a request asked for, or
  // INVALID_ARGUMENT for bytes that are not HTTP/1.x requests: the connection must end, and
  // nothing more is forwarded (later calls fail the same way).
  absl::Status FromGuest(std::string_view data, std::string* forward);

  // The server's first bytes after a request that asked to upgrade (call with whatever it sends
  // while waiting_for_upgrade()). Appends the held guest bytes that may now go to the server.
  absl::Status FromServer(std::string_view data, std::string* forward);
  bool waiting_for_upgrade() const { return state_ == State::kUpgradeAsked; }

 private:
  enum class State { kHead, kBody, kUpgradeAsked, kOpaque, kFailed };
  absl::Status Run(std::string* forward);

  std::string host_;
  State state_ = State::kHead;
  std::string held_;          // guest bytes not yet forwarded
  std::string server_start_;  // the server's first bytes after an upgrade request
  absl::Status failure_;
  struct Parser;
  std::unique_ptr<Parser> parser_;
};

}  // namespace airlock::net

#endif  // AIRLOCK_NET_HTTP_REQUEST_GATE_H_
