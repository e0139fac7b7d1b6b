#include "src/net/tls_intercept.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace airlock::net {
namespace {

// A file holding the CA's certificate, for a client that trusts it (as the guest does).
class TrustFile {
 public:
  explicit TrustFile(const std::string& pem) {
    char name[] = "/tmp/airlock-trust-XXXXXX";
    int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    close(fd);
    path_ = name;
    std::ofstream(path_) << pem;
  }
  ~TrustFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct Pair {
  std::unique_ptr<TlsEnd> client, server;
  absl::Status client_status, server_status;
  std::string client_plain, server_plain;

  // Moves ciphertext between the two ends until neither has anything to say.
  void Run(std::string to_server = "", std::string to_client = "") {
    for (int round = 0; round < 10 && (!to_server.empty() || !to_client.empty()); ++round) {
      std::string next_client, next_server;
      bool closed = false;
      if (!to_server.empty() && server_status.ok()) {
        server_status = server->Receive(to_server, &server_plain, &next_client, &closed);
      }
      if (!to_client.empty() && client_status.ok()) {
        client_status = client->Receive(to_client, &client_plain, &next_server, &closed);
      }
      to_server = next_server;
      to_client = next_client;
    }
  }
};

Pair Connect(SessionCa& ca, SSL_CTX* client_ctx, const std::string& cert_host,
             const std::string& asked_host) {
  Pair p;
  absl::StatusOr<SSL_CTX*> server_ctx = ca.ServerContext(cert_host);
  EXPECT_TRUE(server_ctx.ok()) << server_ctx.status();
  p.server = *TlsEnd::Server(*server_ctx);
  p.client = *TlsEnd::Client(client_ctx, asked_host);
  std::string hello;
  EXPECT_TRUE(p.client->Start(&hello).ok());
  p.Run(hello);
  return p;
}

TEST(TlsInterceptTest, AClientThatTrustsTheSessionCaTalksToAMintedLeaf) {
  absl::StatusOr<std::shared_ptr<SessionCa>> ca = SessionCa::Create("s-test");
  ASSERT_TRUE(ca.ok()) << ca.status();
  TrustFile trust((*ca)->CertificatePem());
  absl::StatusOr<SslCtxPtr> client_ctx = UpstreamContext(trust.path());
  ASSERT_TRUE(client_ctx.ok()) << client_ctx.status();
  Pair p = Connect(**ca, client_ctx->get(), "api.test", "api.test");
  ASSERT_TRUE(p.client_status.ok()) << p.client_status;
  ASSERT_TRUE(p.server_status.ok()) << p.server_status;
  EXPECT_TRUE(p.client->handshake_done());
  EXPECT_TRUE(p.server->handshake_done());
  std::string up, down;
  ASSERT_TRUE(p.client->Send("GET / HTTP/1.1\r\n\r\n", &up).ok());
  ASSERT_TRUE(p.server->Send("HTTP/1.1 200 OK\r\n\r\n", &down).ok());
  p.Run(up, down);
  EXPECT_EQ(p.server_plain, "GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(p.client_plain, "HTTP/1.1 200 OK\r\n\r\n");
  // The leaf is minted once per name.
  EXPECT_EQ(*(*ca)->ServerContext("api.test"), *(*ca)->ServerContext("api.test"));
}

TEST(TlsInterceptTest, APlaintextSentBeforeTheHandshakeEndsIsHeldUntilIt) {
  auto ca = SessionCa::Create("s-test");
  TrustFile trust((*ca)->CertificatePem());
  auto client_ctx = UpstreamContext(trust.path());
  auto server_ctx = (*ca)->ServerContext("api.test");
  auto server = *TlsEnd::Server(*server_ctx);
  auto client = *TlsEnd::Client(client_ctx->get(), "api.test");
  std::string to_server;
  ASSERT_TRUE(client->Send("early", &to_server).ok());
  ASSERT_TRUE(client->Start(&to_server).ok());
  std::string plain, to_client, more;
  bool closed = false;
  for (int i = 0; i < 5; ++i) {
    std::string next_client, next_server, client_plain;
    ASSERT_TRUE(server->Receive(to_server, &plain, &next_client, &closed).ok());
    ASSERT_TRUE(client->Receive(next_client, &client_plain, &next_server, &closed).ok());
    to_server = next_server;
  }
  EXPECT_EQ(plain, "early");
}

TEST(TlsInterceptTest, TheClientRefusesACertificateForAnotherNameOrAnUntrustedCa) {
  auto ca = SessionCa::Create("s-test");
  TrustFile trust((*ca)->CertificatePem());
  auto client_ctx = UpstreamContext(trust.path());
  Pair wrong_name = Connect(**ca, client_ctx->get(), "evil.test", "api.test");
  EXPECT_FALSE(wrong_name.client_status.ok());
  EXPECT_NE(wrong_name.client_status.message().find("did not verify"), std::string::npos)
      << wrong_name.client_status;

  auto other = SessionCa::Create("s-other");
  Pair untrusted = Connect(**other, client_ctx->get(), "api.test", "api.test");
  EXPECT_FALSE(untrusted.client_status.ok());
  EXPECT_NE(untrusted.client_status.message().find("did not verify"), std::string::npos)
      << untrusted.client_status;
}

TEST(TlsInterceptTest, AStoredCaLoadsAndABrokenOneIsRefused) {
  auto ca = SessionCa::Create("s-test");
  auto loaded = SessionCa::Load((*ca)->KeyPem(), (*ca)->CertificatePem());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->CertificatePem(), (*ca)->CertificatePem());
  auto other = SessionCa::Create("s-other");
  EXPECT_EQ(SessionCa::Load((*other)->KeyPem(), (*ca)->CertificatePem()).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_FALSE(SessionCa::Load("garbage", "garbage").ok());
  EXPECT_EQ(UpstreamContext("/nonexistent/ca.pem").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace airlock::net
