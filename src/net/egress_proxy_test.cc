// The egress proxy against a fake guest (frames by hand) and real sockets on loopback.
#include "src/net/egress_proxy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/net/tls_intercept.h"
#include "src/testing/fake_guest.h"

namespace airlock::net {
namespace {

// A listening socket on 127.0.0.1 and a port of the kernel's choosing.
int ListenOnLoopback(uint16_t* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  EXPECT_EQ(listen(fd, 16), 0);
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  *port = ntohs(sa.sin_port);
  return fd;
}

// Echoes what it reads on each connection until EOF, then closes. Counts connections.
class EchoServer {
 public:
  EchoServer() {
    fd_ = ListenOnLoopback(&port_);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p = {fd_, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        int c = accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        ++accepted_;
        char buf[4096];
        for (;;) {
          pollfd q = {c, POLLIN, 0};
          if (poll(&q, 1, 50) == 0) {
            if (stop_) break;
            continue;
          }
          ssize_t n = read(c, buf, sizeof(buf));
          if (n <= 0) break;
          (void)!write(c, buf, static_cast<size_t>(n));
        }
        close(c);
      }
    });
  }
  ~EchoServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  int fd_;
  uint16_t port_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// Public destinations, and the loopback servers of these tests.
std::shared_ptr<const EgressCeiling> TestCeiling() {
  absl::StatusOr<EgressCeiling> ceiling = ParseEgressCeiling("allow *:*\nallow 127.0.0.1/32:*\n");
  EXPECT_TRUE(ceiling.ok()) << ceiling.status();
  return std::make_shared<const EgressCeiling>(*ceiling);
}

class EgressProxyTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> rules, EgressProxyOptions options = {}) {
    g_.Handshake();
    std::vector<EgressRule> parsed;
    for (const std::string& r : rules) parsed.push_back(*ParseEgressRule(r));
    auto policy =
        std::make_shared<const EgressPolicy>(parsed, TestCeiling(), std::vector<IpAddress>{});
    auto resolver = StaticResolver::Parse("127.0.0.1 web.test\n10.9.9.9 rebind.test\n", nullptr);
    ASSERT_TRUE(resolver.ok());
    options.resolver = *std::move(resolver);
    options.on_events = [this](std::vector<NetEvent> events) {
      absl::MutexLock lock(&mu_);
      for (NetEvent& e : events) events_.push_back(std::move(e));
    };
    auto proxy = EgressProxy::Start(g_.channel_, policy, std::move(options));
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = *std::move(proxy);
    Frame rules_frame = g_.Receive();
    EXPECT_EQ(rules_frame.type, FrameType::kNetPolicy);
  }
  void TearDown() override {
    if (proxy_) proxy_->Stop();
  }

  struct Answer {
    DnsVerdict verdict;
    std::vector<uint32_t> ports;
    std::string message;
  };
  Answer Ask(uint32_t id, const std::string& name) {
    g_.Send(FrameType::kDnsQuery, id, EncodePayload(DnsQueryMessage{.name = name, .qtype = 1}));
    Frame f = g_.ReceiveRequest();
    EXPECT_EQ(f.type, FrameType::kDnsAnswer);
    EXPECT_EQ(f.stream, id);
    DnsAnswerMessage answer;
    EXPECT_TRUE(DecodePayload(f.payload, &answer));
    return {answer.verdict, {answer.ports.begin(), answer.ports.end()}, answer.message};
  }
  void Connect(uint32_t id, const std::string& name, uint32_t port) {
    std::string synthetic("\xc6\x12\x00\x01", 4);
    g_.Send(FrameType::kConnect, id,
            EncodePayload(ConnectMessage{.name = name, .address = synthetic, .port = port}));
  }
  // The reason of the first recorded event that contains `text`, once flushed; "" if none comes.
  std::string ReasonWith(const std::string& text) {
    for (int i = 0; i < 100; ++i) {
      {
        absl::MutexLock lock(&mu_);
        for (const NetEvent& e : events_) {
          if (e.reason.find(text) != std::string::npos) return e.reason;
        }
      }
      usleep(20000);
    }
    return "";
  }
  // A reset as the guest gets it: a fixed text, never the host's reason.
  static void ExpectPlainReset(const Frame& f, const std::string& host_reason) {
    EXPECT_EQ(f.type, FrameType::kReset);
    EXPECT_NE(f.payload.find("airlock network log says why"), std::string::npos) << f.payload;
    EXPECT_EQ(f.payload.find(host_reason), std::string::npos) << f.payload;
  }
  // Waits for the flush of events (every 250 ms).
  std::vector<NetEvent> Events(size_t at_least) {
    for (int i = 0; i < 100; ++i) {
      {
        absl::MutexLock lock(&mu_);
        if (events_.size() >= at_least) return events_;
      }
      usleep(20000);
    }
    absl::MutexLock lock(&mu_);
    return events_;
  }

  FakeGuest g_;
  std::shared_ptr<EgressProxy> proxy_;
  absl::Mutex mu_;
  std::vector<NetEvent> events_ ABSL_GUARDED_BY(mu_);
};

