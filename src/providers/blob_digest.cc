#include "src/providers/blob_digest.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/common/hex.h"

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

Sha256::Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
  EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr);
}

void Sha256::Update(absl::string_view bytes) {
  EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size());
}

std::string Sha256::FinishHex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_.get(), md, &len);
  EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr);
  return HexString(md, len);
}

std::string Sha256Hex(absl::string_view bytes) {
  Sha256 sha;
  sha.Update(bytes);
  return sha.FinishHex();
}

}  // namespace airlock::providers
