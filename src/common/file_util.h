// Small file helpers shared by the host binaries.
#ifndef AIRLOCK_COMMON_FILE_UTIL_H_
#define AIRLOCK_COMMON_FILE_UTIL_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace airlock {

// Reads a whole file; fails (rather than allocating) if it is larger than max_bytes.
[[nodiscard]] absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                                           size_t max_bytes);

// Writes content under a temporary name in the same directory, fsyncs it, renames it over path
// and fsyncs the directory, so a crash leaves either the old file or the new one.
[[nodiscard]] absl::Status WriteFileAtomically(const std::string& path, const std::string& content,
                                               mode_t mode);

// Writes all of data to fd (retrying short writes and EINTR).
[[nodiscard]] absl::Status WriteAll(int fd, std::string_view data);

// fsync()s a directory so that a rename or creation in it is durable.
[[nodiscard]] absl::Status SyncDirectory(const std::string& dir);

// Gives the file open as fd (an unnamed O_TMPFILE file, or one named elsewhere) the name path,
// through /proc/self/fd; `what` names it in the error ("link the session disk into DIR: ...").
[[nodiscard]] absl::Status LinkOpenFile(int fd, const std::string& path, const std::string& what);

// Fsyncs path (a file written by someone else), renames it to final_path, fsyncs the directory.
[[nodiscard]] absl::Status CommitFile(const std::string& path, const std::string& final_path);

// mkdir -p with the given mode for directories it creates.
[[nodiscard]] absl::Status MakeDirectories(const std::string& path, mode_t mode);

// Removes a directory tree (no symlinks followed). Missing is not an error.
[[nodiscard]] absl::Status RemoveTree(const std::string& path);

// The names in a directory, sorted, without . and .. (none when it cannot be read).
std::vector<std::string> ListDirectory(const std::string& dir);

// The directory part of a path ("." if none).
std::string DirName(const std::string& path);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_FILE_UTIL_H_
