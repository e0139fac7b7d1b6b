#include "src/daemon/session_secrets.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "src/common/file_util.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

std::string CertificatePem(const std::string& label) {
  return (*net::SessionCa::Create(label))->CertificatePem();
}

TEST(SessionSecretsTest, AGuestCaFileGivesGuestsItsCertificatesOnly) {
  testing::TempDir dir;
  std::string a = CertificatePem("a"), b = CertificatePem("b");
  std::string path = dir.File("ca.pem");
  ASSERT_TRUE(WriteFileAtomically(path, "a company's CAs\n" + a + "\nsome notes\n" + b, 0644).ok());
  absl::StatusOr<std::string> pem = ReadGuestCa(path);
  ASSERT_TRUE(pem.ok()) << pem.status();
  EXPECT_EQ(*pem, a + b);  // the notes stay behind

  // Every command then points TLS clients at the bundle that holds it, with or without secrets.
  SessionSecrets secrets(nullptr, nullptr);
  EXPECT_TRUE(secrets.GuestEnv({}).empty());
  secrets.set_guest_ca(*pem);
  std::vector<std::string> env = secrets.GuestEnv({});
  EXPECT_NE(std::find(env.begin(), env.end(), std::string("SSL_CERT_FILE=") + kGuestCaBundle),
            env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), std::string("NODE_EXTRA_CA_CERTS=") + kGuestCaFile),
            env.end());
}

TEST(SessionSecretsTest, AGuestCaFileThatIsNotJustCertificatesIsRefusedWithWhatToFix) {
  testing::TempDir dir;
  auto refusal = [&](const std::string& content) {
    std::string path = dir.File("ca.pem");
    EXPECT_TRUE(WriteFileAtomically(path, content, 0644).ok());
    absl::StatusOr<std::string> pem = ReadGuestCa(path);
    EXPECT_FALSE(pem.ok());
    return std::string(pem.status().message());
  };
  std::string cert = CertificatePem("c");
  std::string key = (*net::SessionCa::Create("k"))->KeyPem();
  EXPECT_NE(refusal(cert + key).find("holds a private key"), std::string::npos);
  EXPECT_NE(refusal("").find("holds no PEM certificate"), std::string::npos);
  std::string damaged = cert;
  damaged[damaged.size() / 2] = '!';
  EXPECT_NE(refusal(CertificatePem("d") + damaged).find("does not parse"), std::string::npos);
  absl::StatusOr<std::string> missing = ReadGuestCa(dir.File("none.pem"));
  EXPECT_NE(missing.status().message().find("--guest-ca " + dir.File("none.pem")),
            std::string::npos)
      << missing.status();
}

}  // namespace
}  // namespace airlock
