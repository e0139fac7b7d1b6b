#include "src/gateway/http_gateway.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/errno_status.h"
#include "src/common/log.h"

namespace airlock::gateway {
namespace {

struct SslFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

// HOST:PORT, the host bare or an IPv6 address in brackets.
absl::Status SplitListen(absl::string_view listen, std::string* host, std::string* port) {
  size_t colon = listen.rfind(':');
  if (colon == absl::string_view::npos || colon + 1 == listen.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http-listen \"", listen, "\" is not HOST:PORT (e.g. 127.0.0.1:8790, [::1]:8790)"));
  }
  absl::string_view h = listen.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  *host = std::string(h);
  *port = std::string(listen.substr(colon + 1));
  return absl::OkStatus();
}

std::string PeerName(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    return absl::StrCat(host, ":", port);
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
  inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
  port = ntohs(in6->sin6_port);
  return absl::StrCat("[", host, "]:", port);
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "no detail";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// Moves bytes between a TLS connection (ssl over raw) and a plaintext socket until both
// directions ended or either side failed. Both sockets non-blocking.
void PumpTls(SSL* ssl, int raw, int plain) {
  constexpr size_t kCap = 64 * 1024;
  std::string to_plain, to_tls;
  size_t write_len = 0;  // the length of an SSL_write to retry with (OpenSSL wants the same)
  bool tls_ended = false, plain_ended = false, plain_shut = false, tls_shut = false;
  for (;;) {
    while (!tls_ended && to_plain.size() < kCap) {
      char buf[16384];
      int n = SSL_read(ssl, buf, sizeof buf);
      if (n > 0) {
        to_plain.append(buf, static_cast<size_t>(n));
        continue;
      }
      int e = SSL_get_error(ssl, n);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) break;
      tls_ended = true;  // a close_notify, the client's end of the socket, or a broken record
      if (e != SSL_ERROR_ZERO_RETURN && e != SSL_ERROR_SYSCALL) return;
    }
    while (!to_plain.empty()) {
      ssize_t n = send(plain, to_plain.data(), to_plain.size(), MSG_NOSIGNAL);
      if (n > 0) {
        to_plain.erase(0, static_cast<size_t>(n));
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        break;
      } else {
        return;
      }
    }
    if (tls_ended && to_plain.empty() && !plain_shut) {
      shutdown(plain, SHUT_WR);
      plain_shut = true;
    }
    while (!plain_ended && to_tls.size() < kCap) {
      char buf[16384];
      ssize_t n = recv(plain, buf, sizeof buf, 0);
      if (n > 0) {
        to_tls.append(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        plain_ended = true;
      } else if (errno == EAGAIN || errno == EINTR) {
        break;
      } else {
        return;
      }
    }
    while (!to_tls.empty()) {
      if (write_len == 0) write_len = std::min<size_t>(to_tls.size(), 16384);
      int n = SSL_write(ssl, to_tls.data(), static_cast<int>(write_len));
      if (n > 0) {
        to_tls.erase(0, static_cast<size_t>(n));
        write_len = 0;
        continue;
      }
      int e = SSL_get_error(ssl, n);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) break;
      return;
    }
    if (plain_ended && to_tls.empty() && !tls_shut) {
      SSL_shutdown(ssl);
      shutdown(raw, SHUT_WR);
      tls_shut = true;
    }
    // The backend's side ended and all of it went out: done (a client that keeps its side
    // open has nothing more to say to anyone).
    if (tls_shut) return;
    if (!tls_ended && to_plain.size() < kCap && SSL_pending(ssl) > 0) continue;
    pollfd fds[2] = {{.fd = raw, .events = 0, .revents = 0},
                     {.fd = plain, .events = 0, .revents = 0}};
    if (!tls_ended && to_plain.size() < kCap) fds[0].events |= POLLIN;
    if (!to_tls.empty()) fds[0].events |= POLLOUT | POLLIN;  // a write may wait for a read
    if (!plain_ended && to_tls.size() < kCap) fds[1].events |= POLLIN;
    if (!to_plain.empty()) fds[1].events |= POLLOUT;
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    // An end without the events asked for (a hang-up) is found by the reads above.
  }
}

}  // namespace

