// Reads one file out of an ext4 image without mounting it (libext2fs): what the host learns of
// an image's contents, such as its package list for `airlock doctor`. The image's structure is
// Airlock's own (ImageStore converts every image with Ext4Writer); its files' bytes are not, so
// callers treat what comes back as untrusted.
#ifndef AIRLOCK_IMAGE_EXT4_READER_H_
#define AIRLOCK_IMAGE_EXT4_READER_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace airlock {

// The content of the regular file at `path` (absolute, symbolic links in it followed within
// the image) in the ext4 image at `image_path`; NOT_FOUND if there is none, FAILED_PRECONDITION
// if it is larger than max_bytes.
[[nodiscard]] absl::StatusOr<std::string> ReadFileFromExt4(const std::string& image_path,
                                                           const std::string& path,
                                                           size_t max_bytes);

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_EXT4_READER_H_
