// Reading a blob's bytes from a caller's descriptor, and the errors every store gives when bytes
// and digest disagree (one wording for both stores).
#ifndef AIRLOCK_PROVIDERS_BLOB_IO_H_
#define AIRLOCK_PROVIDERS_BLOB_IO_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace airlock::providers {

// Reads exactly n bytes from fd into data (retrying short reads and EINTR). done and size place
// them in the blob, for the message when the input ends early (InvalidArgument).
[[nodiscard]] absl::Status ReadExactly(int fd, char* data, size_t n, uint64_t done, uint64_t size);

// Put's answer when the bytes read hash to actual_hex rather than to digest.
absl::Status PutDigestMismatch(const std::string& digest, const std::string& actual_hex);

// Get's answer when the bytes written do not hash to digest; where names the store.
absl::Status GetDigestMismatch(const std::string& digest, const std::string& where);

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_BLOB_IO_H_
