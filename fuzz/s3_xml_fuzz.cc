// Fuzz target: an S3 server's answers (the endpoint is configuration, the network may be hostile):
// the XML reader and the three documents the blob store reads. Besides not crashing: what they
// hand back stays within its caps and is what the blob store may use.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/providers/s3_xml.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

bool Printable(const std::string& s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace airlock::providers;
  absl::string_view body(reinterpret_cast<const char*>(data), size);
  size_t elements = 0;
  absl::Status walked = WalkXml(body, [&](const std::vector<std::string>& path, absl::string_view) {
    Check(!path.empty() && path.size() <= kMaxXmlDepth);
    ++elements;
  });
  Check(!walked.ok() || (elements >= 1 && elements <= kMaxXmlElements));

  if (std::optional<S3ErrorBody> error = ParseS3Error(body)) {
    Check(walked.ok());
    Check(error->code.size() <= kMaxS3Field && Printable(error->code));
    Check(error->message.size() <= kMaxS3Field && Printable(error->message));
  }
  absl::StatusOr<std::string> upload_id = ParseInitiateMultipartUpload(body);
  if (upload_id.ok()) {
    Check(walked.ok());
    Check(!upload_id->empty() && upload_id->size() <= kMaxS3Field && Printable(*upload_id));
  }
  absl::StatusOr<S3ListPage> page = ParseListObjectsV2(body);
  if (page.ok()) {
    Check(walked.ok());
    for (const std::string& key : page->keys) Check(!key.empty() && key.size() <= 1024);
    Check(!page->truncated ||
          (!page->next_token.empty() && page->next_token.size() <= kMaxS3Field &&
           Printable(page->next_token)));
  }
  return 0;
}