TEST_F(EgressProxyTest, AnswersQuestionsByPolicyAndRefusesRebinding) {
  Start({"web.test:8080", "rebind.test:8080"});
  Answer a = Ask(2, "web.test");
  EXPECT_EQ(a.verdict, DnsVerdict::kAllowed);
  EXPECT_EQ(a.ports, std::vector<uint32_t>{8080});
  a = Ask(4, "nope.test");
  EXPECT_EQ(a.verdict, DnsVerdict::kDenied);
  // Allowed by name, but it resolves to an internal address the ceiling does not admit.
  a = Ask(6, "rebind.test");
  EXPECT_EQ(a.verdict, DnsVerdict::kDenied);
  // The guest hears no more than that: the address and the rules stay on the host.
  EXPECT_EQ(a.message.find("10.9.9.9"), std::string::npos) << a.message;
  EXPECT_EQ(a.message.find("ceiling"), std::string::npos) << a.message;
  std::vector<NetEvent> events = Events(3);
  ASSERT_GE(events.size(), 3u);
  EXPECT_TRUE(events[0].allowed);
  EXPECT_FALSE(events[1].allowed);
  EXPECT_NE(events[1].reason.find("--allow nope.test"), std::string::npos) << events[1].reason;
  EXPECT_FALSE(events[2].allowed);
  EXPECT_NE(events[2].reason.find("10.9.9.9"), std::string::npos) << events[2].reason;
}

TEST_F(EgressProxyTest, FlushHandsOverEveryDecisionMadeBeforeIt) {
  Start({"web.test:8080"});
  EXPECT_EQ(Ask(2, "nope.test").verdict, DnsVerdict::kDenied);
  // No waiting for the periodic flush: a reader right after an exec sees the denial.
  proxy_->Flush();
  {
    absl::MutexLock lock(&mu_);
    ASSERT_EQ(events_.size(), 1u);
    EXPECT_EQ(events_[0].name, "nope.test");
    EXPECT_FALSE(events_[0].allowed);
  }
  proxy_->Stop();
  proxy_->Flush();  // a stopped proxy returns at once
}

TEST_F(EgressProxyTest, RelaysAnAllowedConnectionBothWaysAndEndsCleanly) {
  EchoServer echo;
  Start({"web.test:" + std::to_string(echo.port())});
  Connect(2, "web.test", echo.port());
  g_.Send(FrameType::kData, 2, "ping");
  g_.Send(FrameType::kDataEnd, 2, "");
  std::string got;
  bool ended = false;
  while (!ended) {
    Frame f = g_.Receive();
    ASSERT_EQ(f.stream, 2u);
    if (f.type == FrameType::kData) got += f.payload;
    if (f.type == FrameType::kDataEnd) ended = true;
    ASSERT_NE(f.type, FrameType::kReset) << f.payload;
  }
  EXPECT_EQ(got, "ping");
  std::vector<NetEvent> events = Events(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "connect");
  EXPECT_TRUE(events[0].allowed);
  EXPECT_EQ(events[0].address, "127.0.0.1");
  EXPECT_EQ(events[0].bytes_out, 4u);
  EXPECT_EQ(events[0].bytes_in, 4u);
}

TEST_F(EgressProxyTest, RefusesAPortOrNameThePolicyDoesNotAllow) {
  EchoServer echo;
  Start({"web.test:" + std::to_string(echo.port())});
  Connect(2, "web.test", 9);
  Frame f = g_.ReceiveRequest();
  ExpectPlainReset(f, "port 9 is not");
  EXPECT_NE(ReasonWith("port 9 is not"), "");
  Connect(4, "other.test", echo.port());
  f = g_.ReceiveRequest();
  EXPECT_EQ(f.type, FrameType::kReset);
  EXPECT_EQ(echo.accepted(), 0);
}

