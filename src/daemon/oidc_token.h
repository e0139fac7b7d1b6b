// Bearer tokens from an OpenID Connect identity provider: JWTs (RFC 7519) in compact JWS form,
// checked with OpenSSL against the provider's public keys, a JWK Set (RFC 7517). Only RS256
// (RSA of at least 2048 bits) and ES256 (P-256) are accepted: never `none`, never HS*, so a
// token "signed" with a public key as an HMAC secret is refused. The tenant of a verified token
// is `oidc:<issuer>#<subject>`.
//
// Tokens and key sets are untrusted bytes (fuzz/oidc_token_fuzz.cc): sizes are capped before
// anything is decoded, and every failure is UNAUTHENTICATED (tokens) or INVALID_ARGUMENT (key
// sets) saying what was wrong.
#ifndef AIRLOCK_DAEMON_OIDC_TOKEN_H_
#define AIRLOCK_DAEMON_OIDC_TOKEN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct evp_pkey_st EVP_PKEY;

namespace airlock {

inline constexpr size_t kMaxTokenBytes = 16 << 10;
inline constexpr size_t kMaxJwksBytes = 1 << 20;
inline constexpr size_t kMaxJwksKeys = 64;

struct OidcSettings {
  std::string issuer;         // "iss" must be exactly this
  std::string audience;       // "aud" (a string, or a list) must name this
  int64_t skew_seconds = 60;  // allowed clock difference for exp and nbf
};

struct OidcIdentity {
  std::string issuer;
  std::string subject;
  std::vector<std::string> groups;  // the "groups" claim, if any
  int64_t expires_unix = 0;
  std::string Tenant() const { return "oidc:" + issuer + "#" + subject; }
};

// The provider's public keys. Keys of other types, curves or uses ("use": "enc") are skipped.
class Jwks {
 public:
  // {"keys": [...]}: RSA keys (n, e) of at least 2048 bits and EC keys on P-256 (x, y).
  // INVALID_ARGUMENT when the text is not a key set or holds no usable key.
  [[nodiscard]] static absl::StatusOr<Jwks> Parse(absl::string_view json);

  struct Key {
    std::string kid;
    bool rsa = false;  // else EC P-256
    std::shared_ptr<EVP_PKEY> pkey;
  };
  const std::vector<Key>& keys() const { return keys_; }

 private:
  std::vector<Key> keys_;
};

// The identity a token proves: signed by a key of jwks (the one its "kid" names, or any of the
// right type when it names none) with RS256 or ES256, issued by settings.issuer for
// settings.audience, with "exp" after and "nbf" (if any) before now_unix, give or take the
// skew, and a "sub". UNAUTHENTICATED saying what failed otherwise.
[[nodiscard]] absl::StatusOr<OidcIdentity> VerifyOidcToken(absl::string_view token,
                                                           const Jwks& jwks,
                                                           const OidcSettings& settings,
                                                           int64_t now_unix);

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_OIDC_TOKEN_H_
