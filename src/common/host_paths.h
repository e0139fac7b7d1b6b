// Where Airlock keeps its files on the host. AIRLOCK_HOME (default /var/lib/airlock) holds the
// kernel link, the image store and scratch space; the initramfs sits beside the airlock binary.
// Each path can be overridden by an environment variable, named in `airlock doctor`.
#ifndef AIRLOCK_COMMON_HOST_PATHS_H_
#define AIRLOCK_COMMON_HOST_PATHS_H_

#include <string>

namespace airlock {

struct HostPaths {
  std::string home;       // AIRLOCK_HOME
  std::string kernel;     // AIRLOCK_KERNEL, default $AIRLOCK_HOME/kernel/vmlinux
  std::string initramfs;  // AIRLOCK_INITRAMFS, default <dir of airlock>/airlock-initramfs.cpio
  std::string images;     // $AIRLOCK_HOME/images
  std::string scratch;    // $AIRLOCK_HOME/tmp: unnamed (O_TMPFILE) session disks
  std::string qemu;       // AIRLOCK_QEMU, default /usr/bin/qemu-system-x86_64
};

HostPaths DefaultHostPaths();

// The folder of the running program (airlockd and airlock-dashboard sit beside airlock).
std::string ExecutableDir();

// The image `airlock run` uses when none is named.
inline constexpr char kDefaultImage[] = "airlock/bookworm-python";

}  // namespace airlock

#endif  // AIRLOCK_COMMON_HOST_PATHS_H_