TEST_F(EgressProxyTest, ChecksTheHostOnPort80AndTheSniOn443BeforeDialing) {
  Start({"web.test"});
  Connect(2, "web.test", 80);
  g_.Send(FrameType::kData, 2, "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n");
  Frame f = g_.ReceiveRequest();
  ExpectPlainReset(f, "names evil.test");
  EXPECT_NE(ReasonWith("names evil.test"), "");
  Connect(4, "web.test", 443);
  g_.Send(FrameType::kData, 4, "GET / HTTP/1.1\r\nHost: web.test\r\n\r\n");
  f = g_.ReceiveRequest();
  ExpectPlainReset(f, "other than TLS");
  EXPECT_NE(ReasonWith("other than TLS"), "");
  // A ClientHello that names web.test but offers Encrypted Client Hello: the name may be only
  // a front's, so it is refused.
  auto u16 = [](size_t n) { return std::string{static_cast<char>(n >> 8), static_cast<char>(n)}; };
  std::string name = "web.test";
  std::string sni = u16(name.size() + 3) + '\0' + u16(name.size()) + name;
  std::string ech("\x00\x00\x01\x00\x01\x42", 6);
  std::string extensions =
      std::string("\x00\x00", 2) + u16(sni.size()) + sni + "\xfe\x0d" + u16(ech.size()) + ech;
  std::string body = std::string("\x03\x03") + std::string(32, 'r') + '\0' + u16(2) + "\x13\x01" +
                     '\x01' + '\0' + u16(extensions.size()) + extensions;
  std::string handshake = std::string("\x01\x00", 2) + u16(body.size()) + body;
  Connect(6, "web.test", 443);
  g_.Send(FrameType::kData, 6, std::string("\x16\x03\x01") + u16(handshake.size()) + handshake);
  f = g_.ReceiveRequest();
  ExpectPlainReset(f, "offers Encrypted Client Hello");
  EXPECT_NE(ReasonWith("offers Encrypted Client Hello"), "");
}

TEST_F(EgressProxyTest, ARawRuleCarriesOtherProtocolsOnPort80And443) {
  Start({"web.test:80/raw"});
  Connect(2, "web.test", 80);
  g_.Send(FrameType::kData, 2, "SSH-2.0-OpenSSH_9.2\r\n");
  Frame f = g_.ReceiveRequest();
  // Not refused for what it sent: it was dialed (and nothing listens on port 80 here).
  ExpectPlainReset(f, "refused the connection");
  EXPECT_NE(ReasonWith("refused the connection"), "");
  EXPECT_EQ(ReasonWith("refused the connection").find("HTTP"), std::string::npos);
}

TEST_F(EgressProxyTest, NarrowingThePolicyResetsOpenConnections) {
  EchoServer echo;
  Start({"web.test:" + std::to_string(echo.port())});
  Connect(2, "web.test", echo.port());
  g_.Send(FrameType::kData, 2, "x");
  Frame f = g_.ReceiveRequest();
  ASSERT_EQ(f.type, FrameType::kData);
  auto ceiling = std::make_shared<const EgressCeiling>(EgressCeiling::Default());
  proxy_->SetPolicy(std::make_shared<const EgressPolicy>(std::vector<EgressRule>{}, ceiling,
                                                         std::vector<IpAddress>{}));
  f = g_.ReceiveRequest();
  ExpectPlainReset(f, "no longer allows");
  EXPECT_NE(ReasonWith("no longer allows"), "");
  f = g_.ReceiveRequest();
  EXPECT_EQ(f.type, FrameType::kNetPolicy);
}

TEST_F(EgressProxyTest, RefusesConnectionsBeyondItsCap) {
  EchoServer echo;
  EgressProxyOptions options;
  options.max_connections = 1;
  Start({"web.test:" + std::to_string(echo.port())}, std::move(options));
  Connect(2, "web.test", echo.port());
  g_.Send(FrameType::kData, 2, "x");
  ASSERT_EQ(g_.ReceiveRequest().type, FrameType::kData);  // open, and it stays open
  Connect(4, "web.test", echo.port());
  Frame f;
  do {
    f = g_.ReceiveRequest();
  } while (f.stream != 4);
  ExpectPlainReset(f, "too many connections");
  EXPECT_NE(ReasonWith("too many connections"), "");
}

