// airlockd over TCP with mutual TLS: a client with a certificate from the configured CA is its
// own tenant (cert:CN); a client without one cannot even connect.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/airlock/v1/airlock.grpc.pb.h"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/common/subprocess.h"
#include "tests/cli_runner.h"
#include "tests/test_certs.h"

namespace airlock {
namespace {

constexpr char kServerName[] = "airlock-test-server";

std::string Read(const std::string& path) { return *ReadFileToString(path, 1 << 20); }

TEST(TlsTest, CertificateHoldersAreTheirOwnTenantAndOthersCannotConnect) {
  char tmpl[] = "/tmp/airlock-tls-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  chmod(dir.c_str(), 0755);  // the VMM (uid 65534) reads the image through here
  MakeTestCa(dir);
  Issue(dir, "server", kServerName);
  Issue(dir, "client", "ci-agent");

  // A second daemon with its own state, sharing the images and kernel of the first.
  std::string home = dir + "/home";
  ASSERT_EQ(mkdir(home.c_str(), 0755), 0);
  HostPaths paths = DefaultHostPaths();
  ASSERT_EQ(symlink(paths.images.c_str(), (home + "/images").c_str()), 0);
  ASSERT_EQ(symlink(DirName(paths.kernel).c_str(), (home + "/kernel").c_str()), 0);
  std::string address = "127.0.0.1:" + std::to_string(FreePort());
  std::string daemon = std::string(AIRLOCK_BINARY);
  daemon = daemon.substr(0, daemon.rfind('/')) + "/airlockd";
  pid_t pid = fork();
  if (pid == 0) {
    setenv("AIRLOCK_HOME", home.c_str(), 1);
    execl(daemon.c_str(), daemon.c_str(), "--socket", (dir + "/sock").c_str(), "--listen-tcp",
          address.c_str(), "--tls-cert", (dir + "/server.pem").c_str(), "--tls-key",
          (dir + "/server.key").c_str(), "--tls-client-ca", (dir + "/ca.pem").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  struct Cleanup {
    pid_t pid;
    std::string dir;
    ~Cleanup() {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
      RemoveTree(dir).IgnoreError();
    }
  } cleanup{pid, dir};

  grpc::SslCredentialsOptions with_cert;
  with_cert.pem_root_certs = Read(dir + "/ca.pem");
  with_cert.pem_private_key = Read(dir + "/client.key");
  with_cert.pem_cert_chain = Read(dir + "/client.pem");
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(kServerName);
  auto channel = grpc::CreateCustomChannel(address, grpc::SslCredentials(with_cert), args);
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
  grpc::SslCredentialsOptions no_cert;
  no_cert.pem_root_certs = with_cert.pem_root_certs;
  auto anonymous = grpc::CreateCustomChannel(address, grpc::SslCredentials(no_cert), args);
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

}  // namespace
}  // namespace airlock