GatewayConnection::GatewayConnection(UniqueFd fd, std::string peer, std::string buffered, bool tls)
    : fd_(std::move(fd)), peer_(std::move(peer)), buffered_(std::move(buffered)), tls_(tls) {}

ssize_t GatewayConnection::Read(char* buf, size_t max) {
  for (;;) {
    if (cut_) return 0;
    ssize_t n = recv(fd_.get(), buf, max, 0);
    if (n >= 0) return cut_ ? 0 : n;
    if (errno == EINTR) continue;
    return cut_ ? 0 : -1;
  }
}

bool GatewayConnection::Write(absl::string_view bytes) {
  while (!bytes.empty()) {
    if (cut_) return false;
    ssize_t n = send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    wrote_ = true;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void GatewayConnection::EndWrite() { shutdown(fd_.get(), SHUT_WR); }

void GatewayConnection::StopReading() { shutdown(fd_.get(), SHUT_RD); }

void GatewayConnection::Cut() {
  cut_ = true;
  shutdown(fd_.get(), SHUT_RDWR);
}

absl::StatusOr<std::string> GatewayConnection::ReadBody(const GatewayRequest& request, size_t max) {
  if (const std::string* coding = request.Header("transfer-encoding"); coding != nullptr) {
    if (!absl::EqualsIgnoreCase(*coding, "chunked")) {
      return absl::InvalidArgumentError("a body's Transfer-Encoding may only be chunked");
    }
    std::string raw = TakeBuffered();
    raw.erase(0, std::min(raw.size(), request.head_bytes));
    for (;;) {
      std::string body, error;
      GatewayParse parsed = DecodeChunked(raw, max, &body, &error);
      if (parsed == GatewayParse::kDone) return body;
      if (parsed == GatewayParse::kMalformed) {
        return absl::StrContains(error, "larger than") ? absl::OutOfRangeError(error)
                                                       : absl::InvalidArgumentError(error);
      }
      char buf[16384];
      ssize_t n = Read(buf, sizeof buf);
      if (n <= 0) return absl::UnavailableError("the client went away before its body ended");
      raw.append(buf, static_cast<size_t>(n));
      if (raw.size() > 2 * max + kMaxGatewayHeadBytes) {
        return absl::OutOfRangeError(absl::StrCat("the body is larger than ", max, " bytes"));
      }
    }
  }
  uint64_t length = 0;
  if (const std::string* given = request.Header("content-length");
      given != nullptr && (!absl::SimpleAtoi(*given, &length) || given->empty() ||
                           given->find_first_not_of("0123456789") != std::string::npos)) {
    return absl::InvalidArgumentError("Content-Length is not a number");
  }
  if (length > max) {
    return absl::OutOfRangeError(absl::StrCat("the body is larger than ", max, " bytes"));
  }
  std::string body = TakeBuffered();
  body.erase(0, std::min(body.size(), request.head_bytes));
  while (body.size() < length) {
    char buf[16384];
    ssize_t n = Read(buf, std::min<size_t>(sizeof buf, length - body.size()));
    if (n <= 0) return absl::UnavailableError("the client went away before its body ended");
    body.append(buf, static_cast<size_t>(n));
  }
  body.resize(length);  // a pipelined request after it is not read
  return body;
}

BodyReader::BodyReader(GatewayConnection& connection, const GatewayRequest& request)
    : connection_(connection) {
  if (const std::string* coding = request.Header("transfer-encoding"); coding != nullptr) {
    if (!absl::EqualsIgnoreCase(*coding, "chunked")) {
      error_ = absl::InvalidArgumentError("a body's Transfer-Encoding may only be chunked");
    }
    chunked_ = true;
  } else if (const std::string* given = request.Header("content-length"); given != nullptr) {
    if (given->empty() || given->find_first_not_of("0123456789") != std::string::npos ||
        !absl::SimpleAtoi(*given, &left_)) {
      error_ = absl::InvalidArgumentError("Content-Length is not a number");
    }
  }
  head_bytes_ = request.head_bytes;
}

absl::StatusOr<std::optional<std::string>> BodyReader::Next() {
  if (!error_.ok()) return error_;
  for (;;) {
    if (done_ || (!chunked_ && started_ && left_ == 0)) return std::nullopt;
    std::string raw;
    if (!started_) {
      started_ = true;
      raw = connection_.TakeBuffered();
      raw.erase(0, std::min(raw.size(), head_bytes_));
    } else {
      char buf[16384];
      size_t want =
          chunked_ ? sizeof buf : static_cast<size_t>(std::min<uint64_t>(sizeof buf, left_));
      ssize_t n = connection_.Read(buf, want);
      if (n <= 0) {
        return error_ = absl::UnavailableError("the client went away before its body ended");
      }
      raw.assign(buf, static_cast<size_t>(n));
    }
    if (!chunked_) {
      if (raw.size() > left_) raw.resize(left_);  // a pipelined request after it is not read
      left_ -= raw.size();
      if (!raw.empty()) return raw;
      continue;
    }
    std::string data, why;
    GatewayParse parsed = decoder_.Add(raw, &data, &why);
    if (parsed == GatewayParse::kMalformed) return error_ = absl::InvalidArgumentError(why);
    if (parsed == GatewayParse::kDone) done_ = true;
    if (!data.empty()) return data;
  }
}

bool GatewayConnection::Respond(int code, absl::string_view reason, absl::string_view text,
                                absl::string_view extra_headers) {
  return RespondWith(code, reason, "text/plain; charset=utf-8", absl::StrCat(text, "\n"),
                     extra_headers);
}

bool GatewayConnection::RespondWith(int code, absl::string_view reason,
                                    absl::string_view content_type, absl::string_view body,
                                    absl::string_view extra_headers) {
  if (wrote_) return false;
  return Write(absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", content_type,
                            "\r\nContent-Length: ", body.size(),
                            "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n",
                            extra_headers, "Connection: close\r\n\r\n", body));
}

bool IsLoopbackListen(absl::string_view listen) {
  std::string host, port;
  if (!SplitListen(listen, &host, &port).ok()) return false;
  if (host == "localhost") return true;
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

struct HttpGateway::Impl {
  HttpGatewayOptions options;
  GatewayBackend* backend = nullptr;
  UniqueFd listener;
  UniqueFd wake;  // an eventfd: the accept loop stops
  std::unique_ptr<SSL_CTX, SslFree> tls;
  std::string base_host;  // as bound, for BaseUrl
  std::thread acceptor;
  std::weak_ptr<Impl> self;

  absl::Mutex mu;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  uint64_t next_id ABSL_GUARDED_BY(mu) = 0;
  std::map<uint64_t, int> sockets ABSL_GUARDED_BY(mu);  // open client sockets, to cut at stop

  void AcceptLoop();
  void Serve(UniqueFd client, std::string peer);
  // The plaintext side of a TLS client (a socketpair end, pumped by a thread of its own), or
  // an empty fd if the handshake failed.
  UniqueFd TerminateTls(int raw, std::thread* pump);
  void Finish(uint64_t id) {
    absl::MutexLock lock(&mu);
    sockets.erase(id);
  }
};

absl::StatusOr<std::unique_ptr<HttpGateway>> HttpGateway::Start(HttpGatewayOptions options,
                                                                GatewayBackend* backend) {
  auto impl = std::make_shared<Impl>();
  std::string host, port;
  if (absl::Status s = SplitListen(options.listen, &host, &port); !s.ok()) return s;
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--http-tls-cert and --http-tls-key go together");
  }
  if (options.tls_cert_file.empty() && !IsLoopbackListen(options.listen)) {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing to serve the HTTP gateway on ", options.listen,
                     " without TLS: give --http-tls-cert and --http-tls-key (a certificate for *.",
                     options.domain, "), or listen on loopback (127.0.0.1:PORT)"));
  }
  if (!options.tls_cert_file.empty()) {
    impl->tls.reset(SSL_CTX_new(TLS_server_method()));
    if (!impl->tls) return absl::InternalError("SSL_CTX_new failed");
    SSL_CTX_set_min_proto_version(impl->tls.get(), TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(impl->tls.get(), options.tls_cert_file.c_str()) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("--http-tls-cert ", options.tls_cert_file,
                                                     ": not a PEM certificate chain (",
                                                     OpenSslError(), ")"));
    }
    if (SSL_CTX_use_PrivateKey_file(impl->tls.get(), options.tls_key_file.c_str(),
                                    SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(impl->tls.get()) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--http-tls-key ", options.tls_key_file,
                       ": not the PEM private key of the certificate (", OpenSslError(), ")"));
    }
    SSL_CTX_set_mode(impl->tls.get(),
                     SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-listen ", options.listen, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, freeaddrinfo);
  impl->listener = UniqueFd(socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!impl->listener.valid()) return ErrnoStatus("socket", options.listen);
  int one = 1;
  setsockopt(impl->listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(impl->listener.get(), found->ai_addr, found->ai_addrlen) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "the HTTP gateway cannot listen on ", options.listen, ": ", strerror(errno),
        errno == EADDRINUSE ? " (another airlockd? give --http-listen another port)" : ""));
  }
  if (listen(impl->listener.get(), 512) != 0) return ErrnoStatus("listen", options.listen);
  sockaddr_storage bound = {};
  socklen_t len = sizeof bound;
  getsockname(impl->listener.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  impl->wake = UniqueFd(eventfd(0, EFD_CLOEXEC));
  if (!impl->wake.valid()) return ErrnoStatus("eventfd", "");
  impl->options = std::move(options);
  impl->backend = backend;
  std::string name = PeerName(bound);
  uint16_t bound_port = 0;
  size_t colon = name.rfind(':');
  uint32_t parsed = 0;
  if (absl::SimpleAtoi(name.substr(colon + 1), &parsed)) bound_port = static_cast<uint16_t>(parsed);
  impl->base_host = name;
  impl->self = impl;
  Impl* raw = impl.get();
  impl->acceptor = std::thread([raw] { raw->AcceptLoop(); });
  std::unique_ptr<HttpGateway> gateway(new HttpGateway(std::move(impl)));
  gateway->port_ = bound_port;
  return gateway;
}

