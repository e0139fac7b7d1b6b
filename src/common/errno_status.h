// absl::Status from errno, with the operation and its object named for the user.
#ifndef AIRLOCK_COMMON_ERRNO_STATUS_H_
#define AIRLOCK_COMMON_ERRNO_STATUS_H_

#include <errno.h>
#include <string.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace airlock {

// e.g. ErrnoStatus("open", path) -> "open /x: No such file or directory" (NotFound).
inline absl::Status ErrnoStatus(absl::string_view what, absl::string_view object = "",
                                int err = errno) {
  std::string message = object.empty() ? absl::StrCat(what, ": ", strerror(err))
                                       : absl::StrCat(what, " ", object, ": ", strerror(err));
  return absl::Status(absl::ErrnoToStatusCode(err), message);
}

}  // namespace airlock

#endif  // AIRLOCK_COMMON_ERRNO_STATUS_H_
