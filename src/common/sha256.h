// SHA-256 and HMAC-SHA256 for the host side: the one place that calls OpenSSL's digests.
// (The guest agent, which links no OpenSSL, has its own in src/guest/guest_sha256.h.)
#ifndef AIRLOCK_COMMON_SHA256_H_
#define AIRLOCK_COMMON_SHA256_H_

#include <openssl/evp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock {

// Incremental SHA-256 of a stream. Not thread-safe; one per stream.
class Sha256 {
 public:
  Sha256();
  void Update(absl::string_view bytes);
  // The digest as 32 raw bytes, or in lowercase hex; either resets the object for a new stream.
  std::string FinishRaw();
  std::string FinishHex();

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

// SHA-256 of bytes, in lowercase hex.
std::string Sha256Hex(absl::string_view bytes);

// SHA-256 of a file's content, in lowercase hex; the error names the file.
[[nodiscard]] absl::StatusOr<std::string> Sha256FileHex(const std::string& path);

// HMAC-SHA256 of data under key: 32 raw bytes, or in lowercase hex.
std::string HmacSha256(absl::string_view key, absl::string_view data);
std::string HmacSha256Hex(absl::string_view key, absl::string_view data);

// Whether a secret a caller gave (a token, a MAC) is the expected one, in time that does not
// depend on where they differ. An empty expected secret matches nothing.
bool SecretEquals(absl::string_view given, absl::string_view expected);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_SHA256_H_