HttpGateway::HttpGateway(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpGateway::~HttpGateway() {
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->stopping = true;
    for (auto& [id, fd] : impl_->sockets) shutdown(fd, SHUT_RDWR);
  }
  uint64_t one = 1;
  if (write(impl_->wake.get(), &one, sizeof one) < 0) {
    // The accept loop also ends when the listener closes below.
  }
  impl_->acceptor.join();
  absl::MutexLock lock(&impl_->mu);
  impl_->mu.Await(absl::Condition(
      +[](Impl* impl) ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl->mu) { return impl->sockets.empty(); },
      impl_.get()));
  impl_->self.reset();  // the connections' threads hold their own references until they end
}

std::string HttpGateway::ExposureUrl(uint16_t port, absl::string_view session_id) const {
  return absl::StrCat(impl_->tls ? "https://" : "http://",
                      ExposureHost(port, session_id, impl_->options.domain), ":", port_, "/");
}

const std::string& HttpGateway::domain() const { return impl_->options.domain; }

std::string HttpGateway::BaseUrl() const {
  return absl::StrCat(impl_->tls ? "https://" : "http://", impl_->base_host);
}

void HttpGateway::Impl::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{.fd = listener.get(), .events = POLLIN, .revents = 0},
                     {.fd = wake.get(), .events = POLLIN, .revents = 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LogError(absl::StrCat("the HTTP gateway stopped accepting: poll: ", strerror(errno)));
      return;
    }
    if (fds[1].revents != 0) return;
    sockaddr_storage from = {};
    socklen_t len = sizeof from;
    UniqueFd client(
        accept4(listener.get(), reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC));
    if (!client.valid()) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        // Out of descriptors, most likely: the next accept may go through once some close.
        LogWarning(absl::StrCat("the HTTP gateway could not accept: ", strerror(errno)));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      continue;
    }
    int one = 1;
    setsockopt(client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint64_t id;
    {
      absl::MutexLock lock(&mu);
      if (stopping) return;
      if (sockets.size() >= options.max_connections) {
        GatewayConnection busy(std::move(client), PeerName(from), "", false);
        if (!tls) {
          busy.Respond(503, "Service Unavailable",
                       absl::StrCat("airlockd's HTTP gateway holds ", options.max_connections,
                                    " connections, its most; try again shortly"));
        }
        continue;
      }
      id = next_id++;
      sockets[id] = client.get();
    }
    std::thread([owner = self.lock(), id, c = std::move(client), peer = PeerName(from)]() mutable {
      owner->Serve(std::move(c), std::move(peer));
      owner->Finish(id);
    }).detach();
  }
}

