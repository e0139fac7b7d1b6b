// BlobStore: where images and snapshot files are kept, by content. A local directory
// (FileBlobStore) by default; any S3-compatible object store (S3BlobStore) for hosts that share
// them. Opened from a URL with OpenBlobStore.
#ifndef AIRLOCK_PROVIDERS_BLOB_STORE_H_
#define AIRLOCK_PROVIDERS_BLOB_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/providers/sigv4.h"

namespace airlock::providers {

// A content-addressed store of blobs. A blob's name is its digest, written
// "sha256:<64 lowercase hex>"; any other name is InvalidArgument.
//
// What is verified: Put hashes the bytes it reads and stores nothing unless they match the
// digest; Get hashes the bytes it writes and, if they do not match, answers DataLoss after having
// written them, so a caller writes into a temporary file and discards it on any error. Stat and
// List report what the store says, unverified.
//
// Thread-safety: every method may be called from any thread, concurrently, on one object
// (including Puts of the same digest: the blob ends up stored once, whole).
class BlobStore {
 public:
  virtual ~BlobStore() = default;

  // Reads exactly `size` bytes from fd, from its current offset (a pipe works: fd is only
  // read), and stores them as `digest`. The bytes must hash to the digest (InvalidArgument
  // otherwise, and nothing is stored); input that ends early is InvalidArgument. Idempotent: if
  // a blob of that digest and size is present already, it may return OK without reading fd.
  [[nodiscard]] virtual absl::Status Put(const std::string& digest, int fd, uint64_t size) = 0;

  // Writes the blob to out_fd. NotFound if absent; DataLoss if the bytes it wrote do not match
  // the digest (the store changed them).
  [[nodiscard]] virtual absl::Status Get(const std::string& digest, int out_fd) = 0;

  // The blob's size; NotFound if absent.
  [[nodiscard]] virtual absl::StatusOr<uint64_t> Stat(const std::string& digest) = 0;

  // Removes the blob; OK if it was absent.
  [[nodiscard]] virtual absl::Status Delete(const std::string& digest) = 0;

  // The digests of every blob present, sorted.
  [[nodiscard]] virtual absl::StatusOr<std::vector<std::string>> List() = 0;
};

struct BlobStoreOptions {
  // "file:///absolute/dir", or "s3://bucket" / "s3://bucket/a/prefix".
  std::string url;

  // For s3:// only.
  // "https://host[:port]", or "http://127.0.0.1:PORT" (plain http only on loopback); empty:
  // AWS's endpoint for the region, https://s3.<region>.amazonaws.com. Buckets are addressed by
  // path (endpoint/bucket/key), which every S3-compatible server supports.
  std::string endpoint;
  std::string region;  // empty: us-east-1
  // Unset: from the environment, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and (optionally)
  // AWS_SESSION_TOKEN.
  std::optional<AwsCredentials> credentials;
  // Blobs larger than this are sent as a multipart upload in parts of part_size bytes. Each
  // part (and a smaller blob whole) is held in memory, so both are capped (5 MiB to 1 GiB:
  // S3 refuses parts below 5 MiB, the last excepted).
  uint64_t multipart_threshold = uint64_t{64} << 20;
  uint64_t part_size = uint64_t{16} << 20;
  // Tries per request (connection errors, 5xx and 429 are retried), the first retry after
  // retry_delay, each next one after twice as long as the one before.
  int attempts = 4;
  absl::Duration retry_delay = absl::Milliseconds(200);
  // A request that moves no byte for this long (or cannot connect within it, at most 10 s) has
  // failed, and is tried again: a store that hangs costs attempts times this, not forever.
  absl::Duration stall_timeout = absl::Seconds(60);
};

// Where a URL points, as OpenBlobStore reads it.
struct BlobStoreLocation {
  enum class Kind { kFile, kS3 };
  Kind kind = Kind::kFile;
  std::string directory;  // kFile: absolute, without a trailing '/'
  std::string bucket;     // kS3
  std::string prefix;     // kS3: "" or "a/b", without leading or trailing '/'
};
[[nodiscard]] absl::StatusOr<BlobStoreLocation> ParseBlobStoreUrl(const std::string& url);

// Opens the store a URL names (InvalidArgument, saying how to write them, for bad options).
// A file store's directory is created if needed; an S3 store is not contacted until used.
[[nodiscard]] absl::StatusOr<std::unique_ptr<BlobStore>> OpenBlobStore(
    const BlobStoreOptions& options);

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_BLOB_STORE_H_