TEST_F(EgressProxyTest, ATenantsConnectionsAreCountedOverItsSessionsAndGivenBack) {
  EchoServer echo;
  auto ledger = std::make_shared<ConnectionLedger>(100);
  ASSERT_TRUE(ledger->Take("uid:1000", 2).ok());  // another session of the tenant holds one
  EgressProxyOptions options;
  options.ledger = ledger;
  options.tenant = "uid:1000";
  options.tenant_connections = 2;
  Start({"web.test:" + std::to_string(echo.port())}, std::move(options));
  Connect(2, "web.test", echo.port());
  g_.Send(FrameType::kData, 2, "x");
  ASSERT_EQ(g_.ReceiveRequest().type, FrameType::kData);
  EXPECT_EQ(ledger->Open("uid:1000"), 2u);
  Connect(4, "web.test", echo.port());
  Frame f;
  do {
    f = g_.ReceiveRequest();
  } while (f.stream != 4);
  ExpectPlainReset(f, "connection quota");
  EXPECT_NE(ReasonWith("over the tenant's egress connection quota of 2"), "");
  // Another tenant is not touched by it.
  EXPECT_TRUE(ledger->Take("uid:2000", 2).ok());
  // The connection that ends gives its place back; so does a proxy that stops.
  g_.Send(FrameType::kDataEnd, 2, "");
  for (int i = 0; i < 200 && ledger->Open("uid:1000") != 1; ++i) usleep(10000);
  EXPECT_EQ(ledger->Open("uid:1000"), 1u);
}

TEST_F(EgressProxyTest, AConnectionIdleBothWaysIsEndedAndSaysWhy) {
  EchoServer echo;
  auto ledger = std::make_shared<ConnectionLedger>(100);
  EgressProxyOptions options;
  options.ledger = ledger;
  options.tenant = "uid:1000";
  options.idle_timeout_ms = 600;
  Start({"web.test:" + std::to_string(echo.port())}, std::move(options));
  Connect(2, "web.test", echo.port());
  g_.Send(FrameType::kData, 2, "x");
  ASSERT_EQ(g_.ReceiveRequest().type, FrameType::kData);
  // Nothing more either way: reset, recorded with the setting to change, its place given back.
  Frame f = g_.ReceiveRequest();
  EXPECT_EQ(f.stream, 2u);
  ExpectPlainReset(f, "idle for");
  EXPECT_NE(ReasonWith("--egress-idle-timeout"), "");
  EXPECT_EQ(ledger->Open("uid:1000"), 0u);
}

TEST(ConnectionLedgerTest, ATenantStopsAtItsQuotaAndEveryoneAtTheTotal) {
  ConnectionLedger ledger(3);
  EXPECT_TRUE(ledger.Take("a", 2).ok());
  EXPECT_TRUE(ledger.Take("a", 2).ok());
  absl::Status over = ledger.Take("a", 2);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("quota of 2"), std::string::npos) << over;
  EXPECT_TRUE(ledger.Take("b", 5).ok());
  absl::Status full = ledger.Take("c", 5);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("all the egress connections it can (3"), std::string::npos);
  ledger.Give("a");
  EXPECT_EQ(ledger.Open("a"), 1u);
  EXPECT_TRUE(ledger.Take("c", 5).ok());
  ledger.Give("nobody");  // nothing to give back: nothing changes
  EXPECT_EQ(ledger.Open("b"), 1u);
  // The process's share leaves a reserve below its open-file limit.
  EXPECT_GE(ConnectionLedger::TotalForThisProcess(), 64u);
}

