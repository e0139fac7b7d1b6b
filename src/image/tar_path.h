// Cleans a path name read from a tar entry into a path relative to the image root.
// This is one of the places untrusted bytes enter (fuzz/tar_path_fuzz.cc).
#ifndef AIRLOCK_IMAGE_TAR_PATH_H_
#define AIRLOCK_IMAGE_TAR_PATH_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock {

inline constexpr size_t kMaxImagePath = 4096;
inline constexpr size_t kMaxNameComponent = 255;

// "./usr//bin/" -> "usr/bin"; "/etc/passwd" -> "etc/passwd" (absolute names are confined to
// the image root); "." -> "" (the root itself). A ".." component, a NUL byte, an over-long
// name or component is an InvalidArgument error naming the entry.
[[nodiscard]] absl::StatusOr<std::string> CleanTarPath(absl::string_view name);

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_TAR_PATH_H_
