#include "src/guest/guest_layer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

namespace airlock::guest {
namespace {

constexpr size_t kBlock = 512;
constexpr int kMaxDepth = 256;

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

class TarWriter {
 public:
  explicit TarWriter(int fd) : fd_(fd) {}

  // One entry's header (a PAX header first when a field does not fit or xattrs go with it).
  std::string Header(const std::string& path, char type, const struct stat& st, uint64_t size,
                     const std::string& link,
                     const std::vector<std::pair<std::string, std::string>>& xattrs) {
    std::string pax;
    if (path.size() > 99) AddRecord(&pax, "path", path);
    if (link.size() > 99) AddRecord(&pax, "linkpath", link);
    if (size > 077777777777ull) AddRecord(&pax, "size", std::to_string(size));
    if (st.st_uid > 07777777) AddRecord(&pax, "uid", std::to_string(st.st_uid));
    if (st.st_gid > 07777777) AddRecord(&pax, "gid", std::to_string(st.st_gid));
    for (const auto& [name, value] : xattrs) AddRecord(&pax, "SCHILY.xattr." + name, value);
    if (!pax.empty()) {
      struct stat none {};
      std::string err = Block("PaxHeaders/entry", 'x', none, pax.size(), "");
      if (err.empty()) err = Data(pax.data(), pax.size());
      if (err.empty()) err = Pad(pax.size());
      if (!err.empty()) return err;
    }
    return Block(path.substr(0, 99), type, st, size, link.substr(0, 99));
  }

  std::string Data(const char* data, size_t n) {
    while (n > 0) {
      ssize_t w = write(fd_, data, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return Errno("write the layer");
      data += w;
      n -= static_cast<size_t>(w);
    }
    return "";
  }

  std::string Pad(uint64_t size) {
    static const char zeros[kBlock] = {};
    size_t rest = size % kBlock;
    return rest == 0 ? "" : Data(zeros, kBlock - rest);
  }

  std::string End() {
    static const char zeros[2 * kBlock] = {};
    return Data(zeros, sizeof(zeros));
  }

 private:
  // "LEN key=value\n", LEN counting the whole record with its own digits.
  static void AddRecord(std::string* pax, const std::string& key, const std::string& value) {
    size_t body = key.size() + value.size() + 3;  // ' ', '=', '\n'
    size_t len = body + std::to_string(body).size();
    if (std::to_string(len).size() != std::to_string(body).size()) ++len;
    *pax += std::to_string(len) + " " + key + "=" + value + "\n";
  }

  static void Octal(char* field, size_t width, uint64_t value) {
    std::snprintf(field, width, "%0*llo", static_cast<int>(width - 1),
                  static_cast<unsigned long long>(value));
  }

  std::string Block(const std::string& name, char type, const struct stat& st, uint64_t size,
                    const std::string& link) {
    char h[kBlock] = {};
    memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
    Octal(h + 100, 8, st.st_mode & 07777);
    Octal(h + 108, 8, st.st_uid > 07777777 ? 0 : st.st_uid);
    Octal(h + 116, 8, st.st_gid > 07777777 ? 0 : st.st_gid);
    Octal(h + 124, 12, size > 077777777777ull ? 0 : size);
    Octal(h + 136, 12, st.st_mtime < 0 || st.st_mtime > 077777777777ll ? 0 : st.st_mtime);
    h[156] = type;
    memcpy(h + 157, link.data(), std::min<size_t>(link.size(), 100));
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    if (type == '3' || type == '4') {
      Octal(h + 329, 8, major(st.st_rdev));
      Octal(h + 337, 8, minor(st.st_rdev));
    }
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    h[155] = ' ';
    return Data(h, sizeof(h));
  }

  int fd_;
};

class LayerWalk {
 public:
  LayerWalk(TarWriter* tar, const std::vector<std::string>& skip) : tar_(tar), skip_(skip) {}

