#include "src/daemon/oidc_token.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <memory>
#include <string>

#include "nlohmann/json.hpp"
#include "src/common/sha256.h"
#include "src/testing/test_jwt.h"

namespace airlock {
namespace {

using nlohmann::json;
using testing::Jwk;
using testing::Pkey;

std::string B64(const std::string& bytes) { return testing::Base64Url(bytes); }
std::string Sign(EVP_PKEY* key, const json& header, const json& claims) {
  return testing::SignJwt(key, header, claims);
}

constexpr int64_t kNow = 1800000000;
const OidcSettings kSettings{.issuer = "https://idp.test", .audience = "airlock"};

json Claims() {
  return {{"iss", "https://idp.test"}, {"aud", "airlock"}, {"sub", "alice"},
          {"exp", kNow + 300},         {"nbf", kNow - 10}, {"groups", {"dev", "ops"}}};
}

class OidcTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(rsa_, nullptr);
    ASSERT_NE(ec_, nullptr);
    absl::StatusOr<Jwks> jwks =
        Jwks::Parse(json({{"keys", {Jwk(rsa_.get(), "r1"), Jwk(ec_.get(), "e1")}}}).dump());
    ASSERT_TRUE(jwks.ok()) << jwks.status();
    jwks_ = *std::move(jwks);
  }
  absl::StatusOr<OidcIdentity> Check(const std::string& token) {
    return VerifyOidcToken(token, jwks_, kSettings, kNow);
  }
  // Refused, with `says` in the reason.
  void ExpectRefused(const std::string& token, const std::string& says) {
    absl::StatusOr<OidcIdentity> id = Check(token);
    EXPECT_TRUE(absl::IsUnauthenticated(id.status())) << says << ": " << id.status();
    EXPECT_NE(id.status().message().find(says), absl::string_view::npos) << id.status();
  }
  Pkey rsa_ = testing::NewRsaKey();
  Pkey ec_ = testing::NewP256Key();
  Jwks jwks_;
};

TEST_F(OidcTokenTest, Rs256AndEs256TokensOfTheProviderNameTheirSubject) {
  for (EVP_PKEY* key : {rsa_.get(), ec_.get()}) {
    bool rsa = EVP_PKEY_is_a(key, "RSA");
    json header = {{"alg", rsa ? "RS256" : "ES256"}, {"kid", rsa ? "r1" : "e1"}};
    absl::StatusOr<OidcIdentity> id = Check(Sign(key, header, Claims()));
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(id->Tenant(), "oidc:https://idp.test#alice");
    EXPECT_EQ(id->groups, (std::vector<std::string>{"dev", "ops"}));
    EXPECT_EQ(id->expires_unix, kNow + 300);
  }
  // No kid: any key of the right type; an audience list that names us.
  json claims = Claims();
  claims["aud"] = {"other", "airlock"};
  EXPECT_TRUE(Check(Sign(rsa_.get(), {{"alg", "RS256"}}, claims)).ok());
  // Within the skew of a minute either way.
  claims = Claims();
  claims["exp"] = kNow - 30;
  claims["nbf"] = kNow + 30;
  EXPECT_TRUE(Check(Sign(ec_.get(), {{"alg", "ES256"}}, claims)).ok());
}

