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
       .jwks = jwks,
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

// The key set comes from a file or over HTTPS, never plain HTTP; one that cannot be had stops
// airlockd from starting, saying why.
TEST(OidcAuthenticatorTest, KeysComeFromAFileOrHttpsOnly) {
  auto create = [](const std::string& jwks) {
    return OidcAuthenticator::Create(
        {.settings = {.issuer = "https://idp.test", .audience = "airlock"}, .jwks = jwks});
  };
  absl::StatusOr<std::shared_ptr<OidcAuthenticator>> http = create("http://idp.test/jwks");
  EXPECT_EQ(http.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(http.status().message().find("must come over https://"), std::string::npos);
  absl::StatusOr<std::shared_ptr<OidcAuthenticator>> down =
      create("https://127.0.0.1:9/jwks");  // nothing listens there
  EXPECT_FALSE(down.ok());
  EXPECT_NE(down.status().message().find("fetching the provider's keys from"), std::string::npos)
      << down.status();
  EXPECT_FALSE(create("/nonexistent/jwks.json").ok());
}

}  // namespace
}  // namespace airlock
