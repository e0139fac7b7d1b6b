// FileBlobStore: blobs as files in a local directory, <dir>/sha256/<first 2 hex>/<hex>, mode
// 0600 in directories of mode 0700 (blobs hold snapshots: a guest's memory). A blob is written
// under a temporary name, fsynced, renamed and its directory fsynced, so after a crash a name
// holds the whole blob or nothing. The BlobStore contract applies (thread-safe).
#ifndef AIRLOCK_PROVIDERS_FILE_BLOB_STORE_H_
#define AIRLOCK_PROVIDERS_FILE_BLOB_STORE_H_

#include <memory>
#include <string>

#include "src/providers/blob_store.h"

namespace airlock::providers {

class FileBlobStore : public BlobStore {
 public:
  // Creates <directory>/sha256 if needed. directory must be absolute.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FileBlobStore>> Create(
      const std::string& directory);

  absl::Status Put(const std::string& digest, int fd, uint64_t size) override;
  absl::Status Get(const std::string& digest, int out_fd) override;
  absl::StatusOr<uint64_t> Stat(const std::string& digest) override;
  absl::Status Delete(const std::string& digest) override;
  absl::StatusOr<std::vector<std::string>> List() override;

  // The file a blob is (or would be) kept in.
  std::string PathOf(const std::string& hex) const;

 private:
  explicit FileBlobStore(std::string directory) : directory_(std::move(directory)) {}

  const std::string directory_;
};

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_FILE_BLOB_STORE_H_
