// airlockd over TCP with TLS: a client with a certificate from the configured CA is its own
// tenant (cert:CN), as is the subject of a bearer token from the configured OpenID Connect
// provider (oidc:ISSUER#SUBJECT); a client with neither gets nothing.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "proto/airlock/v1/airlock.grpc.pb.h"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/common/subprocess.h"
#include "src/testing/test_jwt.h"
#include "src/testing/test_util.h"
#include "tests/cli_runner.h"
#include "tests/loopback_http_server.h"
#include "tests/test_certs.h"

namespace airlock {
namespace {

constexpr char kServerName[] = "airlock-test-server";

std::string Read(const std::string& path) { return *ReadFileToString(path, 1 << 20); }

// A second daemon with its own state (in a directory of the test's own, with the TLS files
// MakeTestCa and Issue write there), sharing the images and kernel of the first, listening on a
// free port of loopback with `extra` arguments. Stopped and removed at the end.
class TcpDaemon {
 public:
  // certificates: clients may show a certificate of the test CA (--tls-client-ca).
  TcpDaemon(bool certificates, const std::vector<std::string>& extra) {
    char tmpl[] = "/tmp/airlock-tls-XXXXXX";
    EXPECT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);  // the VMM (uid 65534) reads the image through here
    MakeTestCa(dir_);
    Issue(dir_, "server", kServerName);
    Issue(dir_, "client", "ci-agent");
    std::string home = dir_ + "/home";
    EXPECT_EQ(mkdir(home.c_str(), 0755), 0);
    HostPaths paths = DefaultHostPaths();
    EXPECT_EQ(symlink(paths.images.c_str(), (home + "/images").c_str()), 0);
    EXPECT_EQ(symlink(DirName(paths.kernel).c_str(), (home + "/kernel").c_str()), 0);
    address_ = "127.0.0.1:" + std::to_string(FreePort());
    std::string daemon = std::string(AIRLOCK_BINARY);
    daemon = daemon.substr(0, daemon.rfind('/')) + "/airlockd";
    std::vector<std::string> argv = {
        daemon,       "--socket",           dir_ + "/sock", "--listen-tcp",      address_,
        "--tls-cert", dir_ + "/server.pem", "--tls-key",    dir_ + "/server.key"};
    if (certificates) argv.insert(argv.end(), {"--tls-client-ca", dir_ + "/ca.pem"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      setenv("AIRLOCK_HOME", home.c_str(), 1);
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~TcpDaemon() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    RemoveTree(dir_).IgnoreError();
  }
  const std::string& dir() const { return dir_; }
  const std::string& address() const { return address_; }
  // A channel to the TCP listener trusting the test CA, with the client certificate `client`
  // (as Issue wrote it in dir()) or none.
  std::shared_ptr<grpc::Channel> Connect(bool with_certificate,
                                         const std::string& client = "client") const {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = Read(dir_ + "/ca.pem");
    if (with_certificate) {
      tls.pem_private_key = Read(dir_ + "/" + client + ".key");
      tls.pem_cert_chain = Read(dir_ + "/" + client + ".pem");
    }
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride(kServerName);
    return grpc::CreateCustomChannel(address_, grpc::SslCredentials(tls), args);
  }

 private:
  std::string dir_;
  std::string address_;
  pid_t pid_ = -1;
};

TEST(TlsTest, CertificateHoldersAreTheirOwnTenantAndOthersCannotConnect) {
  TcpDaemon daemon(/*certificates=*/true, {});
  const std::string& dir = daemon.dir();
  auto channel = daemon.Connect(/*with_certificate=*/true);
  ASSERT_TRUE(
      channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20)));
  auto sessions = v1::Sessions::NewStub(channel);

  grpc::ClientContext create_context;
  v1::CreateSessionRequest create;
  v1::Session session;
  grpc::Status status = sessions->Create(&create_context, create, &session);
  ASSERT_TRUE(status.ok()) << status.error_message();
  grpc::ClientContext list_context;
  v1::ListSessionsResponse listed;
  ASSERT_TRUE(sessions->List(&list_context, {}, &listed).ok());
  ASSERT_EQ(listed.sessions_size(), 1);
  EXPECT_EQ(listed.sessions(0).id(), session.id());

