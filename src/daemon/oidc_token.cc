#include "src/daemon/oidc_token.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

using nlohmann::json;

absl::Status Unauthenticated(absl::string_view why) {
  return absl::UnauthenticatedError(absl::StrCat("the bearer token was refused: ", why));
}

// base64url without padding (RFC 7515 section 2); padding is refused too.
bool DecodeBase64Url(absl::string_view in, std::string* out) {
  if (in.find('=') != absl::string_view::npos) return false;
  return absl::WebSafeBase64Unescape(in, out);
}

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>>;
using ParamBldPtr = std::unique_ptr<OSSL_PARAM_BLD, Deleter<OSSL_PARAM_BLD, OSSL_PARAM_BLD_free>>;
using ParamPtr = std::unique_ptr<OSSL_PARAM, Deleter<OSSL_PARAM, OSSL_PARAM_free>>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, Deleter<EVP_PKEY_CTX, EVP_PKEY_CTX_free>>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, Deleter<EVP_MD_CTX, EVP_MD_CTX_free>>;
using EcdsaSigPtr = std::unique_ptr<ECDSA_SIG, Deleter<ECDSA_SIG, ECDSA_SIG_free>>;

std::shared_ptr<EVP_PKEY> FromParams(const char* type, OSSL_PARAM_BLD* bld) {
  ParamPtr params(OSSL_PARAM_BLD_to_param(bld));
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* pkey = nullptr;
  if (params == nullptr || ctx == nullptr || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &pkey, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) {
    return nullptr;
  }
  return std::shared_ptr<EVP_PKEY>(pkey, EVP_PKEY_free);
}

// A field of a JWK: base64url bytes, at most max_bytes once decoded.
bool KeyBytes(const json& jwk, const char* name, size_t max_bytes, std::string* out) {
  auto it = jwk.find(name);
  return it != jwk.end() && it->is_string() &&
         it->get_ref<const std::string&>().size() <= max_bytes * 4 / 3 + 4 &&
         DecodeBase64Url(it->get_ref<const std::string&>(), out) && !out->empty() &&
         out->size() <= max_bytes;
}

std::shared_ptr<EVP_PKEY> RsaKey(const json& jwk) {
  std::string n, e;
  if (!KeyBytes(jwk, "n", 1024, &n) || !KeyBytes(jwk, "e", 8, &e)) return nullptr;
  BnPtr bn_n(BN_bin2bn(reinterpret_cast<const unsigned char*>(n.data()), static_cast<int>(n.size()),
                       nullptr));
  BnPtr bn_e(BN_bin2bn(reinterpret_cast<const unsigned char*>(e.data()), static_cast<int>(e.size()),
                       nullptr));
  ParamBldPtr bld(OSSL_PARAM_BLD_new());
  if (bn_n == nullptr || bn_e == nullptr || bld == nullptr ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1) {
    return nullptr;
  }
  std::shared_ptr<EVP_PKEY> key = FromParams("RSA", bld.get());
  if (key == nullptr || EVP_PKEY_get_bits(key.get()) < 2048) return nullptr;
  return key;
}

std::shared_ptr<EVP_PKEY> P256Key(const json& jwk) {
  std::string x, y;
  if (!KeyBytes(jwk, "x", 32, &x) || !KeyBytes(jwk, "y", 32, &y) || x.size() != 32 ||
      y.size() != 32) {
    return nullptr;
  }
  std::string point = "\x04" + x + y;  // uncompressed
  ParamBldPtr bld(OSSL_PARAM_BLD_new());
  if (bld == nullptr ||
      OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) !=
          1 ||
      OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                       point.size()) != 1) {
    return nullptr;
  }
  // OpenSSL checks that the point is on the curve.
  return FromParams("EC", bld.get());
}

std::string StringField(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

// A JSON object from a base64url segment, or null.
json DecodeSegment(absl::string_view segment) {
  std::string bytes;
  if (!DecodeBase64Url(segment, &bytes)) return nullptr;
  json value = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  return value.is_object() ? value : json(nullptr);
}

bool Verify(const Jwks::Key& key, absl::string_view signed_part, const std::string& signature) {
  std::string der;
  const std::string* sig = &signature;
  if (!key.rsa) {
    // JWS ES256 signatures are r || s, 32 bytes each; OpenSSL wants DER.
    if (signature.size() != 64) return false;
    EcdsaSigPtr ecdsa(ECDSA_SIG_new());
    BIGNUM* r = BN_bin2bn(reinterpret_cast<const unsigned char*>(signature.data()), 32, nullptr);
    BIGNUM* s =
        BN_bin2bn(reinterpret_cast<const unsigned char*>(signature.data()) + 32, 32, nullptr);
    if (ecdsa == nullptr || r == nullptr || s == nullptr ||
        ECDSA_SIG_set0(ecdsa.get(), r, s) != 1) {
      BN_free(r);
      BN_free(s);
      return false;
    }
    unsigned char* out = nullptr;
    int n = i2d_ECDSA_SIG(ecdsa.get(), &out);
    if (n <= 0) return false;
    der.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    OPENSSL_free(out);
    sig = &der;
  }
  MdCtxPtr ctx(EVP_MD_CTX_new());
  return ctx != nullptr &&
         EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.pkey.get()) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig->data()),
                          sig->size(), reinterpret_cast<const unsigned char*>(signed_part.data()),
                          signed_part.size()) == 1;
}

