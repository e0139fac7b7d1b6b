#include "src/testing/test_jwt.h"

#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/rsa.h>

#include "absl/strings/escaping.h"

namespace airlock::testing {
namespace {

std::string BnBytes(EVP_PKEY* key, const char* name) {
  BIGNUM* bn = nullptr;
  EXPECT_EQ(EVP_PKEY_get_bn_param(key, name, &bn), 1);
  std::string out(static_cast<size_t>(BN_num_bytes(bn)), '\0');
  BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
  BN_free(bn);
  return out;
}

}  // namespace

Pkey NewRsaKey(int bits) {
  return Pkey(EVP_RSA_gen(static_cast<unsigned int>(bits)), EVP_PKEY_free);
}

Pkey NewP256Key() { return Pkey(EVP_EC_gen("P-256"), EVP_PKEY_free); }

std::string Base64Url(const std::string& bytes) { return absl::WebSafeBase64Escape(bytes); }

nlohmann::json Jwk(EVP_PKEY* key, const std::string& kid) {
  if (EVP_PKEY_is_a(key, "RSA")) {
    return {{"kty", "RSA"},
            {"kid", kid},
            {"n", Base64Url(BnBytes(key, OSSL_PKEY_PARAM_RSA_N))},
            {"e", Base64Url(BnBytes(key, OSSL_PKEY_PARAM_RSA_E))}};
  }
  unsigned char point[65];
  size_t n = 0;
  EXPECT_EQ(EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point,
                                            sizeof(point), &n),
            1);
  EXPECT_EQ(n, 65u);
  std::string p(reinterpret_cast<char*>(point), n);
  return {{"kty", "EC"},
          {"crv", "P-256"},
          {"kid", kid},
          {"x", Base64Url(p.substr(1, 32))},
          {"y", Base64Url(p.substr(33, 32))}};
}

std::string SignJwt(EVP_PKEY* key, const nlohmann::json& header, const nlohmann::json& claims) {
  std::string input = Base64Url(header.dump()) + "." + Base64Url(claims.dump());
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EXPECT_EQ(EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key), 1);
  size_t n = 0;
  const auto* data = reinterpret_cast<const unsigned char*>(input.data());
  EXPECT_EQ(EVP_DigestSign(ctx.get(), nullptr, &n, data, input.size()), 1);
  std::string sig(n, '\0');
  EXPECT_EQ(EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &n, data,
                           input.size()),
            1);
  sig.resize(n);
  if (EVP_PKEY_is_a(key, "EC")) {  // DER to r || s, as JWS writes ES256
    const auto* der = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG* ecdsa = d2i_ECDSA_SIG(nullptr, &der, static_cast<long>(sig.size()));
    std::string raw(64, '\0');
    BN_bn2binpad(ECDSA_SIG_get0_r(ecdsa), reinterpret_cast<unsigned char*>(raw.data()), 32);
    BN_bn2binpad(ECDSA_SIG_get0_s(ecdsa), reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
    ECDSA_SIG_free(ecdsa);
    sig = raw;
  }
  return input + "." + Base64Url(sig);
}

}  // namespace airlock::testing
