#include "src/daemon/session_secrets.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "src/common/file_util.h"
#include "src/secrets/shared_sources.h"
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
  EXPECT_TRUE(secrets.GuestEnv("uid:1000", {}).empty());
  // One tenant's own CA: its guests trust it (and point their clients at the bundle), others not.
  std::string own = CertificatePem("own");
  secrets.set_tenant_guest_ca("uid:1000", own);
  EXPECT_EQ(secrets.GuestCaFor("uid:1000"), own);
  EXPECT_EQ(secrets.GuestCaFor("uid:2000"), "");
  EXPECT_FALSE(secrets.GuestEnv("uid:1000", {}).empty());
  EXPECT_TRUE(secrets.GuestEnv("uid:2000", {}).empty());
  secrets.set_guest_ca(*pem);
  EXPECT_EQ(secrets.GuestCaFor("uid:1000"), *pem + own);
  EXPECT_EQ(secrets.GuestCaFor("uid:2000"), *pem);
  std::vector<std::string> env = secrets.GuestEnv("uid:2000", {});
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

// A 1Password of the operator's: the one reference it holds, and words that name the vault.
class OperatorsOp : public secrets::SecretSource {
 public:
  absl::StatusOr<std::string> Resolve(const secrets::SecretSpec& spec) override {
    ++reads;
    if (spec.source == "op://Ops/github/token") return value;
    return absl::NotFoundError("\"Ops\" vault has no item \"deploy\"");
  }
  std::string value = "ghp-operators";
  int reads = 0;
};

TEST(SessionSecretsTest, AirlockdReadsOnlyTheSourcesItsOperatorSharesWithTheCaller) {
  auto op = std::make_unique<OperatorsOp>();
  OperatorsOp* ops = op.get();
  SessionSecrets secrets(std::move(op), nullptr);
  absl::StatusOr<secrets::SharedSources> shared = secrets::SharedSources::Parse(
      "github op://Ops/github/token@api.github.com uid:1000\n"
      "deploy op://Ops/deploy/key@deploy.test *\n");
  ASSERT_TRUE(shared.ok()) << shared.status();
  secrets.set_shared(*std::move(shared));

  // A reference of the caller's own is read by the client: airlockd never runs its `op` for it.
  absl::StatusOr<std::vector<SecretGrant>> grants =
      secrets.Bind("s1", "uid:1000", {{"GH=op://Ops/github/token@evil.test", ""}}, {});
  EXPECT_EQ(grants.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(grants.status().message().find("read by the client"), std::string::npos);
  EXPECT_EQ(ops->reads, 0);

  // Another tenant, or a host the line does not name: refused, nothing read.
  grants = secrets.Bind("s2", "uid:2000", {{"GH=shared:github@api.github.com", ""}}, {});
  EXPECT_EQ(grants.status().code(), absl::StatusCode::kNotFound);
  grants = secrets.Bind("s1", "uid:1000", {{"GH=shared:github@evil.test", ""}}, {});
  EXPECT_EQ(grants.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ops->reads, 0);
  EXPECT_FALSE(secrets.Available("s1", "GH"));

  // The tenant it is shared with: held, and the grant names the shared source, not the vault.
  grants = secrets.Bind("s1", "uid:1000", {{"GH=shared:github@api.github.com", ""}}, {});
  ASSERT_TRUE(grants.ok()) << grants.status();
  ASSERT_EQ(grants->size(), 1u);
  EXPECT_EQ((*grants)[0].spec.source, "shared:github");
  EXPECT_TRUE(secrets.Available("s1", "GH"));
  std::vector<net::ProxySecret> proxy = secrets.ForProxy("s1", *grants);
  ASSERT_EQ(proxy.size(), 1u);
  EXPECT_EQ(proxy[0].value, "ghp-operators");

  // Rotated: read again at resume.
  ops->value = "ghp-rotated";
  ASSERT_TRUE(secrets.Refresh("s1", "uid:1000", *grants).ok());
  EXPECT_EQ(secrets.ForProxy("s1", *grants)[0].value, "ghp-rotated");

  // A source that fails: the tenant hears no vault or item names.
  grants = secrets.Bind("s3", "uid:3000", {{"K=shared:deploy@deploy.test", ""}}, {});
  EXPECT_FALSE(grants.ok());
  EXPECT_EQ(grants.status().message().find("Ops"), std::string::npos) << grants.status();
  EXPECT_NE(grants.status().message().find("airlockd's log"), std::string::npos);
}

}  // namespace
}  // namespace airlock
