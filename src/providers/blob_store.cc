#include "src/providers/blob_store.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/providers/file_blob_store.h"
#include "src/providers/s3_blob_store.h"

namespace airlock::providers {
namespace {

constexpr char kHowToWrite[] =
    "write file:///absolute/directory, or s3://bucket or s3://bucket/a/prefix";

absl::Status BadUrl(const std::string& url, absl::string_view why) {
  std::string shown = url.substr(0, 200);
  for (char& c : shown) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return absl::InvalidArgumentError(
      absl::StrCat("blob store URL \"", shown, "\": ", why, "; ", kHowToWrite));
}

// S3's rules for bucket names: 3 to 63 lowercase letters, digits, '.' and '-', starting and
// ending with a letter or digit.
bool ValidBucket(absl::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '.' && c != '-') return false;
  }
  return absl::ascii_isalnum(b.front()) && absl::ascii_isalnum(b.back());
}

// Segments of letters, digits, '.', '_' and '-' (not "." or ".."): keys that read the same
// everywhere, in URLs and in every store's listing.
bool ValidPrefix(absl::string_view prefix) {
  if (prefix.size() > 512) return false;
  for (absl::string_view segment : absl::StrSplit(prefix, '/')) {
    if (segment.empty() || segment == "." || segment == "..") return false;
    for (char c : segment) {
      if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<BlobStoreLocation> ParseBlobStoreUrl(const std::string& url) {
  for (char c : url) {
    if (c <= 0x20 || c > 0x7e) return BadUrl(url, "it has a space or a character outside ASCII");
  }
  BlobStoreLocation location;
  if (absl::StartsWith(url, "file://")) {
    absl::string_view path = absl::string_view(url).substr(7);
    if (!absl::StartsWith(path, "/")) {
      return BadUrl(url, "a file:// URL needs an absolute path (three slashes: file:///dir)");
    }
    if (path.find_first_of("?#%") != absl::string_view::npos) {
      return BadUrl(url, "the path may not hold '?', '#' or '%'");
    }
    while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
    if (path == "/") return BadUrl(url, "the store may not be the root directory");
    location.kind = BlobStoreLocation::Kind::kFile;
    location.directory = std::string(path);
    return location;
  }
  if (absl::StartsWith(url, "s3://")) {
    absl::string_view rest = absl::string_view(url).substr(5);
    while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
    size_t slash = rest.find('/');
    absl::string_view bucket = rest.substr(0, slash);
    absl::string_view prefix = slash == absl::string_view::npos ? "" : rest.substr(slash + 1);
    if (!ValidBucket(bucket)) {
      return BadUrl(url,
                    "a bucket name is 3 to 63 lowercase letters, digits, '.' and '-', starting "
                    "and ending with a letter or digit");
    }
    if (!prefix.empty() && !ValidPrefix(prefix)) {
      return BadUrl(url,
                    "a prefix is up to 512 bytes of '/'-separated names of letters, digits, "
                    "'.', '_' and '-'");
    }
    location.kind = BlobStoreLocation::Kind::kS3;
    location.bucket = std::string(bucket);
    location.prefix = std::string(prefix);
    return location;
  }
  return BadUrl(url, "unknown scheme");
}

absl::StatusOr<std::unique_ptr<BlobStore>> OpenBlobStore(const BlobStoreOptions& options) {
  absl::StatusOr<BlobStoreLocation> location = ParseBlobStoreUrl(options.url);
  if (!location.ok()) return location.status();
  if (location->kind == BlobStoreLocation::Kind::kFile) {
    absl::StatusOr<std::unique_ptr<FileBlobStore>> store =
        FileBlobStore::Create(location->directory);
    if (!store.ok()) return store.status();
    return std::unique_ptr<BlobStore>(std::move(*store));
  }
  absl::StatusOr<S3Config> config = S3ConfigFromOptions(options, *location);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::unique_ptr<S3BlobStore>> store = S3BlobStore::Create(std::move(*config));
  if (!store.ok()) return store.status();
  return std::unique_ptr<BlobStore>(std::move(*store));
}

}  // namespace airlock::providers