UniqueFd HttpGateway::Impl::TerminateTls(int raw, std::thread* pump) {
  std::unique_ptr<SSL, SslFree> ssl(SSL_new(tls.get()));
  if (!ssl || SSL_set_fd(ssl.get(), raw) != 1) return UniqueFd();
  if (SSL_accept(ssl.get()) != 1) {
    LogDebug(absl::StrCat("gateway: a TLS handshake failed: ", OpenSslError()));
    return UniqueFd();
  }
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return UniqueFd();
  UniqueFd mine(pair[0]);
  SetNonBlocking(raw);
  SetNonBlocking(pair[1]);
  *pump = std::thread([ssl = std::move(ssl), raw, plain = UniqueFd(pair[1])]() mutable {
    PumpTls(ssl.get(), raw, plain.get());
    shutdown(raw, SHUT_RDWR);
  });
  return mine;
}

void HttpGateway::Impl::Serve(UniqueFd client, std::string peer) {
  // The head must come within head_timeout (so idle sockets cannot hold threads); later reads
  // have no deadline of the gateway's (a WebSocket may be quiet for long).
  timeval deadline = {static_cast<time_t>(absl::ToInt64Seconds(options.head_timeout)), 0};
  setsockopt(client.get(), SOL_SOCKET, SO_RCVTIMEO, &deadline, sizeof deadline);
  setsockopt(client.get(), SOL_SOCKET, SO_SNDTIMEO, &deadline, sizeof deadline);
  std::thread pump;
  UniqueFd plain;
  if (tls) {
    plain = TerminateTls(client.get(), &pump);
    if (!plain.valid()) return;
    setsockopt(plain.get(), SOL_SOCKET, SO_RCVTIMEO, &deadline, sizeof deadline);
  }
  int fd = tls ? plain.get() : client.get();
  std::string head;
  GatewayRequest request;
  std::string error;
  GatewayParse parsed = GatewayParse::kNeedMore;
  absl::Time until = absl::Now() + options.head_timeout;
  while (parsed == GatewayParse::kNeedMore && absl::Now() < until) {
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
    parsed = ParseGatewayRequest(head, options.domain, &request, &error);
  }
  timeval none = {0, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
  {
    GatewayConnection connection(tls ? std::move(plain) : UniqueFd(dup(client.get())), peer,
                                 std::move(head), tls != nullptr);
    if (parsed == GatewayParse::kMalformed) {
      connection.Respond(400, "Bad Request", error);
    } else if (parsed == GatewayParse::kDone && request.session_id.empty() &&
               backend->ServeApi(request, connection)) {
      // The backend's own API answered it.
    } else if (parsed == GatewayParse::kDone && request.session_id.empty()) {
      connection.Respond(
          404, "Not Found",
          absl::StrCat("this is airlockd's HTTP gateway: name a session's exposed port as the "
                       "host PORT-ID.",
                       options.domain,
                       " or with the headers X-Airlock-Session and X-Airlock-Port (`airlock "
                       "expose ID PORT` prints the URL)"));
    } else if (parsed == GatewayParse::kDone) {
      backend->Serve(request, connection);
    }
    // kNeedMore: the client went away or took too long; nothing to answer.
  }
  if (pump.joinable()) pump.join();  // it ends once the plaintext side closed and went out
}

}  // namespace airlock::gateway