  // Root on the Unix socket of the same daemon is another tenant: it sees nothing.
  setenv("AIRLOCK_SOCKET", (dir + "/sock").c_str(), 1);
  Result unix_ls = RunAirlock({"ls", "-q"});
  EXPECT_EQ(unix_ls.exit_code, 0) << unix_ls.err;
  EXPECT_EQ(unix_ls.out, "");
  setenv("AIRLOCK_SOCKET", (DefaultHostPaths().home + "/airlockd.sock").c_str(), 1);

  // Without a client certificate the TLS handshake fails: no call gets through.
  auto anonymous = daemon.Connect(/*with_certificate=*/false);
  auto anonymous_sessions = v1::Sessions::NewStub(anonymous);
  grpc::ClientContext anonymous_context;
  anonymous_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListSessionsResponse nothing;
  EXPECT_FALSE(anonymous_sessions->List(&anonymous_context, {}, &nothing).ok());

  grpc::ClientContext rm_context;
  v1::RemoveSessionRequest rm;
  rm.set_id(session.id());
  v1::RemoveSessionResponse removed;
  EXPECT_TRUE(sessions->Remove(&rm_context, rm, &removed).ok());
}

// A client certificate named as a read-only operator (AIRLOCK_OPERATORS in vm_test_env.cc
// names cert:dashboard), as the dashboard connects: it lists every tenant's sessions and is
// refused every change.
TEST(TlsTest, AnOperatorsCertificateReadsEveryTenantAndChangesNothing) {
  TcpDaemon daemon(/*certificates=*/true, {});
  Issue(daemon.dir(), "dashboard", "dashboard");
  auto agent = v1::Sessions::NewStub(daemon.Connect(/*with_certificate=*/true));
  auto dashboard = v1::Sessions::NewStub(daemon.Connect(true, "dashboard"));
  grpc::ClientContext create_context;
  create_context.set_wait_for_ready(true);
  v1::Session session;
  grpc::Status status = agent->Create(&create_context, {}, &session);
  ASSERT_TRUE(status.ok()) << status.error_message();

  grpc::ClientContext list_context;
  v1::ListSessionsRequest every;
  every.set_all_tenants(true);
  v1::ListSessionsResponse listed;
  status = dashboard->List(&list_context, every, &listed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(listed.sessions_size(), 1);
  EXPECT_EQ(listed.sessions(0).id(), session.id());
  EXPECT_EQ(listed.sessions(0).tenant(), "cert:ci-agent");
  grpc::ClientContext get_context;
  v1::GetSessionRequest get;
  get.set_id(session.id());
  v1::Session got;
  EXPECT_TRUE(dashboard->Get(&get_context, get, &got).ok());

  grpc::ClientContext denied_context;
  v1::ListSessionsResponse nothing;
  status = agent->List(&denied_context, every, &nothing);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  grpc::ClientContext create_denied;
  v1::Session none;
  status = dashboard->Create(&create_denied, {}, &none);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(status.error_message().find("cert:dashboard is a read-only operator"),
            std::string::npos)
      << status.error_message();
  v1::RemoveSessionRequest rm;
  rm.set_id(session.id());
  v1::RemoveSessionResponse removed;
  grpc::ClientContext rm_denied;
  EXPECT_EQ(dashboard->Remove(&rm_denied, rm, &removed).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  grpc::ClientContext rm_context;
  EXPECT_TRUE(agent->Remove(&rm_context, rm, &removed).ok());
}

// Bearer tokens from an identity provider on the TCP listener: each names its subject as a
// tenant of its own, client certificates keep working beside them, every bad token is refused
// with its reason and audited, and the provider's new keys are taken up from its key set file.
TEST(TlsTest, BearerTokensOfTheProviderNameTheirSubjectAndBadOnesAreRefused) {
  testing::TempDir keys_dir;
  std::string jwks = keys_dir.File("jwks.json");
  testing::Pkey rsa = testing::NewRsaKey(), ec = testing::NewP256Key();
  ASSERT_TRUE(
      WriteFileAtomically(
          jwks,
          nlohmann::json({{"keys", {testing::Jwk(rsa.get(), "k1"), testing::Jwk(ec.get(), "k2")}}})
              .dump(),
          0644)
          .ok());
  TcpDaemon daemon(/*certificates=*/true,
                   {"--oidc-issuer", "https://idp.test", "--oidc-audience", "airlock",
                    "--oidc-jwks", jwks, "--operator", "oidc-group:sre"});
  auto anonymous = daemon.Connect(/*with_certificate=*/false);
  ASSERT_TRUE(
      anonymous->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20)));
  int64_t now = time(nullptr);
  auto claims = [now](const std::string& sub) {
    return nlohmann::json{
        {"iss", "https://idp.test"}, {"aud", "airlock"}, {"sub", sub}, {"exp", now + 600}};
  };
  // The caller's tenant as airlockd sees it (Sessions.Quota names it), with this authorization.
  auto tenant = [&](const std::shared_ptr<grpc::Channel>& channel,
                    const std::string& authorization) {
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!authorization.empty()) c.AddMetadata("authorization", authorization);
    v1::QuotaReport report;
    grpc::Status status = v1::Sessions::NewStub(channel)->Quota(&c, {}, &report);
    return status.ok() ? report.tenant() : "refused: " + status.error_message();
  };
  std::string alice =
      testing::SignJwt(rsa.get(), {{"alg", "RS256"}, {"kid", "k1"}}, claims("alice"));
  std::string bob = testing::SignJwt(ec.get(), {{"alg", "ES256"}, {"kid", "k2"}}, claims("bob"));
  EXPECT_EQ(tenant(anonymous, "Bearer " + alice), "oidc:https://idp.test#alice");
  EXPECT_EQ(tenant(anonymous, "bearer " + bob), "oidc:https://idp.test#bob");
  // A certificate alone still names its holder; a token sent with one names the token's.
  auto with_cert = daemon.Connect(/*with_certificate=*/true);
  EXPECT_EQ(tenant(with_cert, ""), "cert:ci-agent");
  EXPECT_EQ(tenant(with_cert, "Bearer " + alice), "oidc:https://idp.test#alice");
  // Each call is its own: one connection may carry calls of several holders.
  EXPECT_EQ(tenant(with_cert, ""), "cert:ci-agent");
  EXPECT_EQ(tenant(with_cert, "Bearer " + bob), "oidc:https://idp.test#bob");
  // A token whose groups include one named by --operator oidc-group: sees every tenant.
  auto list_all = [&](const std::string& token) {
    grpc::ClientContext c;
    c.AddMetadata("authorization", "Bearer " + token);
    v1::ListSessionsRequest every;
    every.set_all_tenants(true);
    v1::ListSessionsResponse listed;
    return v1::Sessions::NewStub(anonymous)->List(&c, every, &listed).error_code();
  };
  nlohmann::json sre = claims("dana");
  sre["groups"] = {"dev", "sre"};
  EXPECT_EQ(list_all(testing::SignJwt(rsa.get(), {{"alg", "RS256"}, {"kid", "k1"}}, sre)),
            grpc::StatusCode::OK);
  EXPECT_EQ(list_all(alice), grpc::StatusCode::PERMISSION_DENIED);

