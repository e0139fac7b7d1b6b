#include "src/common/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <unistd.h>

#include "src/common/errno_status.h"
#include "src/common/hex.h"
#include "src/common/unique_fd.h"

namespace airlock {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
  // Only an allocation failure can make these fail; then nothing else would work either.
  if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) abort();
}

void Sha256::Update(absl::string_view bytes) {
  EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size());
}

std::string Sha256::FinishRaw() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_.get(), md, &len);
  EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(md), len);
}

std::string Sha256::FinishHex() {
  std::string raw = FinishRaw();
  return HexString(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
}

std::string Sha256Hex(absl::string_view bytes) {
  Sha256 sha;
  sha.Update(bytes);
  return sha.FinishHex();
}

absl::StatusOr<std::string> Sha256FileHex(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path);
  Sha256 sha;
  std::string buf(1 << 20, '\0');
  for (;;) {
    ssize_t n = read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read", path);
    if (n == 0) break;
    sha.Update(absl::string_view(buf.data(), static_cast<size_t>(n)));
  }
  return sha.FinishHex();
}

std::string HmacSha256(absl::string_view key, absl::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), md, &len);
  return std::string(reinterpret_cast<const char*>(md), len);
}

std::string HmacSha256Hex(absl::string_view key, absl::string_view data) {
  std::string raw = HmacSha256(key, data);
  return HexString(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
}

bool SecretEquals(absl::string_view given, absl::string_view expected) {
  return !expected.empty() && given.size() == expected.size() &&
         CRYPTO_memcmp(given.data(), expected.data(), expected.size()) == 0;
}

}  // namespace airlock
