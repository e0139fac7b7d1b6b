// airlockd's HTTP gateway: one TCP listener (airlockd --http-listen) through which guest ports
// are reached as URLs. For each connection it reads the first request's head (at most
// kMaxGatewayHeadBytes, within a deadline), routes it (gateway_request.h) and hands the
// connection to the backend, which admits it and relays its bytes, the head included and
// unchanged, to the guest's server, or answers it itself. After the route is decided nothing of
// the connection is interpreted: keep-alive requests, bodies and WebSocket frames pass as bytes
// both ways. With a certificate and key the listener speaks TLS (HTTP/1.1 over it, no ALPN
// upgrade to HTTP/2) and the backend sees the plaintext.
//
// Each connection has a thread of its own (and a second while TLS is pumped); at most
// max_connections at once, beyond which new ones are answered 503 at once. Thread-safe.
#ifndef AIRLOCK_GATEWAY_HTTP_GATEWAY_H_
#define AIRLOCK_GATEWAY_HTTP_GATEWAY_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/common/unique_fd.h"
#include "src/gateway/gateway_request.h"

namespace airlock::gateway {

// The client's side of one routed connection, as the backend sees it (plaintext). Read is
// called from one thread and Write from one other; Cut from any.
class GatewayConnection {
 public:
  GatewayConnection(UniqueFd fd, std::string peer, std::string buffered, bool tls);

  // What was read with the head (the head and whatever came after it); once.
  std::string TakeBuffered() { return std::move(buffered_); }
  // Up to max bytes from the client; 0 at its end (or once cut), -1 on an error.
  ssize_t Read(char* buf, size_t max);
  // All of bytes to the client; false if it is gone or the connection was cut.
  bool Write(absl::string_view bytes);
  // The client gets no more bytes (its read sees the end).
  void EndWrite();
  // No more bytes are read from the client (a blocked Read returns 0); writes go on.
  void StopReading();
  // Ends the connection both ways now: a blocked Read returns 0.
  void Cut();
  bool cut() const { return cut_; }
  // Whether any byte went to the client yet (after which no gateway answer can be sent).
  bool wrote() const { return wrote_; }
  // An answer of the gateway's own ("HTTP/1.1 CODE REASON", text, Connection: close), only
  // before any other byte went to the client. extra_headers: whole lines, each ending CRLF.
  bool Respond(int code, absl::string_view reason, absl::string_view text,
               absl::string_view extra_headers = {});
  // The same with a body of the given type, sent as it is (an API's JSON).
  bool RespondWith(int code, absl::string_view reason, absl::string_view content_type,
                   absl::string_view body, absl::string_view extra_headers = {});

  const std::string& peer() const { return peer_; }  // "ADDRESS:PORT"
  bool tls() const { return tls_; }
  // The fleet host whose gateway the client reached, when that host passed the connection to
  // this one (a session this host runs); empty for this host's own clients. Never passed on.
  const std::string& via() const { return via_; }
  void set_via(std::string host) { via_ = std::move(host); }

  // The request's body after its head (Content-Length only; at most max bytes):
  // INVALID_ARGUMENT for chunked bodies or a bad length, OUT_OF_RANGE past max, UNAVAILABLE if
  // the client went away first. Reads what TakeBuffered would give.
  [[nodiscard]] absl::StatusOr<std::string> ReadBody(const GatewayRequest& request, size_t max);

 private:
  UniqueFd fd_;
  std::string peer_;
  std::string buffered_;
  bool tls_;
  std::string via_;
  std::atomic<bool> cut_{false};
  std::atomic<bool> wrote_{false};
};

// A request's body as it arrives (Content-Length or chunked), for a body that is a stream (a
// Connect client stream): its pieces in order, each as soon as it is read.
class BodyReader {
 public:
  // connection and request must outlive this; nothing else reads the body.
  BodyReader(GatewayConnection& connection, const GatewayRequest& request);
  // The next bytes of the body (not empty), or nullopt at its end. INVALID_ARGUMENT for a
  // malformed body, UNAVAILABLE if the client went away before its end.
  [[nodiscard]] absl::StatusOr<std::optional<std::string>> Next();

 private:
  GatewayConnection& connection_;
  bool chunked_ = false;
  bool started_ = false, done_ = false;
  uint64_t left_ = 0;  // of a Content-Length body (none: 0)
  size_t head_bytes_ = 0;
  ChunkedDecoder decoder_;
  absl::Status error_;
};

// What airlockd does with a routed connection.
class GatewayBackend {
 public:
  virtual ~GatewayBackend() = default;
  // Admits and relays the connection, or answers it (connection.Respond), on the connection's
  // own thread; returns when it is over. request.session_id is set.
  virtual void Serve(const GatewayRequest& request, GatewayConnection& connection) = 0;
  // A request that names no session's port: an API the backend serves on the gateway (the
  // E2B-compatible one). False: not one of its paths (the gateway answers 404).
  virtual bool ServeApi(const GatewayRequest& request, GatewayConnection& connection) {
    return false;
  }
};

struct HttpGatewayOptions {
  std::string listen = "127.0.0.1:8790";  // HOST:PORT (IPv6 in brackets); port 0: any free one
  std::string domain = "airlock.localhost";
  // PEM files: both or neither. With them the gateway speaks HTTPS.
  std::string tls_cert_file, tls_key_file;
  uint32_t max_connections = 4096;
  absl::Duration head_timeout = absl::Seconds(30);
};

class HttpGateway {
 public:
  // Binds and starts serving. A listen address that is not loopback needs TLS.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HttpGateway>> Start(
      HttpGatewayOptions options, GatewayBackend* backend);
  // Stops accepting, cuts every connection and waits for their threads.
  ~HttpGateway();

  // "http://PORT-ID.DOMAIN:GATEWAY_PORT/" (https with TLS): an exposure's address.
  std::string ExposureUrl(uint16_t port, absl::string_view session_id) const;
  // "http://ADDRESS:PORT": for clients that route by header.
  std::string BaseUrl() const;
  uint16_t port() const { return port_; }
  const std::string& domain() const;

 private:
  struct Impl;
  explicit HttpGateway(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

// Whether "HOST:PORT" names a loopback address (127.0.0.0/8, ::1, localhost).
bool IsLoopbackListen(absl::string_view listen);

}  // namespace airlock::gateway

#endif  // AIRLOCK_GATEWAY_HTTP_GATEWAY_H_
