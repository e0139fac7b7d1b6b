#include "src/guest/guest_workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "src/common/workspace_change.h"
#include "src/guest/guest_boot.h"
#include "src/guest/guest_sha256.h"

namespace airlock::guest {
namespace {

constexpr char kLayersDir[] = "/run/airlock/workspace";
constexpr char kBaseDir[] = "/run/airlock/workspace/base";
constexpr char kUpperView[] = "/run/airlock/workspace/upper";
// Content a diff carries in all, so that a session that rewrote a huge tree still answers
// with a bounded listing (files beyond it are listed without content).
constexpr uint64_t kContentBudget = 48ull << 20;

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string MountWorkspace(int session_root) {
  static bool mounted = false;
  if (mounted) return "";
  std::string disk = FindDiskBySerial(kWorkspaceDiskSerial);
  if (disk.empty()) return std::string("no disk with serial ") + kWorkspaceDiskSerial;
  {
    FdCloser fd(open(disk.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return Errno("open " + disk);
    // The template this guest may come from saw an empty disk in this place, and its page
    // cache still holds what the kernel read of it then.
    if (ioctl(fd.get(), BLKFLSBUF, 0) != 0) return Errno("flush " + disk);
    unsigned char magic[2] = {0, 0};
    if (pread(fd.get(), magic, 2, 1024 + 56) != 2 || magic[0] != 0x53 || magic[1] != 0xef) {
      return "the workspace disk holds no ext4 filesystem";
    }
  }
  if (session_root < 0) return "the session disk is not available";
  for (const char* dir : {"workspace", "workspace/upper", "workspace/work"}) {
    if (mkdirat(session_root, dir, 0755) != 0 && errno != EEXIST) return Errno(dir);
  }
  for (const char* dir : {"/run/airlock", kLayersDir, kBaseDir, kUpperView, kGuestWorkspaceDir}) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return Errno(std::string("mkdir ") + dir);
  }
  if (mount(disk.c_str(), kBaseDir, "ext4", MS_RDONLY | MS_NOATIME | MS_NODEV, "noload") != 0) {
    return Errno("mount the workspace base");
  }
  std::string session = "/proc/self/fd/" + std::to_string(session_root) + "/workspace";
  std::string upper = session + "/upper";
  if (mount(upper.c_str(), kUpperView, nullptr, MS_BIND, nullptr) != 0 ||
      mount(nullptr, kUpperView, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
    return Errno("bind the workspace's upper layer");
  }
  // Renamed directories are copied (no redirects), so that the upper layer alone says what
  // changed, path by path.
  std::string options = std::string("lowerdir=") + kBaseDir + ",upperdir=" + upper +
                        ",workdir=" + session + "/work,redirect_dir=off,index=off,metacopy=off";
  if (mount("overlay", kGuestWorkspaceDir, "overlay", MS_NODEV, options.c_str()) != 0) {
    return Errno("mount the overlay at /workspace");
  }
  mounted = true;
  return "";
}

namespace {

// Walks the upper layer against the base and writes a record per difference to stdout.
class DiffWalker {
 public:
  int Run() {
    FdCloser upper(open(kUpperView, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    FdCloser base(open(kBaseDir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (upper.get() < 0 || base.get() < 0) {
      Fail("this session has no workspace (it was created without --workspace)");
      return 3;
    }
    CompareDir("", upper.get(), base.get(), false);
    return failed_ ? 1 : 0;
  }

 private:
  struct Side {
    bool exists = false;
    struct stat st = {};
  };

  static Side Stat(int dir, const std::string& name) {
    Side s;
    if (dir >= 0 && fstatat(dir, name.c_str(), &s.st, AT_SYMLINK_NOFOLLOW) == 0) s.exists = true;
    return s;
  }
  static bool Shown(const struct stat& st) { return S_ISREG(st.st_mode) || S_ISLNK(st.st_mode); }
  static uint32_t Mode(const struct stat& st) {
    return static_cast<uint32_t>(st.st_mode & (S_IFMT | 07777));
  }

  static std::vector<std::string> Names(int dir) {
    std::vector<std::string> names;
    int fd = dup(dir);
    if (fd < 0) return names;
    lseek(fd, 0, SEEK_SET);
    DIR* d = fdopendir(fd);
    if (d == nullptr) {
      close(fd);
      return names;
    }
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  void Fail(const std::string& why) {
    std::string line = "airlock workspace-diff: " + why + "\n";
    (void)!write(STDERR_FILENO, line.data(), line.size());
    failed_ = true;
  }

  void Emit(const WorkspaceChange& change) {
    std::string bytes = EncodeWorkspaceChange(change);
    const char* p = bytes.data();
    size_t left = bytes.size();
    while (left > 0) {
      ssize_t n = write(STDOUT_FILENO, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(1);  // the host went away
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

  static std::string ReadLink(int dir, const std::string& name) {
    std::string target(kMaxChangePath + 1, '\0');
    ssize_t n = readlinkat(dir, name.c_str(), target.data(), target.size());
    target.resize(n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), kMaxChangePath));
    return target;
  }

  // Reads a regular file: its content when small enough and within the budget, whether it
  // is binary, and its digest.
  struct Content {
    bool read = false;
    std::string bytes;  // the whole file, when read
    bool binary = false;
    bool too_large = false;
    std::array<uint8_t, 32> sha256 = {};
  };
  Content ReadContent(int dir, const std::string& name, const struct stat& st) {
    Content c;
    FdCloser fd(openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0) return c;
    c.too_large = static_cast<uint64_t>(st.st_size) > kMaxDiffContent;
    Sha256 hash;
    std::string bytes;
    char buf[65536];
    for (;;) {
      ssize_t n = read(fd.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      hash.Update(buf, static_cast<size_t>(n));
      if (!c.binary && memchr(buf, '\0', static_cast<size_t>(n)) != nullptr) c.binary = true;
      if (!c.too_large) {
        if (bytes.size() + static_cast<size_t>(n) > kMaxDiffContent) {
          c.too_large = true;
          bytes.clear();
        } else {
          bytes.append(buf, static_cast<size_t>(n));
        }
      }
    }
    c.sha256 = hash.Finish();
    c.read = !c.too_large;
    if (c.read) c.bytes = std::move(bytes);
    return c;
  }

  // Puts a side's content into the record if it is text and the budget allows.
  void Include(const Content& c, uint32_t flag, std::string* into, WorkspaceChange* change) {
    if (c.binary) change->flags |= kChangeBinary;
    if (c.too_large) change->flags |= kChangeTooLarge;
    if (!c.read || c.binary) return;
    if (c.bytes.size() > budget_) {
      change->flags |= kChangeOmitted;
      return;
    }
    budget_ -= c.bytes.size();
    *into = c.bytes;
    change->flags |= flag;
  }

  void Describe(int dir, const std::string& name, const struct stat& st, bool old_side,
                WorkspaceChange* change) {
    if (old_side) {
      change->old_mode = Mode(st);
      change->old_size = static_cast<uint64_t>(st.st_size);
    } else {
      change->new_mode = Mode(st);
      change->new_size = static_cast<uint64_t>(st.st_size);
    }
    if (S_ISLNK(st.st_mode)) {
      (old_side ? change->old_target : change->new_target) = ReadLink(dir, name);
      return;
    }
    Content c = ReadContent(dir, name, st);
    if (old_side) {
      Include(c, kChangeOldContent, &change->old_content, change);
    } else {
      Include(c, kChangeNewContent, &change->new_content, change);
      change->new_sha256.assign(reinterpret_cast<const char*>(c.sha256.data()), c.sha256.size());
    }
  }

  static std::string Join(const std::string& rel, const std::string& name) {
    return rel.empty() ? name : rel + "/" + name;
  }

  // Everything at dir/name (a file, a symlink or a tree) as deleted or added.
  void EmitTree(const std::string& path, int dir, const std::string& name, bool deleted) {
    Side s = Stat(dir, name);
    if (!s.exists || path.size() > kMaxChangePath) return;
    if (S_ISDIR(s.st.st_mode)) {
      FdCloser sub(openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.get() < 0) return;
      for (const std::string& child : Names(sub.get())) {
        if (!deleted && IsWhiteout(sub.get(), child)) continue;
        EmitTree(Join(path, child), sub.get(), child, deleted);
      }
      return;
    }
    if (!Shown(s.st)) return;
    WorkspaceChange change;
    change.kind = deleted ? ChangeKind::kDeleted : ChangeKind::kAdded;
    change.path = path;
    Describe(dir, name, s.st, deleted, &change);
    Emit(change);
  }

  static bool IsWhiteout(int dir, const std::string& name) {
    Side s = Stat(dir, name);
    return s.exists && S_ISCHR(s.st.st_mode) && s.st.st_rdev == 0;
  }

  static bool IsOpaque(int dir, const std::string& name) {
    FdCloser sub(openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    char value[4];
    return sub.get() >= 0 &&
           fgetxattr(sub.get(), "trusted.overlay.opaque", value, sizeof value) == 1 &&
           value[0] == 'y';
  }

  bool SameFile(int upper, int lower, const std::string& name, const struct stat& a,
                const struct stat& b) {
    if (a.st_size != b.st_size) return false;
    FdCloser x(openat(upper, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    FdCloser y(openat(lower, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (x.get() < 0 || y.get() < 0) return false;
    char p[65536], q[65536];
    for (;;) {
      ssize_t n = read(x.get(), p, sizeof p);
      if (n < 0) return false;
      ssize_t got = 0;
      while (got < n) {
        ssize_t m = read(y.get(), q + got, static_cast<size_t>(n - got));
        if (m <= 0) return false;
        got += m;
      }
      if (n == 0) return read(y.get(), q, 1) == 0;
      if (memcmp(p, q, static_cast<size_t>(n)) != 0) return false;
    }
  }

  void CompareDir(const std::string& rel, int upper, int lower, bool opaque) {
    std::vector<std::string> upper_names = Names(upper);
    for (const std::string& name : upper_names) {
      if (rel.empty() && name == ".git") continue;
      std::string path = Join(rel, name);
      if (path.size() > kMaxChangePath) continue;
      Side u = Stat(upper, name);
      Side l = Stat(lower, name);
      if (!u.exists) continue;
      if (S_ISCHR(u.st.st_mode) && u.st.st_rdev == 0) {  // a whiteout: deleted
        if (l.exists) EmitTree(path, lower, name, true);
        continue;
      }
      if (S_ISDIR(u.st.st_mode)) {
        FdCloser sub(openat(upper, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (sub.get() < 0) continue;
        if (l.exists && S_ISDIR(l.st.st_mode)) {
          FdCloser lower_sub(
              openat(lower, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          CompareDir(path, sub.get(), lower_sub.get(), IsOpaque(upper, name));
        } else {
          if (l.exists) EmitTree(path, lower, name, true);
          CompareDir(path, sub.get(), -1, false);
        }
        continue;
      }
      if (!Shown(u.st)) continue;
      if (l.exists && S_ISDIR(l.st.st_mode)) {
        EmitTree(path, lower, name, true);
        l.exists = false;
      }
      WorkspaceChange change;
      change.path = path;
      if (l.exists && Shown(l.st)) {
        bool same_type = (u.st.st_mode & S_IFMT) == (l.st.st_mode & S_IFMT);
        if (same_type && Mode(u.st) == Mode(l.st)) {
          if (S_ISLNK(u.st.st_mode) ? ReadLink(upper, name) == ReadLink(lower, name)
                                    : SameFile(upper, lower, name, u.st, l.st)) {
            continue;  // copied up, unchanged
          }
        }
        change.kind = ChangeKind::kModified;
        Describe(lower, name, l.st, true, &change);
      } else {
        if (l.exists) EmitTree(path, lower, name, true);  // a device or fifo replaced
        change.kind = ChangeKind::kAdded;
      }
      Describe(upper, name, u.st, false, &change);
      Emit(change);
    }
    if (!opaque || lower < 0) return;
    // An opaque directory hides everything of the base below it that it does not hold itself.
    for (const std::string& name : Names(lower)) {
      if (std::binary_search(upper_names.begin(), upper_names.end(), name)) continue;
      EmitTree(Join(rel, name), lower, name, true);
    }
  }

  uint64_t budget_ = kContentBudget;
  bool failed_ = false;
};

}  // namespace

int WorkspaceDiffMain() { return DiffWalker().Run(); }

}  // namespace airlock::guest
