// Writes the guest's initramfs: a newc cpio archive holding only the agent as /init plus the
// few directories and the console node the kernel needs before the agent mounts devtmpfs.
#ifndef AIRLOCK_IMAGE_INITRAMFS_WRITER_H_
#define AIRLOCK_IMAGE_INITRAMFS_WRITER_H_

#include <string>

#include "absl/status/status.h"

namespace airlock {

// Returns the archive bytes for an agent binary's content.
std::string BuildInitramfs(const std::string& agent_binary);

// Reads agent_path and writes the archive to out_path (temporary name, fsync, rename).
[[nodiscard]] absl::Status WriteInitramfs(const std::string& agent_path,
                                          const std::string& out_path);

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_INITRAMFS_WRITER_H_
