#include "src/guest/guest_boot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "src/guest/guest_layer.h"

namespace airlock::guest {
namespace {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

bool MountFs(const char* source, const char* target, const char* type, unsigned long flags,
             const char* data, std::string* error) {
  mkdir(target, 0755);
  if (mount(source, target, type, flags, data) != 0) {
    *error = Errno(std::string("mount ") + type + " on " + target);
    return false;
  }
  return true;
}

int session_disk_root = -1;

}  // namespace

int SessionDiskRoot() { return session_disk_root; }

std::string FindDiskBySerial(const std::string& serial) {
  DIR* dir = opendir("/sys/block");
  if (dir == nullptr) return "";
  std::string found;
  while (dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name.rfind("vd", 0) != 0) continue;
    if (ReadSmallFile("/sys/block/" + name + "/serial") == serial) {
      found = "/dev/" + name;
      break;
    }
  }
  closedir(dir);
  return found;
}

namespace {

std::string KernelArg(const std::string& cmdline, const std::string& key) {
  std::istringstream in(cmdline);
  std::string word;
  while (in >> word) {
    if (word.rfind(key + "=", 0) == 0) return word.substr(key.size() + 1);
  }
  return "";
}

void BringUpLoopback() {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  ifreq ifr = {};
  strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) ConsoleLog(Errno("bring up lo"));
  }
  close(fd);
}

}  // namespace

void ConsoleLog(const std::string& line) {
  std::string out = "airlock-agent: " + line + "\n";
  (void)!write(STDOUT_FILENO, out.data(), out.size());
}

std::string BootRoot() {
  std::string error;
  if (!MountFs("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr, &error) ||
      !MountFs("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr, &error) ||
      !MountFs("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755", &error)) {
    return error;
  }
  std::string image = FindDiskBySerial(kImageDiskSerial);
  std::string session = FindDiskBySerial(kSessionDiskSerial);
  if (image.empty()) return std::string("no disk with serial ") + kImageDiskSerial;
  if (session.empty()) return std::string("no disk with serial ") + kSessionDiskSerial;

  if (!MountFs(image.c_str(), "/image", "ext4", MS_RDONLY | MS_NOATIME, "noload", &error) ||
      !MountFs(session.c_str(), "/session", "ext4", MS_NOATIME, nullptr, &error)) {
    return error;
  }
  session_disk_root = open("/session", O_PATH | O_DIRECTORY | O_CLOEXEC);
  mkdir("/session/upper", 0755);
  mkdir("/session/work", 0700);
  if (!MountFs("overlay", "/root", "overlay", 0,
               "lowerdir=/image,upperdir=/session/upper,workdir=/session/work", &error)) {
    return error;
  }
  for (const char* dir : {"/root/proc", "/root/sys", "/root/dev", "/root/tmp", "/root/run"}) {
    mkdir(dir, 0755);
  }
  chmod("/root/tmp", 01777);
  for (const char* dir : {"/proc", "/sys", "/dev"}) {
    std::string target = std::string("/root") + dir;
    if (mount(dir, target.c_str(), nullptr, MS_MOVE, nullptr) != 0) {
      return Errno(std::string("move ") + dir);
    }
  }
  // The initramfs held only this binary, which stays mapped; free its pages.
  unlink("/init");
  if (chdir("/root") != 0) return Errno("chdir /root");
  if (mount(".", "/", nullptr, MS_MOVE, nullptr) != 0) return Errno("move root");
  if (chroot(".") != 0) return Errno("chroot");
  if (chdir("/") != 0) return Errno("chdir /");

  if (!MountFs("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666",
               &error) ||
      !MountFs("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", &error) ||
      !MountFs("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", &error) ||
      !MountFs("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr,
               &error)) {
    return error;
  }
  // The root overlay's upper directory, read-only, for an image build's layer-tar (a
  // session's own changes; the guest sees their result at / anyway).
  std::string upper = "/proc/self/fd/" + std::to_string(session_disk_root) + "/upper";
  if (mkdir("/run/airlock", 0755) != 0 && errno != EEXIST) {
    ConsoleLog(Errno("mkdir /run/airlock"));
  } else if (mkdir(kRootUpperView, 0755) != 0 ||
             mount(upper.c_str(), kRootUpperView, nullptr, MS_BIND, nullptr) != 0 ||
             mount(nullptr, kRootUpperView, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) !=
                 0) {
    ConsoleLog(Errno("bind the root's upper layer"));
  }
  std::string hostname = KernelArg(ReadSmallFile("/proc/cmdline"), "airlock.hostname");
  if (!hostname.empty() && sethostname(hostname.data(), hostname.size()) != 0) {
    ConsoleLog(Errno("sethostname"));
  }
  BringUpLoopback();
  return "";
}

int OpenChannelPort() {
  DIR* dir = opendir("/sys/class/virtio-ports");
  if (dir == nullptr) return -1;
  int fd = -1;
  while (dirent* e = readdir(dir)) {
    std::string port = e->d_name;
    if (port[0] == '.') continue;
    if (ReadSmallFile("/sys/class/virtio-ports/" + port + "/name") == kChannelPortName) {
      fd = open(("/dev/" + port).c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
      break;
    }
  }
  closedir(dir);
  return fd;
}

}  // namespace airlock::guest
