#include "src/daemon/templates.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/channel_frame.h"
#include "src/common/file_util.h"
#include "src/common/log.h"
#include "src/common/sha256.h"
#include "src/vm/accelerator.h"
#include "src/vm/snapshot.h"
#include "src/vm/vm_launcher.h"

namespace airlock {
namespace {

std::string FileIdentity(const std::string& path) {
  char real[PATH_MAX];
  struct stat st;
  if (realpath(path.c_str(), real) == nullptr || stat(real, &st) != 0) return path + " (missing)";
  return absl::StrCat(real, " ", st.st_size, " ", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
}

// <image>-<shape>-: templates of the same image and shape share it; the rest of the name
// says which kernel, initramfs and QEMU made them.
std::string NamePrefix(const ImageInfo& image, const VmShape& shape) {
  std::string digest = absl::StartsWith(image.digest, "sha256:") ? image.digest.substr(7) : "";
  return absl::StrCat(digest.substr(0, 16), "-m", shape.memory_mib, "-c", shape.vcpus, "-d",
                      shape.disk_bytes >> 20, "-");
}

}  // namespace

LaunchOptions OptionsForShape(const VmShape& shape, const std::string& hostname) {
  LaunchOptions options;
  options.memory_mib = shape.memory_mib;
  options.vcpus = shape.vcpus;
  options.disk_bytes = shape.disk_bytes;
  options.hostname = hostname;
  return options;
}

std::string KernelIdentity(const HostPaths& paths) {
  return absl::StrCat("kernel ", FileIdentity(paths.kernel), "; initramfs ",
                      FileIdentity(paths.initramfs));
}

SnapshotManifest DescribeVm(const HostPaths& paths, const std::string& id,
                            const std::string& image_digest, uint32_t vcpus, uint64_t memory_bytes,
                            const Vm& vm) {
  SnapshotManifest manifest;
  manifest.session_id = id;
  manifest.image_digest = image_digest;
  manifest.kernel_release = KernelIdentity(paths);
  manifest.qemu_version = vm.vmm_version();
  manifest.accelerator = vm.accelerator();
  manifest.vcpus = vcpus;
  manifest.memory_bytes = memory_bytes >> 20 << 20;  // QEMU takes whole MiB
  manifest.created_unix_ms = absl::ToUnixMillis(absl::Now());
  return manifest;
}

absl::StatusOr<Templates::Template> Templates::Get(const ImageInfo& image, const VmShape& shape) {
  std::string inputs =
      Sha256Hex(absl::StrCat(KernelIdentity(paths_), "\n", FileIdentity(paths_.qemu), "\n",
                             ChooseAccelerator().name, "\n", kProtocolVersion, "\nram apart"));
  std::string root = paths_.home + "/templates";
  std::string dir = absl::StrCat(root, "/", NamePrefix(image, shape), inputs.substr(0, 16));
  absl::MutexLock lock(&mu_);
  SnapshotFiles files;
  absl::StatusOr<SnapshotManifest> manifest =
      OpenSnapshot(dir, key_, &files, SnapshotUse::kTemplate);
  if (!manifest.ok()) {
    if (absl::Status s = Build(dir, image, shape); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("could not make the ready snapshot of image ",
                                                 image.name, ": ", s.message()));
    }
    manifest = OpenSnapshot(dir, key_, &files, SnapshotUse::kTemplate);
    if (!manifest.ok()) return manifest.status();
    // Templates of this image and shape made with an older kernel, initramfs or QEMU.
    if (DIR* d = opendir(root.c_str())) {
      std::vector<std::string> stale;
      while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (absl::StartsWith(name, NamePrefix(image, shape)) && root + "/" + name != dir) {
          stale.push_back(root + "/" + name);
        }
      }
      closedir(d);
      for (const std::string& path : stale) {
        LogIfFailed(RemoveTree(path), absl::StrCat("stale template ", path, " not removed"));
      }
    }
  }
  return Template{dir, *std::move(manifest), std::move(files)};
}

absl::Status Templates::Build(const std::string& dir, const ImageInfo& image,
                              const VmShape& shape) {
  LaunchOptions options = OptionsForShape(shape, "airlock-template");
  options.memory_as_file = true;
  counters_->boots++;
  absl::StatusOr<LaunchedVm> vm = LaunchVm(*driver_, paths_, image, options);
  if (!vm.ok()) return vm.status();
  SnapshotManifest manifest = DescribeVm(paths_, "template", image.digest, shape.vcpus,
                                         uint64_t{shape.memory_mib} << 20, *vm->vm);
  absl::StatusOr<SnapshotManifest> taken =
      TakeSnapshot(*vm->vm, vm->disk.get(), dir, manifest, key_);
  if (!taken.ok()) return taken.status();
  counters_->snapshots++;
  return absl::OkStatus();
}

void Templates::Discard(const std::string& dir) {
  absl::MutexLock lock(&mu_);
  LogIfFailed(RemoveTree(dir), absl::StrCat("discarded template ", dir, " not removed"));
}

}  // namespace airlock
