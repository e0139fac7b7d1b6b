// A private airlockd home on a small tmpfs, or an ext4 on a loop device where a test needs a
// disk's behaviour (unwritten extents, holes that reads do not fill), for tests of a full host
// disk: RunAirlock uses it (the CLI starts its airlockd there) while a SmallHome lives; the
// test daemon's kernel, and its images unless asked otherwise, by symlink.
#ifndef AIRLOCK_TESTS_SMALL_HOME_H_
#define AIRLOCK_TESTS_SMALL_HOME_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/loop.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/common/subprocess.h"
#include "src/common/unique_fd.h"
#include "tests/cli_runner.h"
#include "tests/loopback_http_server.h"

namespace airlock {

enum class SmallDisk { kTmpfs, kExt4 };

// A home of its own on a filesystem of `megabytes`.
class SmallHome {
 public:
  // shared_images: the test daemon's image store (by symlink), else an empty one of its own
  // on the small filesystem.
  explicit SmallHome(int megabytes, bool shared_images = true, SmallDisk disk = SmallDisk::kTmpfs) {
    path_ = dir_.path + "/home";
    EXPECT_EQ(mkdir(path_.c_str(), 0755), 0);
    if (disk == SmallDisk::kExt4) {
      MountExt4(megabytes);
    } else {
      EXPECT_EQ(mount("tmpfs", path_.c_str(), "tmpfs", 0,
                      absl::StrCat("size=", megabytes, "m,mode=0755").c_str()),
                0)
          << strerror(errno);
    }
    HostPaths shared = DefaultHostPaths();
    if (shared_images) {
      EXPECT_EQ(symlink(shared.images.c_str(), (path_ + "/images").c_str()), 0);
    } else {
      EXPECT_EQ(mkdir((path_ + "/images").c_str(), 0755), 0);
    }
    EXPECT_EQ(symlink((shared.home + "/kernel").c_str(), (path_ + "/kernel").c_str()), 0);
    old_home_ = getenv("AIRLOCK_HOME");
    old_socket_ = getenv("AIRLOCK_SOCKET");
    setenv("AIRLOCK_HOME", path_.c_str(), 1);
    setenv("AIRLOCK_SOCKET", (path_ + "/airlockd.sock").c_str(), 1);
  }
  ~SmallHome() {
    for (absl::string_view id :
         absl::StrSplit(RunAirlock({"ls", "-q"}).out, '\n', absl::SkipEmpty())) {
      RunAirlock({"rm", std::string(id)});
    }
    std::ifstream pid_file(path_ + "/airlockd.pid");
    pid_t pid = 0;
    if (pid_file >> pid && pid > 0) {
      kill(pid, SIGTERM);
      for (int i = 0; i < 200 && kill(pid, 0) == 0; ++i) usleep(50000);
    }
    setenv("AIRLOCK_HOME", old_home_.c_str(), 1);
    setenv("AIRLOCK_SOCKET", old_socket_.c_str(), 1);
    EXPECT_EQ(umount2(path_.c_str(), MNT_DETACH), 0) << strerror(errno);
  }
  // Takes all but `megabytes` of the free space (a file of its own, removed by Free).
  void Fill(int megabytes) {
    struct statvfs fs;
    ASSERT_EQ(statvfs(path_.c_str(), &fs), 0);
    int64_t take = static_cast<int64_t>(fs.f_bavail) * fs.f_frsize - (int64_t{megabytes} << 20);
    int fd = open((path_ + "/filler").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(fallocate(fd, 0, 0, take), 0) << strerror(errno);
    close(fd);
  }
  int64_t FreeBytes() const {
    struct statvfs fs;
    EXPECT_EQ(statvfs(path_.c_str(), &fs), 0);
    return static_cast<int64_t>(fs.f_bavail) * fs.f_frsize;
  }
  void Free() { EXPECT_EQ(unlink((path_ + "/filler").c_str()), 0); }
  std::string Log() const {
    return ReadFileToString(path_ + "/airlockd.log", 1 << 20).value_or("");
  }
  const std::string& path() const { return path_; }

 private:
  // An ext4 of `megabytes` (none reserved for root, which airlockd is) in a file beside the
  // home, mounted through a loop device that goes when it is unmounted.
  void MountExt4(int megabytes) {
    std::string image = dir_.path + "/disk.ext4";
    UniqueFd file(open(image.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    ASSERT_TRUE(file.valid());
    ASSERT_EQ(ftruncate(file.get(), off_t{megabytes} << 20), 0);
    absl::StatusOr<ProcessResult> made =
        RunProcess({"/usr/sbin/mkfs.ext4", "-q", "-F", "-m", "0", image});
    ASSERT_TRUE(made.ok() && made->exit_code == 0)
        << (made.ok() ? made->output : made.status().ToString());
    UniqueFd control(open("/dev/loop-control", O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(control.valid()) << strerror(errno);
    int n = ioctl(control.get(), LOOP_CTL_GET_FREE);
    ASSERT_GE(n, 0) << strerror(errno);
    UniqueFd loop(open(absl::StrCat("/dev/loop", n).c_str(), O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(loop.valid()) << strerror(errno);
    loop_config config = {};
    config.fd = static_cast<uint32_t>(file.get());
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    ASSERT_EQ(ioctl(loop.get(), LOOP_CONFIGURE, &config), 0) << strerror(errno);
    ASSERT_EQ(mount(absl::StrCat("/dev/loop", n).c_str(), path_.c_str(), "ext4", 0, ""), 0)
        << strerror(errno);
    ASSERT_EQ(chmod(path_.c_str(), 0755), 0);
  }

  TestDir dir_;
  std::string path_, old_home_, old_socket_;
};

}  // namespace airlock

#endif  // AIRLOCK_TESTS_SMALL_HOME_H_