// An HTTPS server on loopback (a certificate from its own CA, as a public one would be): answers
// each request with the Authorization header it received, echoed in its body and a header.
class EchoHttpsServer {
 public:
  EchoHttpsServer() {
    ca_ = *SessionCa::Create("public");
    char name[] = "/tmp/airlock-public-ca-XXXXXX";
    int fd = mkstemp(name);
    close(fd);
    ca_file_ = name;
    std::ofstream(ca_file_) << ca_->CertificatePem();
    ctx_ = *ca_->ServerContext("web.test");
    fd_ = ListenOnLoopback(&port_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~EchoHttpsServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
    unlink(ca_file_.c_str());
  }
  uint16_t port() const { return port_; }
  const std::string& ca_file() const { return ca_file_; }
  std::string received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      timeval tv = {2, 0};
      setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      SSL* ssl = SSL_new(ctx_);
      SSL_set_fd(ssl, c);
      if (SSL_accept(ssl) == 1) {
        std::string in;
        char buf[4096];
        for (;;) {
          size_t end = in.find("\r\n\r\n");
          if (end != std::string::npos) {
            std::string head = in.substr(0, end);
            in.erase(0, end + 4);
            {
              absl::MutexLock lock(&mu_);
              received_ += head + "\n";
            }
            std::string auth;
            size_t at = head.find("Authorization: ");
            if (at != std::string::npos)
              auth = head.substr(at + 15, head.find("\r\n", at) - at - 15);
            std::string body = "you sent: " + auth;
            std::string response =
                absl::StrCat("HTTP/1.1 200 OK\r\nX-Echo: ", auth,
                             "\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
            SSL_write(ssl, response.data(), static_cast<int>(response.size()));
            continue;
          }
          int n = SSL_read(ssl, buf, sizeof(buf));
          if (n <= 0) break;
          in.append(buf, static_cast<size_t>(n));
        }
        SSL_shutdown(ssl);
      }
      SSL_free(ssl);
      close(c);
    }
  }

  std::shared_ptr<SessionCa> ca_;
  std::string ca_file_;
  SSL_CTX* ctx_;
  int fd_;
  uint16_t port_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  absl::Mutex mu_;
  std::string received_ ABSL_GUARDED_BY(mu_);
};

constexpr char kPlaceholder[] = "AIRLOCK_PLACEHOLDER_KEY_0123456789abcdef";
constexpr char kValue[] = "real-secret-value-0123456789";

class InterceptTest : public EgressProxyTest {
 protected:
  void StartIntercepting(const std::string& upstream_ca_file) {
    session_ca_ = *SessionCa::Create("s-test");
    EgressProxyOptions options;
    options.ca = session_ca_;
    absl::StatusOr<SslCtxPtr> upstream = UpstreamContext(upstream_ca_file);
    ASSERT_TRUE(upstream.ok()) << upstream.status();
    options.upstream_tls = std::shared_ptr<SSL_CTX>(upstream->release(), SSL_CTX_free);
    options.tls_port = server_.port();
    options.secrets = {{"KEY", kPlaceholder, kValue, {"web.test"}, false, {"authorization"}}};
    Start({"web.test:" + std::to_string(server_.port())}, std::move(options));
    // The guest trusts the session's CA, as airlock sets it up in a VM.
    char name[] = "/tmp/airlock-session-ca-XXXXXX";
    int fd = mkstemp(name);
    close(fd);
    trust_file_ = name;
    std::ofstream(trust_file_) << session_ca_->CertificatePem();
    guest_ctx_ = *UpstreamContext(trust_file_);
  }
  void TearDown() override {
    EgressProxyTest::TearDown();
    if (!trust_file_.empty()) unlink(trust_file_.c_str());
  }