  nlohmann::json expired = claims("alice");
  expired["exp"] = now - 3600;
  std::string good_header = testing::Base64Url(R"({"alg":"RS256","kid":"k1"})");
  std::string forged = good_header + "." + testing::Base64Url(claims("root").dump()) +
                       alice.substr(alice.rfind('.'));
  nlohmann::json other_audience = claims("alice");
  other_audience["aud"] = "someone-else";
  std::vector<std::pair<std::string, std::string>> refusals = {
      {"", "send a bearer token"},
      {"Basic YWxpY2U6cHc=", "must be `Bearer JWT`"},
      {"Bearer garbage", "not a JWT"},
      {"Bearer " + testing::SignJwt(rsa.get(), {{"alg", "RS256"}, {"kid", "k1"}}, expired),
       "it has expired"},
      {"Bearer " + testing::SignJwt(rsa.get(), {{"alg", "RS256"}}, other_audience), "audience"},
      {"Bearer " + forged, "signature does not verify"},
      {"Bearer " + testing::Base64Url(R"({"alg":"none"})") + "." +
           testing::Base64Url(claims("root").dump()) + ".",
       "algorithm \"none\""},
  };
  for (const auto& [authorization, says] : refusals) {
    std::string got = tenant(anonymous, authorization);
    EXPECT_EQ(got.rfind("refused: ", 0), 0u) << authorization;
    EXPECT_NE(got.find(says), std::string::npos) << authorization << ": " << got;
  }

