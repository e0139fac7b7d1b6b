// S3BlobStore: blobs as objects <prefix>/sha256/<hex> in a bucket of any S3-compatible store,
// over libcurl, each request signed with AWS Signature Version 4 (sigv4.h) and carrying the
// SHA-256 of its body in x-amz-content-sha256, so the server checks what it received. Buckets
// are addressed by path (endpoint/bucket/key). Blobs above the multipart threshold go up in
// parts (CreateMultipartUpload, UploadPart, CompleteMultipartUpload; AbortMultipartUpload on
// failure). Connection errors, 5xx and 429 are retried with exponential backoff; a part (or a
// small blob) is held in memory, so a retry sends the same bytes. Server answers are read with
// a cap and parsed in s3_xml.cc. The BlobStore contract applies (thread-safe: each call uses
// its own connection; the object is immutable).
#ifndef AIRLOCK_PROVIDERS_S3_BLOB_STORE_H_
#define AIRLOCK_PROVIDERS_S3_BLOB_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "src/providers/blob_store.h"
#include "src/providers/sigv4.h"

namespace airlock::providers {

struct S3Config {
  std::string endpoint;  // "https://host[:port]" or "http://127.0.0.1:PORT", no trailing '/'
  std::string bucket;
  std::string prefix;  // "" or "a/b"
  std::string region = "us-east-1";
  AwsCredentials credentials;
  uint64_t multipart_threshold = uint64_t{64} << 20;
  uint64_t part_size = uint64_t{16} << 20;
  int attempts = 4;
  absl::Duration retry_delay = absl::Milliseconds(200);
  absl::Duration stall_timeout = absl::Seconds(60);  // BlobStoreOptions::stall_timeout
};

// The S3 settings of options (a URL already parsed into location): the endpoint checked and
// defaulted, the region, credentials from the options or the environment, the sizes checked.
// InvalidArgument, saying what to write, for anything wrong.
[[nodiscard]] absl::StatusOr<S3Config> S3ConfigFromOptions(const BlobStoreOptions& options,
                                                           const BlobStoreLocation& location);

class S3BlobStore : public BlobStore {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<S3BlobStore>> Create(S3Config config);

  absl::Status Put(const std::string& digest, int fd, uint64_t size) override;
  absl::Status Get(const std::string& digest, int out_fd) override;
  absl::StatusOr<uint64_t> Stat(const std::string& digest) override;
  absl::Status Delete(const std::string& digest) override;
  absl::StatusOr<std::vector<std::string>> List() override;

  // The object key a blob is kept under ("prefix/sha256/<hex>").
  std::string KeyOf(const std::string& hex) const;

  struct Request;
  struct Response;

 private:
  explicit S3BlobStore(S3Config config, std::string host)
      : config_(std::move(config)), host_(std::move(host)) {}

  // One HTTP exchange, signed; Response::transport_error is set if it did not complete.
  Response Once(const Request& request) const;
  // Once, retried while the answer is a connection error, 5xx or 429.
  Response Perform(const Request& request) const;
  // The status for an answer that is not a success, saying what failed (`what`) and what to do.
  absl::Status ErrorOf(const Response& response, absl::string_view what) const;
  void Backoff(int attempt) const;

  absl::Status PutSingle(const std::string& digest, const std::string& hex, int fd, uint64_t size);
  absl::Status PutMultipart(const std::string& digest, const std::string& hex, int fd,
                            uint64_t size);

  const S3Config config_;
  const std::string host_;  // the Host header: the endpoint's host[:port]
};

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_S3_BLOB_STORE_H_