TEST_F(OidcTokenTest, EveryBadTokenIsRefusedWithItsReason) {
  json rs = {{"alg", "RS256"}, {"kid", "r1"}};
  auto with = [](const char* key, json value) {
    json c = Claims();
    c[key] = std::move(value);
    return c;
  };
  ExpectRefused(Sign(rsa_.get(), rs, with("exp", kNow - 120)), "it has expired");
  ExpectRefused(Sign(rsa_.get(), rs, with("nbf", kNow + 120)), "not valid yet");
  ExpectRefused(Sign(rsa_.get(), rs, with("iss", "https://evil.test")), "issuer");
  ExpectRefused(Sign(rsa_.get(), rs, with("aud", "someone-else")), "audience");
  ExpectRefused(Sign(rsa_.get(), rs, with("aud", json::array({"a", "b"}))), "audience");
  json no_exp = Claims();
  no_exp.erase("exp");
  ExpectRefused(Sign(rsa_.get(), rs, no_exp), "no expiry");
  ExpectRefused(Sign(rsa_.get(), rs, with("exp", 1e300)), "no expiry");
  ExpectRefused(Sign(rsa_.get(), rs, with("sub", "")), "subject");
  ExpectRefused(Sign(rsa_.get(), rs, with("sub", "a\nb")), "subject");
  ExpectRefused(Sign(rsa_.get(), {{"alg", "RS256"}, {"kid", "nope"}}, Claims()), "key id");
  // An RS256 header on an EC signature, and the other way round.
  ExpectRefused(Sign(ec_.get(), rs, Claims()), "signature does not verify");
  ExpectRefused(Sign(rsa_.get(), {{"alg", "ES256"}, {"kid", "e1"}}, Claims()), "signature");

  // Unsigned (alg none), and HS256 with the provider's public key as the HMAC secret.
  std::string body = B64(json({{"alg", "none"}}).dump()) + "." + B64(Claims().dump());
  ExpectRefused(body + ".", "algorithm \"none\" is not accepted");
  std::string hs = B64(json({{"alg", "HS256"}, {"kid", "r1"}}).dump()) + "." + B64(Claims().dump());
  std::string secret = json({{"keys", {Jwk(rsa_.get(), "r1")}}}).dump();
  ExpectRefused(hs + "." + B64(HmacSha256(secret, hs)), "algorithm \"HS256\" is not accepted");

  // A payload changed after signing.
  std::string good = Sign(rsa_.get(), rs, Claims());
  size_t first = good.find('.'), second = good.find('.', first + 1);
  std::string tampered =
      good.substr(0, first + 1) + B64(with("sub", "root").dump()) + good.substr(second);
  ExpectRefused(tampered, "signature does not verify");
  EXPECT_TRUE(Check(good).ok());

  for (const std::string& garbage :
       {std::string(), std::string("abc"), std::string("a.b"), std::string("a.b.c.d"),
        std::string("e30.e30."), std::string("!!!.@@@.###"), good + "=",
        B64("[]") + "." + B64("{}") + ".", std::string(20000, 'a')}) {
    EXPECT_TRUE(absl::IsUnauthenticated(Check(garbage).status())) << garbage.substr(0, 40);
  }
}

TEST_F(OidcTokenTest, KeySetsOnlyKeepKeysThatAreSafeToUse) {
  EXPECT_TRUE(absl::IsInvalidArgument(Jwks::Parse("not json").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Jwks::Parse("{\"keys\": 3}").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Jwks::Parse(std::string(kMaxJwksBytes + 1, ' ')).status()));
  Pkey weak = testing::NewRsaKey(1024);
  absl::StatusOr<Jwks> only_weak = Jwks::Parse(json({{"keys", {Jwk(weak.get(), "w")}}}).dump());
  EXPECT_TRUE(absl::IsInvalidArgument(only_weak.status()));
  EXPECT_NE(only_weak.status().message().find("at least 2048 bits"), absl::string_view::npos);
  // A point off the curve, an unknown type, a key for encryption: skipped; the good one stays.
  json off_curve = Jwk(ec_.get(), "bad");
  off_curve["y"] = B64(std::string(32, '\x01'));
  json enc = Jwk(rsa_.get(), "enc");
  enc["use"] = "enc";
  absl::StatusOr<Jwks> mixed = Jwks::Parse(
      json({{"keys", {off_curve, {{"kty", "oct"}, {"k", "c2VjcmV0"}}, enc, Jwk(ec_.get(), "e1")}}})
          .dump());
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ASSERT_EQ(mixed->keys().size(), 1u);
  EXPECT_EQ(mixed->keys()[0].kid, "e1");
}

}  // namespace
}  // namespace airlock
