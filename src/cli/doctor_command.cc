// `airlock doctor`: what this host runs VMs with, and what is missing with the command that
// fixes it. Exits 0 only when `airlock run` can work.
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/cli/cli_commands.h"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/common/subprocess.h"
#include "src/image/image_store.h"
#include "src/vm/accelerator.h"

namespace airlock {

namespace {

int Doctor() {
  HostPaths paths = DefaultHostPaths();
  std::vector<std::string> missing;
  AcceleratorChoice accel = ChooseAccelerator();
  std::printf("accelerator: %s (%s)\n", accel.name.c_str(), accel.reason.c_str());

  absl::StatusOr<ProcessResult> qemu = RunProcess({paths.qemu, "--version"});
  if (qemu.ok() && qemu->exit_code == 0) {
    std::string first = qemu->output.substr(0, qemu->output.find('\n'));
    std::printf("qemu: %s (%s)\n", paths.qemu.c_str(), first.c_str());
  } else {
    std::printf("qemu: MISSING at %s\n", paths.qemu.c_str());
    missing.push_back("QEMU: run scripts/setup.sh (installs Debian's qemu-system-x86)");
  }

  char real[PATH_MAX];
  if (access(paths.kernel.c_str(), R_OK) == 0 && realpath(paths.kernel.c_str(), real) != nullptr) {
    absl::StatusOr<std::string> release = ReadFileToString(DirName(real) + "/release", 256);
    std::printf("kernel: %s (%s)\n", paths.kernel.c_str(),
                release.ok() ? std::string(absl::StripTrailingAsciiWhitespace(*release)).c_str()
                             : "release unknown");
  } else {
    std::printf("kernel: MISSING at %s\n", paths.kernel.c_str());
    missing.push_back("guest kernel: run scripts/setup.sh (builds it from linux-source-6.1)");
  }

  if (access(paths.initramfs.c_str(), R_OK) == 0) {
    std::printf("initramfs: %s\n", paths.initramfs.c_str());
  } else {
    std::printf("initramfs: MISSING at %s\n", paths.initramfs.c_str());
    missing.push_back("guest agent initramfs: run scripts/setup.sh (builds Airlock)");
  }

  struct statfs fs;
  if (statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC) {
    std::printf("host cgroups: v2 (VM processes get cpu.max, memory.max, pids.max)\n");
  } else if (access("/sys/fs/cgroup/memory", F_OK) == 0 &&
             access("/sys/fs/cgroup/cpu", F_OK) == 0) {
    std::printf("host cgroups: v1 (VM processes get cpu, memory and pids limits)\n");
  } else {
    std::printf("host cgroups: none usable (VM processes run without host limits)\n");
  }

  ImageStore store(paths.images);
  absl::StatusOr<std::vector<ImageInfo>> images = store.List();
  bool have_default = false;
  std::printf("images (%s):\n", paths.images.c_str());
  if (images.ok()) {
    for (const ImageInfo& image : *images) {
      std::printf("  %s  %s  %.1f MiB\n", image.name.c_str(), image.digest.substr(0, 19).c_str(),
                  image.size_bytes / 1048576.0);
      have_default = have_default || image.name == kDefaultImage;
    }
  }
  if (!have_default) {
    std::printf("  (the default image %s is missing)\n", kDefaultImage);
    missing.push_back(absl::StrCat("default image ", kDefaultImage, ": run scripts/setup.sh"));
  }
  if (missing.empty()) {
    std::printf("ready: airlock run -- python3 -c \"print('hi!')\"\n");
    return 0;
  }
  std::printf("missing:\n");
  for (const std::string& m : missing) std::printf("  %s\n", m.c_str());
  return 1;
}

}  // namespace

void AddDoctorCommand(Cli& cli) {
  cli.Add(&cli.app(), "doctor", "check the host: accelerator, QEMU, kernel, images", Doctor);
}

}  // namespace airlock
