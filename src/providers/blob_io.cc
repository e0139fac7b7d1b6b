#include "src/providers/blob_io.h"

#include <errno.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "src/common/errno_status.h"

namespace airlock::providers {

absl::Status ReadExactly(int fd, char* data, size_t n, uint64_t done, uint64_t size) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, data + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoStatus("read the blob's input");
    if (r == 0) {
      return absl::InvalidArgumentError(absl::StrCat("the blob's input ended after ", done + got,
                                                     " of the ", size, " bytes it should have"));
    }
    got += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

absl::Status PutDigestMismatch(const std::string& digest, const std::string& actual_hex) {
  return absl::InvalidArgumentError(
      absl::StrCat("the bytes given for blob ", digest, " hash to sha256:", actual_hex,
                   ": nothing was stored (give the blob's own digest)"));
}

absl::Status GetDigestMismatch(const std::string& digest, const std::string& where) {
  return absl::DataLossError(
      absl::StrCat("blob ", digest, " does not match its digest: the store changed it (", where,
                   "); discard what was read, and delete the blob so that it can be stored again"));
}

}  // namespace airlock::providers
