// For tests of bearer tokens: keys of an identity provider made on the spot, their JWK Set,
// and tokens signed with them as a provider would sign them.
#ifndef AIRLOCK_TESTING_TEST_JWT_H_
#define AIRLOCK_TESTING_TEST_JWT_H_

#include <openssl/evp.h>

#include <memory>
#include <string>

#include "nlohmann/json.hpp"

namespace airlock::testing {

using Pkey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

Pkey NewRsaKey(int bits = 2048);
Pkey NewP256Key();

// base64url without padding.
std::string Base64Url(const std::string& bytes);

// The public half of key as a JWK (RSA: n, e; EC: crv P-256, x, y) with this kid.
nlohmann::json Jwk(EVP_PKEY* key, const std::string& kid);

// header.claims.signature: signed by key with RS256 (RSA) or ES256 (EC), whatever header says.
std::string SignJwt(EVP_PKEY* key, const nlohmann::json& header, const nlohmann::json& claims);

}  // namespace airlock::testing

#endif  // AIRLOCK_TESTING_TEST_JWT_H_