  // The provider rotates its keys: a token of the new one is taken once the file has it.
  testing::Pkey next = testing::NewP256Key();
  std::string carol =
      testing::SignJwt(next.get(), {{"alg", "ES256"}, {"kid", "k3"}}, claims("carol"));
  ASSERT_TRUE(WriteFileAtomically(
                  jwks, nlohmann::json({{"keys", {testing::Jwk(next.get(), "k3")}}}).dump(), 0644)
                  .ok());
  EXPECT_EQ(tenant(anonymous, "Bearer " + carol), "oidc:https://idp.test#carol");

  // Root on the daemon's own socket reads every refusal, with its reason, in the audit log.
  setenv("AIRLOCK_SOCKET", (daemon.dir() + "/sock").c_str(), 1);
  Result audit = RunAirlock({"audit"});
  setenv("AIRLOCK_SOCKET", (DefaultHostPaths().home + "/airlockd.sock").c_str(), 1);
  EXPECT_EQ(audit.exit_code, 0) << audit.err;
  for (const char* why : {"it has expired", "signature does not verify", "audience"}) {
    EXPECT_NE(audit.out.find(why), std::string::npos) << why << "\n" << audit.out;
  }
  EXPECT_NE(audit.out.find("auth.refuse"), std::string::npos) << audit.out;
}

// The provider's key set from its https:// jwks_uri (a server of the test's own on loopback,
// whose CA is given with --oidc-jwks-ca): fetched at start, and again when a token names a key
// the set lacked (a rotation).
TEST(TlsTest, TheProvidersKeysAreFetchedOverHttpsAndARotationIsTakenUp) {
  testing::TempDir idp;
  MakeTestCa(idp.path());
  Issue(idp.path(), "idp", "localhost");
  testing::Pkey rsa = testing::NewRsaKey(), next = testing::NewP256Key();
  std::mutex mu;
  std::string served = nlohmann::json({{"keys", {testing::Jwk(rsa.get(), "k1")}}}).dump();
  int fetches = 0;
  LoopbackHttpServer provider(
      [&](const std::string& path) -> std::optional<std::string> {
        if (path != "/jwks") return std::nullopt;
        std::lock_guard<std::mutex> lock(mu);
        ++fetches;
        return served;
      },
      0, idp.path(), "idp");
  std::string url = "https://localhost:" + std::to_string(provider.port()) + "/jwks";
  TcpDaemon daemon(/*certificates=*/false,
                   {"--oidc-issuer", "https://idp.test", "--oidc-audience", "airlock",
                    "--oidc-jwks", url, "--oidc-jwks-ca", idp.File("ca.pem")});
  auto channel = daemon.Connect(/*with_certificate=*/false);
  ASSERT_TRUE(
      channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20)));
  int64_t now = time(nullptr);
  auto token = [&](EVP_PKEY* key, const std::string& alg, const std::string& kid,
                   const std::string& sub) {
    return testing::SignJwt(
        key, {{"alg", alg}, {"kid", kid}},
        {{"iss", "https://idp.test"}, {"aud", "airlock"}, {"sub", sub}, {"exp", now + 600}});
  };
  auto tenant = [&](const std::string& jwt) {
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    c.AddMetadata("authorization", "Bearer " + jwt);
    v1::QuotaReport report;
    grpc::Status status = v1::Sessions::NewStub(channel)->Quota(&c, {}, &report);
    return status.ok() ? report.tenant() : "refused: " + status.error_message();
  };
  EXPECT_EQ(tenant(token(rsa.get(), "RS256", "k1", "alice")), "oidc:https://idp.test#alice");
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(fetches, 1);  // at start; the cached set serves every call after
    served = nlohmann::json({{"keys", {testing::Jwk(next.get(), "k2")}}}).dump();
  }
  EXPECT_EQ(tenant(token(next.get(), "ES256", "k2", "bob")), "oidc:https://idp.test#bob");
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(fetches, 2);
}

}  // namespace
}  // namespace airlock
