#include "src/vm/vm_launcher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/image/ext4_writer.h"
#include "src/vm/accelerator.h"

namespace airlock {

absl::StatusOr<UniqueFd> CreateSessionDisk(const std::string& dir, uint64_t bytes) {
  if (absl::Status s = MakeDirectories(dir, 0700); !s.ok()) return s;
  UniqueFd fd(open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus("create a session disk in", dir);
  absl::StatusOr<std::unique_ptr<Ext4Writer>> writer =
      Ext4Writer::Create(absl::StrCat("/proc/self/fd/", fd.get()), {.size_bytes = bytes});
  if (!writer.ok()) return writer.status();
  if (absl::Status s = (*writer)->Finish(); !s.ok()) return s;
  return fd;
}

absl::StatusOr<std::unique_ptr<Vm>> LaunchVm(VmDriver& driver, const HostPaths& paths,
                                             const ImageInfo& image, const LaunchOptions& options) {
  for (const auto& [what, path] :
       {std::pair{"guest kernel", paths.kernel}, std::pair{"guest initramfs", paths.initramfs}}) {
    if (access(path.c_str(), R_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("the ", what, " ", path, " is missing; run scripts/setup.sh to build it"));
    }
  }
  // The hostname travels on the kernel command line: nothing but a plain DNS label.
  bool label_ok =
      !options.hostname.empty() && options.hostname.size() <= 63 && options.hostname.front() != '-';
  for (char c : options.hostname) {
    label_ok = label_ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
  }
  if (!label_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid hostname \"", options.hostname, "\": use 1-63 of a-z, 0-9 and -"));
  }
  absl::StatusOr<UniqueFd> disk = CreateSessionDisk(paths.scratch, options.disk_bytes);
  if (!disk.ok()) return disk.status();
  VmConfig config;
  config.kernel_path = paths.kernel;
  config.initramfs_path = paths.initramfs;
  config.image_path = image.rootfs_path;
  config.session_disk_fd = disk->get();
  config.memory_mib = options.memory_mib;
  config.vcpus = options.vcpus;
  config.hostname = options.hostname;
  config.guest_pids_max = options.pids;
  config.host_cgroup = options.host_cgroup;
  config.accelerator = ChooseAccelerator().name;
  absl::StatusOr<std::unique_ptr<Vm>> vm = driver.Start(config);
  if (!vm.ok()) return vm.status();
  if (absl::Status s = (*vm)->WaitReady(absl::Now() + options.boot_timeout); !s.ok()) return s;
  return vm;
}

}  // namespace airlock