// A NumericDate claim as whole seconds: a number within ten thousand years of 1970.
bool TimeClaim(const json& value, int64_t* out) {
  constexpr double kLimit = 3.2e11;
  if (!value.is_number()) return false;
  double t = value.is_number_unsigned()  ? static_cast<double>(value.get<uint64_t>())
             : value.is_number_integer() ? static_cast<double>(value.get<int64_t>())
                                         : value.get<double>();
  if (!(t > -kLimit && t < kLimit)) return false;  // NaN too
  *out = static_cast<int64_t>(t);
  return true;
}

// An identity claim: printable ASCII without spaces, at most 255 bytes (it becomes a tenant).
bool PlainClaim(const std::string& value) {
  if (value.empty() || value.size() > 255) return false;
  for (char c : value) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<Jwks> Jwks::Parse(absl::string_view text) {
  if (text.size() > kMaxJwksBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the JWKS is larger than ", kMaxJwksBytes >> 20, " MiB"));
  }
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto keys = doc.is_object() ? doc.find("keys") : doc.end();
  if (!doc.is_object() || keys == doc.end() || !keys->is_array()) {
    return absl::InvalidArgumentError(
        "not a JWKS: expected a JSON object with a \"keys\" list (the provider's jwks_uri)");
  }
  Jwks out;
  for (const json& jwk : *keys) {
    if (out.keys_.size() == kMaxJwksKeys) break;
    if (!jwk.is_object() || StringField(jwk, "use") == "enc") continue;
    Key key;
    key.kid = StringField(jwk, "kid");
    std::string kty = StringField(jwk, "kty");
    if (kty == "RSA") {
      key.rsa = true;
      key.pkey = RsaKey(jwk);
    } else if (kty == "EC" && StringField(jwk, "crv") == "P-256") {
      key.pkey = P256Key(jwk);
    }
    if (key.pkey != nullptr) out.keys_.push_back(std::move(key));
  }
  if (out.keys_.empty()) {
    return absl::InvalidArgumentError(
        "the JWKS holds no usable key: RSA keys of at least 2048 bits and EC keys on P-256 "
        "are used");
  }
  return out;
}

absl::StatusOr<OidcIdentity> VerifyOidcToken(absl::string_view token, const Jwks& jwks,
                                             const OidcSettings& settings, int64_t now_unix) {
  if (token.size() > kMaxTokenBytes) {
    return Unauthenticated(absl::StrCat("it is larger than ", kMaxTokenBytes >> 10, " KiB"));
  }
  std::vector<absl::string_view> parts = absl::StrSplit(token, '.');
  if (parts.size() != 3) return Unauthenticated("it is not a JWT (three base64url parts)");
  json header = DecodeSegment(parts[0]);
  json claims = DecodeSegment(parts[1]);
  std::string signature;
  if (header.is_null() || claims.is_null() || !DecodeBase64Url(parts[2], &signature)) {
    return Unauthenticated("it is not a JWT (three base64url parts, two of them JSON objects)");
  }
  std::string alg = StringField(header, "alg");
  if (alg != "RS256" && alg != "ES256") {
    return Unauthenticated(absl::StrCat("algorithm \"", alg.substr(0, 16),
                                        "\" is not accepted (RS256 and ES256 are)"));
  }
  if (header.contains("crit")) return Unauthenticated("it has critical header extensions");
  bool rsa = alg == "RS256";
  std::string kid = StringField(header, "kid");
  absl::string_view signed_part(token.data(), parts[0].size() + 1 + parts[1].size());
  bool known = false, verified = false;
  for (const Jwks::Key& key : jwks.keys()) {
    if (key.rsa != rsa || (!kid.empty() && key.kid != kid)) continue;
    known = true;
    if (Verify(key, signed_part, signature)) {
      verified = true;
      break;
    }
  }
  if (!known) {
    return Unauthenticated(kid.empty() ? absl::StrCat("the provider has no ", alg, " key")
                                       : "its key id is not among the provider's keys");
  }
  if (!verified) return Unauthenticated("its signature does not verify");

  if (StringField(claims, "iss") != settings.issuer) {
    return Unauthenticated(absl::StrCat("its issuer is not ", settings.issuer));
  }
  bool for_us = false;
  if (auto aud = claims.find("aud"); aud != claims.end()) {
    if (aud->is_string()) for_us = aud->get_ref<const std::string&>() == settings.audience;
    if (aud->is_array()) {
      for (const json& a : *aud)
        for_us |= a.is_string() && a.get<std::string>() == settings.audience;
    }
  }
  if (!for_us) return Unauthenticated(absl::StrCat("it is not for audience ", settings.audience));
  auto exp = claims.find("exp");
  int64_t expires = 0;
  if (exp == claims.end() || !TimeClaim(*exp, &expires)) {
    return Unauthenticated("it has no expiry (exp)");
  }
  if (now_unix > expires + settings.skew_seconds) return Unauthenticated("it has expired");
  if (auto nbf = claims.find("nbf"); nbf != claims.end()) {
    int64_t not_before = 0;
    if (!TimeClaim(*nbf, &not_before)) return Unauthenticated("its nbf is not a time");
    if (now_unix + settings.skew_seconds < not_before) {
      return Unauthenticated("it is not valid yet (nbf)");
    }
  }
  OidcIdentity id;
  id.issuer = settings.issuer;
  id.subject = StringField(claims, "sub");
  id.expires_unix = expires;
  if (!PlainClaim(id.subject)) {
    return Unauthenticated("its subject (sub) is missing or not plain text of at most 255 bytes");
  }
  if (auto groups = claims.find("groups"); groups != claims.end() && groups->is_array()) {
    for (const json& g : *groups) {
      if (id.groups.size() == 64) break;
      if (g.is_string() && PlainClaim(g.get<std::string>()))
        id.groups.push_back(g.get<std::string>());
    }
  }
  return id;
}

}  // namespace airlock
