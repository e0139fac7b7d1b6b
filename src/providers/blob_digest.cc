#include "src/providers/blob_digest.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace airlock::providers {

absl::StatusOr<std::string> BlobDigestHex(absl::string_view digest) {
  constexpr absl::string_view kPrefix = "sha256:";
  bool ok = absl::StartsWith(digest, kPrefix) && digest.size() == kPrefix.size() + 64;
  for (size_t i = kPrefix.size(); ok && i < digest.size(); ++i) {
    char c = digest[i];
    ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  }
  if (!ok) {
    // Quote at most a prefix of what was given: it may be anything.
    std::string shown(digest.substr(0, 80));
    for (char& c : shown) {
      if (c < 0x20 || c > 0x7e) c = '?';
    }
    return absl::InvalidArgumentError(
        absl::StrCat("blob digest \"", shown,
                     "\" is not valid: write sha256: followed by 64 lowercase hex digits"));
  }
  return std::string(digest.substr(kPrefix.size()));
}

}  // namespace airlock::providers
