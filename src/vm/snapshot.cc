#include "src/vm/snapshot.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"

namespace airlock {
namespace {

// How long the guest may take to stop sending and QEMU to write its state.
constexpr absl::Duration kQuiesceTimeout = absl::Seconds(10);
constexpr absl::Duration kSaveTimeout = absl::Seconds(120);

absl::StatusOr<SnapshotManifest> WriteSnapshotFiles(Vm& vm, int disk_fd, const std::string& tmp,
                                                    SnapshotManifest manifest,
                                                    const std::string& key, SnapshotDisk disk) {
  std::string state_path = absl::StrCat(tmp, "/", kSnapshotStateFile);
  UniqueFd state(open(state_path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600));
  if (!state.valid()) return ErrnoStatus("create", state_path);
  if (absl::Status s = vm.channel().Quiesce(absl::Now() + kQuiesceTimeout); !s.ok()) return s;
  if (absl::Status s = vm.SaveState(state.get(), absl::Now() + kSaveTimeout); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("saving the VM's state failed: ", s.message()));
  }
  std::string disk_path = absl::StrCat(tmp, "/", kSnapshotDiskFile);
  if (disk == SnapshotDisk::kLink) {
    std::string self = absl::StrCat("/proc/self/fd/", disk_fd);
    if (linkat(AT_FDCWD, self.c_str(), AT_FDCWD, disk_path.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      return ErrnoStatus("link the session disk into", tmp);
    }
  } else {
    UniqueFd copy(open(disk_path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
    if (!copy.valid()) return ErrnoStatus("create", disk_path);
    if (absl::Status s = CopyDisk(disk_fd, copy.get()); !s.ok()) return s;
    if (fsync(copy.get()) != 0) return ErrnoStatus("fsync", disk_path);
  }
  if (fsync(state.get()) != 0) return ErrnoStatus("fsync", state_path);
  if (disk == SnapshotDisk::kLink && fsync(disk_fd) != 0) return ErrnoStatus("fsync", disk_path);
  manifest.files.clear();
  for (const char* name : {kSnapshotStateFile, kSnapshotDiskFile}) {
    absl::StatusOr<SnapshotFile> file = DescribeFile(tmp, name);
    if (!file.ok()) return file.status();
    manifest.files.push_back(*file);
  }
  if (absl::Status s = WriteFileAtomically(absl::StrCat(tmp, "/", kSnapshotManifestFile),
                                           SignManifest(manifest, key), 0600);
      !s.ok()) {
    return s;
  }
  return manifest;
}

}  // namespace

absl::StatusOr<SnapshotManifest> TakeSnapshot(Vm& vm, int disk_fd, const std::string& dir,
                                              SnapshotManifest manifest, const std::string& key,
                                              SnapshotDisk disk) {
  std::string tmp = dir + ".tmp";
  if (absl::Status s = RemoveTree(tmp); !s.ok()) return s;
  if (absl::Status s = MakeDirectories(DirName(dir), 0700); !s.ok()) return s;
  if (mkdir(tmp.c_str(), 0700) != 0) return ErrnoStatus("create", tmp);
  absl::StatusOr<SnapshotManifest> written =
      WriteSnapshotFiles(vm, disk_fd, tmp, std::move(manifest), key, disk);
  if (written.ok()) {
    // Replace an older snapshot of the same name, if any (templates are rebuilt in place).
    std::string old = dir + ".old";
    struct stat st;
    bool had_old = stat(dir.c_str(), &st) == 0;
    if (had_old && (!RemoveTree(old).ok() || rename(dir.c_str(), old.c_str()) != 0)) {
      written = ErrnoStatus("move aside the older snapshot", dir);
    } else if (rename(tmp.c_str(), dir.c_str()) != 0) {
      written = ErrnoStatus("rename the snapshot to", dir);
    } else if (absl::Status s = SyncDirectory(DirName(dir)); !s.ok()) {
      written = s;
    } else if (had_old) {
      RemoveTree(old).IgnoreError();
    }
  }
  if (!written.ok()) RemoveTree(tmp).IgnoreError();
  return written;
}

absl::StatusOr<UniqueFd> ReopenFile(int fd, bool writable) {
  UniqueFd reopened(
      open(absl::StrCat("/proc/self/fd/", fd).c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC));
  if (!reopened.valid()) return ErrnoStatus("reopen a snapshot file");
  return reopened;
}

absl::StatusOr<SnapshotManifest> OpenSnapshot(const std::string& dir, const std::string& key,
                                              SnapshotFiles* files) {
  std::string path = absl::StrCat(dir, "/", kSnapshotManifestFile);
  absl::StatusOr<std::string> text = ReadFileToString(path, kMaxManifestBytes + 1);
  if (!text.ok()) {
    return absl::Status(text.status().code(), absl::StrCat("snapshot refused: no manifest (",
                                                           text.status().message(), ")"));
  }
  absl::StatusOr<SnapshotManifest> manifest = VerifyManifest(*text, key);
  if (!manifest.ok()) return manifest.status();
  bool has_state = false, has_disk = false;
  for (const SnapshotFile& f : manifest->files) {
    has_state = has_state || f.name == kSnapshotStateFile;
    has_disk = has_disk || f.name == kSnapshotDiskFile;
  }
  if (!has_state || !has_disk) {
    return absl::DataLossError("snapshot refused: the manifest does not name a state and a disk");
  }
  std::map<std::string, UniqueFd> opened;
  if (absl::Status s = VerifySnapshotFiles(dir, *manifest, files ? &opened : nullptr); !s.ok()) {
    return s;
  }
  if (files != nullptr) {
    files->state = std::move(opened[kSnapshotStateFile]);
    files->disk = std::move(opened[kSnapshotDiskFile]);
  }
  return manifest;
}

absl::Status CopyDisk(int from_fd, int new_fd) {
  if (ioctl(new_fd, FICLONE, from_fd) == 0) return absl::OkStatus();
  struct stat st;
  if (fstat(from_fd, &st) != 0) return ErrnoStatus("stat a disk to copy");
  if (ftruncate(new_fd, st.st_size) != 0) return ErrnoStatus("size a disk copy");
  off_t at = 0;
  while (at < st.st_size) {
    off_t data = lseek(from_fd, at, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;  // the rest is a hole
    if (data < 0) return ErrnoStatus("seek in a disk to copy");
    off_t hole = lseek(from_fd, data, SEEK_HOLE);
    if (hole < 0) return ErrnoStatus("seek in a disk to copy");
    for (off_t in = data, out = data; in < hole;) {
      ssize_t n = copy_file_range(from_fd, &in, new_fd, &out, static_cast<size_t>(hole - in), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus("copy a disk");
      if (n == 0) return absl::DataLossError("a disk shrank while it was copied");
    }
    at = hole;
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> UnnamedFile(const std::string& dir) {
  if (absl::Status s = MakeDirectories(dir, 0700); !s.ok()) return s;
  UniqueFd fd(open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus("create an unnamed file in", dir);
  return fd;
}

}  // namespace airlock
