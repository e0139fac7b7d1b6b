#include "src/guest/guest_volumes.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "src/guest/guest_boot.h"

namespace airlock::guest {
namespace {

struct Slot {
  bool mounted = false;
  bool read_only = false;
  bool frozen = false;
  int root = -1;  // the mounted filesystem's root, for FIFREEZE/FITHAW
  std::string path;
};
Slot slots[kVolumeSlots];

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

// mkdir -p, each component 0755.
std::string MakeMountPoint(const std::string& path) {
  for (size_t at = path.find('/', 1);; at = path.find('/', at + 1)) {
    std::string prefix = path.substr(0, at);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return Errno("mkdir " + prefix);
    if (at == std::string::npos) return "";
  }
}

std::string MountOne(const VolumeMount& v) {
  std::string serial = "airlock-vol" + std::to_string(v.slot);
  std::string disk = FindDiskBySerial(serial);
  if (disk.empty()) return "no disk with serial " + serial;
  bool read_only = (v.flags & kVolumeReadOnly) != 0;
  {
    int fd = open(disk.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Errno("open " + disk);
    // The template this guest may come from saw an empty placeholder in this place, and its
    // page cache still holds what the kernel read of it then.
    int flushed = ioctl(fd, BLKFLSBUF, 0);
    unsigned char magic[2] = {0, 0};
    bool ext4 = pread(fd, magic, 2, 1024 + 56) == 2 && magic[0] == 0x53 && magic[1] == 0xef;
    close(fd);
    if (flushed != 0) return Errno("flush " + disk);
    if (!ext4) return "the disk of the volume at " + v.path + " holds no ext4 filesystem";
  }
  if (std::string problem = MakeMountPoint(v.path); !problem.empty()) return problem;
  // A read-only volume is shared with other sessions and its disk is read-only on the host:
  // nothing may be written, not even a journal replay (the host attaches only clean ones).
  unsigned long flags = MS_NODEV | (read_only ? MS_RDONLY : 0);
  if (mount(disk.c_str(), v.path.c_str(), "ext4", flags, read_only ? "noload" : "") != 0) {
    return Errno("mount the volume at " + v.path);
  }
  Slot& slot = slots[v.slot];
  slot.mounted = true;
  slot.read_only = read_only;
  slot.path = v.path;
  slot.root = open(v.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return "";
}

}  // namespace

std::string MountVolumes(const std::vector<VolumeMount>& volumes) {
  std::string problems;
  for (const VolumeMount& v : volumes) {
    if (v.slot >= kVolumeSlots || slots[v.slot].mounted) continue;
    std::string problem = MountOne(v);
    if (!problem.empty()) problems += (problems.empty() ? "" : "; ") + problem;
  }
  return problems;
}

void FreezeVolumes() {
  for (Slot& slot : slots) {
    if (!slot.mounted || slot.read_only || slot.frozen || slot.root < 0) continue;
    if (ioctl(slot.root, FIFREEZE, 0) == 0) {
      slot.frozen = true;
    } else if (errno != EBUSY) {  // EBUSY: frozen already, by the session itself
      ConsoleLog(Errno("freeze the volume at " + slot.path));
    }
  }
}

void ThawVolumes() {
  for (Slot& slot : slots) {
    if (!slot.frozen) continue;
    if (ioctl(slot.root, FITHAW, 0) != 0) ConsoleLog(Errno("thaw the volume at " + slot.path));
    slot.frozen = false;
  }
}

int VolumeFreezeMain(int argc, char** argv) {
  int status = 0;
  for (int i = 2; i < argc; ++i) {
    int fd = open(argv[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || (ioctl(fd, FIFREEZE, 0) != 0 && errno != EBUSY)) {
      std::fprintf(stderr, "freeze %s: %s\n", argv[i], strerror(errno));
      status = 1;
    }
    if (fd >= 0) close(fd);
  }
  return status;
}

}  // namespace airlock::guest
