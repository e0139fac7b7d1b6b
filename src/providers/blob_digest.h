// Blob names and the SHA-256 that checks them: a blob is named by its digest, written
// "sha256:" and 64 lowercase hex digits, and every store hashes the bytes it moves.
#ifndef AIRLOCK_PROVIDERS_BLOB_DIGEST_H_
#define AIRLOCK_PROVIDERS_BLOB_DIGEST_H_

#include <openssl/evp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::providers {

// The 64 hex digits of a digest written "sha256:<64 lowercase hex>"; InvalidArgument, saying
// how to write one, for anything else.
[[nodiscard]] absl::StatusOr<std::string> BlobDigestHex(absl::string_view digest);

// Incremental SHA-256 (OpenSSL). Not thread-safe; one per stream.
class Sha256 {
 public:
  Sha256();
  void Update(absl::string_view bytes);
  // The digest in lowercase hex; the object is then reset for a new stream.
  std::string FinishHex();

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

// SHA-256 of bytes, in lowercase hex.
std::string Sha256Hex(absl::string_view bytes);

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_BLOB_DIGEST_H_
