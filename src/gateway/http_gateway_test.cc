#include "src/gateway/http_gateway.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "src/testing/test_util.h"

namespace airlock::gateway {
namespace {

// Answers every routed connection with what the client sent, prefixed by the route, once the
// client half-closed; or, for port 1, waits until the connection is cut.
class EchoBackend : public GatewayBackend {
 public:
  void Serve(const GatewayRequest& request, GatewayConnection& connection) override {
    std::string got = connection.TakeBuffered();
    if (request.port == 1) {
      waiting.Notify();
      char buf[100];
      while (connection.Read(buf, sizeof buf) > 0) {
      }
      return;
    }
    char buf[4096];
    for (ssize_t n; (n = connection.Read(buf, sizeof buf)) > 0;) got.append(buf, n);
    connection.Write(request.session_id + ":" + std::to_string(request.port) + ":" + got);
    connection.EndWrite();
  }
  absl::Notification waiting;
};

// Sends, half-closes, and reads to the end.
std::string Exchange(uint16_t port, const std::string& bytes) {
  UniqueFd fd = testing::ConnectLoopback(port);
  EXPECT_EQ(send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
  shutdown(fd.get(), SHUT_WR);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = recv(fd.get(), buf, sizeof buf, 0)) > 0;) got.append(buf, n);
  return got;
}

std::unique_ptr<HttpGateway> StartGateway(GatewayBackend* backend,
                                          HttpGatewayOptions options = {}) {
  options.listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<HttpGateway>> g = HttpGateway::Start(options, backend);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : nullptr;
}

constexpr char kRouted[] =
    "GET / HTTP/1.1\r\nHost: 8000-0123456789ab.airlock.localhost\r\n\r\nand a body";

TEST(HttpGatewayTest, ARoutedConnectionReachesTheBackendWithItsHeadUnchanged) {
  EchoBackend backend;
  std::unique_ptr<HttpGateway> gateway = StartGateway(&backend);
  ASSERT_NE(gateway, nullptr);
  EXPECT_EQ(Exchange(gateway->port(), kRouted), std::string("0123456789ab:8000:") + kRouted);
  EXPECT_EQ(gateway->ExposureUrl(8000, "0123456789ab"),
            "http://8000-0123456789ab.airlock.localhost:" + std::to_string(gateway->port()) + "/");
}

TEST(HttpGatewayTest, UnroutedAndMalformedRequestsAreAnsweredByTheGateway) {
  EchoBackend backend;
  std::unique_ptr<HttpGateway> gateway = StartGateway(&backend);
  ASSERT_NE(gateway, nullptr);
  std::string answer = Exchange(gateway->port(), "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 404 Not Found\r\n")) << answer;
  EXPECT_NE(answer.find("airlock expose"), std::string::npos) << answer;
  answer = Exchange(gateway->port(), "HELLO\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 400 Bad Request\r\n")) << answer;
  // A client that sends nothing whole and goes away gets nothing.
  EXPECT_EQ(Exchange(gateway->port(), "GET / HT"), "");
}

TEST(HttpGatewayTest, StoppingCutsOpenConnections) {
  EchoBackend backend;
  std::unique_ptr<HttpGateway> gateway = StartGateway(&backend);
  ASSERT_NE(gateway, nullptr);
  UniqueFd fd = testing::ConnectLoopback(gateway->port());
  std::string head = "GET / HTTP/1.1\r\nHost: 1-0123456789ab.airlock.localhost\r\n\r\n";
  ASSERT_EQ(send(fd.get(), head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  backend.waiting.WaitForNotification();
  gateway.reset();  // returns only once the backend's Serve did
  char c;
  EXPECT_EQ(recv(fd.get(), &c, 1, 0), 0);
}

TEST(HttpGatewayTest, AnAddressBeyondLoopbackNeedsTls) {
  EchoBackend backend;
  absl::StatusOr<std::unique_ptr<HttpGateway>> g =
      HttpGateway::Start({.listen = "0.0.0.0:0"}, &backend);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("--http-tls-cert"), std::string::npos) << g.status();
  EXPECT_TRUE(IsLoopbackListen("127.0.0.1:1"));
  EXPECT_TRUE(IsLoopbackListen("[::1]:1"));
  EXPECT_TRUE(IsLoopbackListen("localhost:1"));
  EXPECT_FALSE(IsLoopbackListen("[::]:1"));
  EXPECT_FALSE(IsLoopbackListen("10.0.0.1:1"));
}

// A self-signed certificate for *.airlock.localhost, written as PEM files.
void WriteCertificate(const std::string& cert_path, const std::string& key_path) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  ASSERT_NE(key, nullptr);
  X509* x = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("*.airlock.localhost"), -1, -1,
                             0);
  X509_set_issuer_name(x, name);
  ASSERT_GT(X509_sign(x, key, EVP_sha256()), 0);
  FILE* f = fopen(cert_path.c_str(), "w");
  PEM_write_X509(f, x);
  fclose(f);
  f = fopen(key_path.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  fclose(f);
  X509_free(x);
  EVP_PKEY_free(key);
}

TEST(HttpGatewayTest, WithACertificateItSpeaksTlsAndTheBackendSeesPlaintext) {
  testing::TempDir dir;
  WriteCertificate(dir.File("cert.pem"), dir.File("key.pem"));
  EchoBackend backend;
  std::unique_ptr<HttpGateway> gateway = StartGateway(
      &backend, {.tls_cert_file = dir.File("cert.pem"), .tls_key_file = dir.File("key.pem")});
  ASSERT_NE(gateway, nullptr);
  EXPECT_TRUE(absl::StartsWith(gateway->ExposureUrl(80, "0123456789ab"), "https://"));

  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  UniqueFd fd = testing::ConnectLoopback(gateway->port());
  SSL_set_fd(ssl, fd.get());
  SSL_set_tlsext_host_name(ssl, "8000-0123456789ab.airlock.localhost");
  ASSERT_EQ(SSL_connect(ssl), 1);
  // A body bigger than the pump's buffers, in one go.
  std::string request = std::string(kRouted) + std::string(300000, 'x');
  for (size_t done = 0; done < request.size();) {
    int n = SSL_write(ssl, request.data() + done, static_cast<int>(request.size() - done));
    ASSERT_GT(n, 0);
    done += static_cast<size_t>(n);
  }
  SSL_shutdown(ssl);  // close_notify: the backend's read ends
  std::string got;
  char buf[16384];
  for (int n; (n = SSL_read(ssl, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(got, "0123456789ab:8000:" + request);
  SSL_free(ssl);
  SSL_CTX_free(ctx);

  absl::StatusOr<std::unique_ptr<HttpGateway>> bad = HttpGateway::Start(
      {.listen = "127.0.0.1:0", .tls_cert_file = dir.File("key.pem"), .tls_key_file = "x"},
      &backend);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a PEM certificate"), std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace airlock::gateway
