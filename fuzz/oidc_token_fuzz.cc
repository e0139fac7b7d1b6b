// Fuzz target: bearer tokens and key sets as a network caller or an identity provider's
// jwks_uri sends them. Besides not crashing: a key set keeps at most kMaxJwksKeys keys, and no
// token verifies against a key whose private half the input cannot know (no forgery: alg none,
// HS256 with the public key, a bad signature, a swapped algorithm).
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/escaping.h"
#include "src/daemon/oidc_token.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// A fresh P-256 key, its private half thrown away: the provider's key set.
const airlock::Jwks& ProviderKeys() {
  static const airlock::Jwks* jwks = [] {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    unsigned char point[65];
    size_t n = 0;
    Check(key != nullptr && EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY,
                                                            point, 65, &n) == 1);
    EVP_PKEY_free(key);
    std::string p(reinterpret_cast<char*>(point), n);
    std::string text = "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"k1\",\"x\":\"" +
                       absl::WebSafeBase64Escape(p.substr(1, 32)) + "\",\"y\":\"" +
                       absl::WebSafeBase64Escape(p.substr(33, 32)) + "\"}]}";
    absl::StatusOr<airlock::Jwks> parsed = airlock::Jwks::Parse(text);
    Check(parsed.ok());
    return new airlock::Jwks(*std::move(parsed));
  }();
  return *jwks;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<airlock::Jwks> jwks = airlock::Jwks::Parse(text);
  Check(jwks.ok() ? !jwks->keys().empty() && jwks->keys().size() <= airlock::kMaxJwksKeys
                  : !jwks.status().message().empty());
  airlock::OidcSettings settings{.issuer = "https://idp.test", .audience = "airlock"};
  absl::StatusOr<airlock::OidcIdentity> id =
      airlock::VerifyOidcToken(text, ProviderKeys(), settings, 1800000000);
  Check(!id.ok() && absl::IsUnauthenticated(id.status()));
  return 0;
}
