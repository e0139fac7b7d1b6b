// The XML bodies an S3 server answers with, parsed as untrusted bytes: the server may be anyone's
// (an endpoint is configuration) and a network in between may be hostile. A small non-validating
// XML reader (elements, attributes skipped, text with the five entities and character
// references, CDATA, comments, the prolog; no DTDs) with caps on the body, the depth and the
// element count, and parsers for the three answers the blob store reads. Nothing here fails
// open: a body that does not parse is an error, never an empty answer. Thread-safe (no state).
#ifndef AIRLOCK_PROVIDERS_S3_XML_H_
#define AIRLOCK_PROVIDERS_S3_XML_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::providers {

// Response bodies larger than this are refused before they are parsed (and while they are read).
inline constexpr size_t kMaxS3ResponseBody = 1 << 20;
inline constexpr size_t kMaxXmlDepth = 16;
inline constexpr size_t kMaxXmlElements = 20000;
// Text the blob store keeps from a server (an error's code and message, a token) is cut here.
inline constexpr size_t kMaxS3Field = 1024;

// Calls on_element(path, text) as each element closes: path holds the element names from the
// root down to it, text its own character data (entities decoded; its children's text excluded).
// InvalidArgument if the body is not well-formed XML within the caps.
[[nodiscard]] absl::Status WalkXml(absl::string_view body,
                                   const std::function<void(const std::vector<std::string>& path,
                                                            absl::string_view text)>& on_element);

// An <Error> document: S3's answer to a failed request (and, sometimes, with status 200, to
// CompleteMultipartUpload). Code and Message are printable ASCII, at most kMaxS3Field bytes.
struct S3ErrorBody {
  std::string code;
  std::string message;
};
// The error a body describes; nullopt when it is not an <Error> document (or not XML at all).
std::optional<S3ErrorBody> ParseS3Error(absl::string_view body);

// InitiateMultipartUploadResult's UploadId (non-empty, printable, at most kMaxS3Field bytes).
[[nodiscard]] absl::StatusOr<std::string> ParseInitiateMultipartUpload(absl::string_view body);

// One page of ListObjectsV2 (ListBucketResult).
struct S3ListPage {
  std::vector<std::string> keys;  // Contents/Key, in the server's order
  bool truncated = false;         // IsTruncated
  std::string next_token;         // NextContinuationToken; set whenever truncated
};
[[nodiscard]] absl::StatusOr<S3ListPage> ParseListObjectsV2(absl::string_view body);

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_S3_XML_H_
