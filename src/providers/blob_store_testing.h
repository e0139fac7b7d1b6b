// For the blob stores' tests: digests, input files and reading a blob back.
#ifndef AIRLOCK_PROVIDERS_BLOB_STORE_TESTING_H_
#define AIRLOCK_PROVIDERS_BLOB_STORE_TESTING_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "absl/status/statusor.h"
#include "src/common/file_util.h"
#include "src/common/unique_fd.h"
#include "src/providers/blob_digest.h"
#include "src/providers/blob_store.h"

namespace airlock::providers {

inline std::string DigestOf(const std::string& bytes) { return "sha256:" + Sha256Hex(bytes); }

// A file of dir holding bytes, open for reading from its start.
inline UniqueFd Input(const std::string& dir, const std::string& bytes) {
  std::string path = dir + "/input-" + Sha256Hex(bytes).substr(0, 8);
  EXPECT_TRUE(WriteFileAtomically(path, bytes, 0600).ok());
  return UniqueFd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
}

// Get into a fresh file of dir; its content, or the error.
inline absl::StatusOr<std::string> GetBytes(BlobStore& store, const std::string& dir,
                                            const std::string& digest) {
  std::string path = dir + "/out";
  unlink(path.c_str());
  UniqueFd out(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (absl::Status got = store.Get(digest, out.get()); !got.ok()) return got;
  return ReadFileToString(path, 1 << 30);
}

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_BLOB_STORE_TESTING_H_
