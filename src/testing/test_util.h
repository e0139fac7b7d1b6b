// Helpers shared by unit tests: temporary directories, building tars, inspecting ext4 images.
#ifndef AIRLOCK_TESTING_TEST_UTIL_H_
#define AIRLOCK_TESTING_TEST_UTIL_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/unique_fd.h"

namespace airlock::testing {

// A TCP connection to 127.0.0.1:port whose reads give up after 60 s (a test that hangs
// fails); a failed connect is a test failure and an empty fd.
UniqueFd ConnectLoopback(uint16_t port);

// A fresh directory removed (with its content) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct TarEntry {
  std::string name;
  mode_t type = S_IFREG;  // S_IFREG, S_IFDIR, S_IFLNK, S_IFCHR, ...
  std::string data;       // content, or the target of a symlink / hard link
  bool hardlink = false;
  mode_t mode = 0644;
  int64_t size = -1;  // declared size; -1: data.size()
  std::vector<std::pair<std::string, std::string>> xattrs;
};

enum class Compression { kNone, kGzip, kZstd };

// Writes a pax tar, compressed or not, with libarchive.
void WriteTar(const std::string& path, const std::vector<TarEntry>& entries,
              Compression compression = Compression::kNone);

// Starts a server for a test: argv[0] (an absolute path; never through a shell) with stdin
// /dev/null and stdout and stderr appended to log, killed when this process dies. env is its
// whole environment; nullptr keeps this process's. The child's pid, or -1.
pid_t StartLogged(const std::vector<std::string>& argv, const std::string& log,
                  char* const* env = nullptr);

// Runs debugfs -R command on an image; returns its stdout.
std::string Debugfs(const std::string& image, const std::string& command);

// Runs e2fsck -fn; returns its exit code (0 when the filesystem is clean) and output.
int Fsck(const std::string& image, std::string* output);

}  // namespace airlock::testing

#endif  // AIRLOCK_TESTING_TEST_UTIL_H_