  std::string Dir(const std::string& root, const std::string& rel, int depth) {
    if (depth > kMaxDepth) return rel + ": directories nested too deep";
    std::string path = rel.empty() ? root : root + "/" + rel;
    DIR* dir = opendir(path.c_str());
    if (dir == nullptr) return Errno("open " + path);
    std::vector<std::string> names;
    while (dirent* e = readdir(dir)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(dir);
    std::sort(names.begin(), names.end());  // the same tree gives the same bytes
    for (const std::string& name : names) {
      std::string child = rel.empty() ? name : rel + "/" + name;
      if (std::find(skip_.begin(), skip_.end(), child) != skip_.end()) continue;
      std::string err = Entry(root, child, depth);
      if (!err.empty()) return err;
    }
    return "";
  }

 private:
  std::string Entry(const std::string& root, const std::string& rel, int depth) {
    std::string path = root + "/" + rel;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) return Errno("stat " + path);
    std::vector<std::pair<std::string, std::string>> xattrs;
    bool opaque = false;
    if (std::string err = Xattrs(path, &xattrs, &opaque); !err.empty()) return err;
    if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {  // overlay's whiteout
      size_t slash = rel.rfind('/');
      std::string wh = slash == std::string::npos
                           ? ".wh." + rel
                           : rel.substr(0, slash + 1) + ".wh." + rel.substr(slash + 1);
      struct stat none {};
      none.st_mtime = st.st_mtime;
      return tar_->Header(wh, '0', none, 0, "", {});
    }
    if (S_ISDIR(st.st_mode)) {
      std::string err = tar_->Header(rel + "/", '5', st, 0, "", xattrs);
      if (err.empty() && opaque) {
        struct stat none {};
        err = tar_->Header(rel + "/.wh..wh..opq", '0', none, 0, "", {});
      }
      if (err.empty()) err = Dir(root, rel, depth + 1);
      return err;
    }
    if (S_ISLNK(st.st_mode)) {
      std::string target(4096, '\0');
      ssize_t n = readlink(path.c_str(), target.data(), target.size());
      if (n < 0) return Errno("readlink " + path);
      target.resize(static_cast<size_t>(n));
      return tar_->Header(rel, '2', st, 0, target, xattrs);
    }
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode)) {
      return tar_->Header(rel,
                          S_ISCHR(st.st_mode)   ? '3'
                          : S_ISBLK(st.st_mode) ? '4'
                                                : '6',
                          st, 0, "", xattrs);
    }
    if (!S_ISREG(st.st_mode)) return "";  // a socket: nothing a layer can hold
    if (st.st_nlink > 1) {
      auto [it, first] = links_.emplace(std::make_pair(st.st_dev, st.st_ino), rel);
      if (!first) return tar_->Header(rel, '1', st, 0, it->second, xattrs);
    }
    return File(path, rel, st, xattrs);
  }

  std::string File(const std::string& path, const std::string& rel, const struct stat& st,
                   const std::vector<std::pair<std::string, std::string>>& xattrs) {
    int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return Errno("open " + path);
    uint64_t size = static_cast<uint64_t>(st.st_size);
    std::string err = tar_->Header(rel, '0', st, size, "", xattrs);
    std::vector<char> buf(1 << 16);
    uint64_t done = 0;
    while (err.empty() && done < size) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - done));
      ssize_t n = read(fd, buf.data(), want);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        err = Errno("read " + path);
        break;
      }
      if (n == 0) {  // it shrank while read: the header said `size`, so zeros make it up
        std::fill(buf.begin(), buf.end(), 0);
        n = static_cast<ssize_t>(want);
      }
      err = tar_->Data(buf.data(), static_cast<size_t>(n));
      done += static_cast<uint64_t>(n);
    }
    close(fd);
    if (err.empty()) err = tar_->Pad(size);
    return err;
  }

  // The entry's xattrs but overlay's own, and whether overlay marked it opaque.
  static std::string Xattrs(const std::string& path,
                            std::vector<std::pair<std::string, std::string>>* out, bool* opaque) {
    std::string names(65536, '\0');
    ssize_t n = llistxattr(path.c_str(), names.data(), names.size());
    if (n < 0) {
      if (errno == ENOTSUP) return "";
      return Errno("list the xattrs of " + path);
    }
    for (size_t at = 0; at < static_cast<size_t>(n);) {
      std::string name(names.c_str() + at);
      at += name.size() + 1;
      std::string value(65536, '\0');
      ssize_t v = lgetxattr(path.c_str(), name.c_str(), value.data(), value.size());
      if (v < 0) continue;  // gone meanwhile
      value.resize(static_cast<size_t>(v));
      if (name.rfind("trusted.overlay.", 0) == 0) {
        if (name == "trusted.overlay.opaque" && value == "y") *opaque = true;
        continue;
      }
      out->emplace_back(std::move(name), std::move(value));
    }
    return "";
  }

  TarWriter* tar_;
  const std::vector<std::string>& skip_;
  std::map<std::pair<dev_t, ino_t>, std::string> links_;
};

}  // namespace

std::string WriteLayerTar(const std::string& root, int out_fd,
                          const std::vector<std::string>& skip) {
  TarWriter tar(out_fd);
  LayerWalk walk(&tar, skip);
  std::string err = walk.Dir(root, "", 0);
  if (err.empty()) err = tar.End();
  return err;
}

int LayerTarMain() {
  // What the agent wrote itself, not the build's commands.
  std::string err = WriteLayerTar(kRootUpperView, STDOUT_FILENO, {"etc/resolv.conf"});
  if (!err.empty()) {
    std::fprintf(stderr, "layer-tar: %s\n", err.c_str());
    return 1;
  }
  return 0;
}

}  // namespace airlock::guest
