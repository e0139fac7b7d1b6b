#include "src/common/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "src/common/errno_status.h"
#include "src/common/unique_fd.h"

namespace airlock {

std::vector<std::string> ListDirectory(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read", path);
    if (n == 0) return out;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is larger than ", max_bytes, " bytes"));
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

absl::Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("write");
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status LinkOpenFile(int fd, const std::string& path, const std::string& what) {
  std::string self = absl::StrCat("/proc/self/fd/", fd);
  if (linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) != 0) {
    return ErrnoStatus(what, path);
  }
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string& dir) {
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", dir);
  if (fsync(fd.get()) != 0) return ErrnoStatus("fsync", dir);
  return absl::OkStatus();
}

absl::Status CommitFile(const std::string& path, const std::string& final_path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path);
  if (fsync(fd.get()) != 0) return ErrnoStatus("fsync", path);
  if (rename(path.c_str(), final_path.c_str()) != 0) return ErrnoStatus("rename", path);
  return SyncDirectory(DirName(final_path));
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& content, mode_t mode) {
  // The thread id: unique among live threads of all processes, so concurrent writers of one
  // path (threads of airlockd too) never share a temporary file; the last rename wins whole.
  std::string tmp = absl::StrCat(path, ".tmp.", gettid());
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
  if (!fd.valid()) return ErrnoStatus("create", tmp);
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status status = ErrnoStatus("write", tmp);
      unlink(tmp.c_str());
      return status;
    }
    done += static_cast<size_t>(n);
  }
  if (fchmod(fd.get(), mode) != 0 || fsync(fd.get()) != 0) {
    absl::Status status = ErrnoStatus("fsync", tmp);
    unlink(tmp.c_str());
    return status;
  }
  fd.reset();
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status status = ErrnoStatus("rename", tmp);
    unlink(tmp.c_str());
    return status;
  }
  return SyncDirectory(DirName(path));
}

absl::Status MakeDirectories(const std::string& path, mode_t mode) {
  std::string partial;
  size_t at = 0;
  while (at != std::string::npos) {
    at = path.find('/', at + 1);
    partial = path.substr(0, at);
    if (partial.empty()) continue;
    if (mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) return ErrnoStatus("mkdir", partial);
  }
  return absl::OkStatus();
}

absl::Status RemoveTree(const std::string& path) {
  auto remove_one = [](const char* p, const struct stat*, int, struct FTW*) -> int {
    return remove(p) == 0 || errno == ENOENT ? 0 : -1;
  };
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? absl::OkStatus() : ErrnoStatus("stat", path);
  }
  if (nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0) {
    return ErrnoStatus("remove", path);
  }
  return absl::OkStatus();
}

}  // namespace airlock
