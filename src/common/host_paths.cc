#include "src/common/host_paths.h"

#include <unistd.h>

#include <cstdlib>

#include "src/common/file_util.h"

namespace airlock {
namespace {

std::string Env(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

}  // namespace

std::string ExecutableDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  return DirName(std::string(buf, static_cast<size_t>(n)));
}

HostPaths DefaultHostPaths() {
  HostPaths p;
  p.home = Env("AIRLOCK_HOME", "/var/lib/airlock");
  p.kernel = Env("AIRLOCK_KERNEL", p.home + "/kernel/vmlinux");
  p.initramfs = Env("AIRLOCK_INITRAMFS", ExecutableDir() + "/airlock-initramfs.cpio");
  p.images = p.home + "/images";
  p.scratch = p.home + "/tmp";
  p.qemu = Env("AIRLOCK_QEMU", "/usr/bin/qemu-system-x86_64");
  return p;
}

}  // namespace airlock