  // Opens stream `id` as a TLS client of web.test, sends `request`, and returns the plaintext
  // that came back until the proxy ended the stream (or reset it: then "RESET: why").
  std::string Exchange(uint32_t id, const std::string& request) {
    auto tls = *TlsEnd::Client(guest_ctx_.get(), "web.test");
    Connect(id, "web.test", server_.port());
    std::string wire;
    EXPECT_TRUE(tls->Send(request, &wire).ok());
    EXPECT_TRUE(tls->Start(&wire).ok());
    g_.Send(FrameType::kData, id, wire);
    // A proxy that stops answering fails the test instead of hanging it.
    timeval limit = {20, 0};
    setsockopt(g_.guest_.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    std::string plain;
    bool ended = false;
    for (;;) {
      Frame f = g_.ReceiveRequest();
      if (f.type == FrameType{}) return plain + "NO ANSWER";
      if (f.stream != id) continue;
      if (f.type == FrameType::kReset) return plain + "RESET: " + f.payload;
      if (f.type == FrameType::kDataEnd) return plain;
      if (f.type != FrameType::kData) continue;
      std::string back;
      bool closed = false;
      absl::Status s = tls->Receive(f.payload, &plain, &back, &closed);
      EXPECT_TRUE(s.ok()) << s;
      if (!back.empty() && !ended) g_.Send(FrameType::kData, id, back);
      // One request, one response: end our side once it has arrived whole, and only once
      // (data or a second end after the end breaks the channel's protocol, as from a guest).
      if (!ended &&
          (plain.find("you sent") != std::string::npos || plain.find("HTTP/1.1 502") == 0)) {
        ended = true;
        std::string bye;
        tls->Close(&bye);
        g_.Send(FrameType::kData, id, bye);
        g_.Send(FrameType::kDataEnd, id, "");
      }
    }
  }

  EchoHttpsServer server_;
  std::shared_ptr<SessionCa> session_ca_;
  std::string trust_file_;
  SslCtxPtr guest_ctx_;
};

TEST_F(InterceptTest, TheServerGetsTheValueAndTheGuestOnlyEverSeesThePlaceholder) {
  StartIntercepting(server_.ca_file());
  std::string got = Exchange(2, absl::StrCat("GET /v1 HTTP/1.1\r\nHost: web.test\r\n"
                                             "Authorization: Bearer ",
                                             kPlaceholder, "\r\n\r\n"));
  EXPECT_NE(server_.received().find(absl::StrCat("Authorization: Bearer ", kValue)),
            std::string::npos)
      << server_.received();
  EXPECT_EQ(got.find(kValue), std::string::npos) << got;
  EXPECT_NE(got.find(absl::StrCat("you sent: Bearer ", kPlaceholder)), std::string::npos) << got;
  EXPECT_NE(got.find(absl::StrCat("X-Echo: Bearer ", kPlaceholder)), std::string::npos) << got;
  proxy_->Flush();
  absl::MutexLock lock(&mu_);
  bool used = false;
  for (const NetEvent& e : events_) {
    if (e.kind == "secret" && e.allowed && e.rule == "KEY") used = true;
    EXPECT_EQ(DescribeNetEvent(e).find(kValue), std::string::npos);
  }
  EXPECT_TRUE(used);
}

TEST_F(InterceptTest, AServerWhoseCertificateDoesNotVerifyIsA502ThatSaysWhy) {
  StartIntercepting("");  // the system's trust store: it does not know the server's CA
  std::string got = Exchange(2, absl::StrCat("GET / HTTP/1.1\r\nHost: web.test\r\n"
                                             "Authorization: Bearer ",
                                             kPlaceholder, "\r\n\r\n"));
  EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 502") << got;
  EXPECT_NE(got.find("did not verify"), std::string::npos) << got;
  EXPECT_EQ(server_.received(), "");
}

TEST_F(InterceptTest, AGuestWhoseTlsBreaksAfterItsHelloIsReset) {
  StartIntercepting(server_.ca_file());
  auto tls = *TlsEnd::Client(guest_ctx_.get(), "web.test");
  std::string wire;
  ASSERT_TRUE(tls->Start(&wire).ok());
  Connect(2, "web.test", server_.port());
  // The hello passes the SNI check; what follows it is no TLS record at all.
  g_.Send(FrameType::kData, 2, wire + "\x17\x03\x03\xff\xffnot a record");
  Frame f;
  do {
    f = g_.ReceiveRequest();
  } while (f.type == FrameType::kData);
  ExpectPlainReset(f, "TLS with the guest");
  EXPECT_NE(ReasonWith("TLS with the guest"), "");
  EXPECT_EQ(server_.received(), "");
}

TEST_F(InterceptTest, AHostWithNoSecretBoundStaysAnOpaqueTunnel) {
  EchoServer echo;
  session_ca_ = *SessionCa::Create("s-test");
  EgressProxyOptions options;
  options.ca = session_ca_;
  options.upstream_tls = std::shared_ptr<SSL_CTX>(UpstreamContext("")->release(), SSL_CTX_free);
  options.secrets = {{"KEY", kPlaceholder, kValue, {"api.other.test"}, false, {"authorization"}}};
  Start({"web.test:" + std::to_string(echo.port())}, std::move(options));
  Connect(2, "web.test", echo.port());
  g_.Send(FrameType::kData, 2, std::string("plain ") + kPlaceholder);
  std::string back;
  while (back.size() < 6 + sizeof(kPlaceholder) - 1) {
    Frame f = g_.ReceiveRequest();
    ASSERT_EQ(f.type, FrameType::kData);
    back += f.payload;
  }
  EXPECT_EQ(back, std::string("plain ") + kPlaceholder);  // untouched
  proxy_->Flush();
  absl::MutexLock lock(&mu_);
  bool warned = false;
  for (const NetEvent& e : events_) warned |= e.kind == "secret" && !e.allowed;
  EXPECT_TRUE(warned);
}

}  // namespace
}  // namespace airlock::net
