// Blob names: a blob is named by its digest, written "sha256:" and 64 lowercase hex digits,
// and every store hashes the bytes it moves (src/common/sha256.h).
#ifndef AIRLOCK_PROVIDERS_BLOB_DIGEST_H_
#define AIRLOCK_PROVIDERS_BLOB_DIGEST_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/common/sha256.h"  // the digest that names a blob

namespace airlock::providers {

// The 64 hex digits of a digest written "sha256:<64 lowercase hex>"; InvalidArgument, saying
// how to write one, for anything else.
[[nodiscard]] absl::StatusOr<std::string> BlobDigestHex(absl::string_view digest);

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_BLOB_DIGEST_H_
