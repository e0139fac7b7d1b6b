#include "src/daemon/oidc_auth.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/common/file_util.h"
#include "src/testing/test_jwt.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

// Anyone who reaches the TCP port can send tokens: a flood of bad ones costs the audit log a
// bounded number of records, however they vary.
TEST(OidcAuthenticatorTest, RefusalsReachTheAuditLogBoundedByReasonAndInAll) {
  testing::TempDir dir;
  testing::Pkey key = testing::NewP256Key();
  std::string jwks = dir.File("jwks.json");
  ASSERT_TRUE(WriteFileAtomically(
                  jwks, nlohmann::json({{"keys", {testing::Jwk(key.get(), "k")}}}).dump(), 0600)
                  .ok());
  std::vector<std::string> records;
  absl::StatusOr<std::shared_ptr<OidcAuthenticator>> auth = OidcAuthenticator::Create(
      {.settings = {.issuer = "https://idp.test", .audience = "airlock"},
       .jwks_file = jwks,
       .refused = [&](const std::string& why) { records.push_back(why); }});
  ASSERT_TRUE(auth.ok()) << auth.status();
  auto call = [&](const std::string& authorization) {
    grpc::AuthMetadataProcessor::InputMetadata metadata;
    metadata.insert({"authorization", authorization});
    // The context is only looked at for calls without a token.
    return (*auth)->Process(metadata, nullptr, nullptr, nullptr);
  };
  for (int i = 0; i < 20; ++i) {
    grpc::Status status = call("Bearer garbage" + std::to_string(i));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_NE(status.error_message().find("not a JWT"), std::string::npos);
  }
  EXPECT_EQ(records.size(), 1u);  // one reason, once a minute
  for (int i = 0; i < 100; ++i) {
    std::string alg = "x" + std::to_string(i);
    call("Bearer " + testing::Base64Url("{\"alg\":\"" + alg + "\"}") + ".e30.");
  }
  EXPECT_EQ(records.size(), 30u);  // every reason differs: 30 a minute in all
  EXPECT_NE(records[1].find("algorithm \"x0\""), std::string::npos) << records[1];
}

}  // namespace
}  // namespace airlock
