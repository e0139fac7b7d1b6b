#include "src/vm/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/log.h"

namespace airlock {
namespace {

bool WriteAllAt(int fd, const char* data, size_t size, off_t at) {
  while (size > 0) {
    ssize_t n = pwrite(fd, data, size, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n, size -= static_cast<size_t>(n), at += n;
  }
  return true;
}

// Gives back the blocks of fd's unwritten extents (ReserveGuestMemory's, which the guest never
// wrote): they read as zeros either way, so no byte changes and a paused session holds only
// what its guest wrote. Nothing to do where the filesystem cannot say (FIEMAP: tmpfs).
absl::Status GiveBackUnwritten(int fd) {
  constexpr uint32_t kBatch = 256;
  // A fiemap and its extents, in one buffer (fm_extents is a flexible array member).
  std::vector<uint64_t> buffer((sizeof(fiemap) + kBatch * sizeof(fiemap_extent)) / 8 + 1);
  auto* map = reinterpret_cast<fiemap*>(buffer.data());
  uint64_t at = 0;
  for (;;) {
    std::fill(buffer.begin(), buffer.end(), 0);
    map->fm_start = at;
    map->fm_length = FIEMAP_MAX_OFFSET - at;
    map->fm_extent_count = kBatch;
    if (ioctl(fd, FS_IOC_FIEMAP, map) != 0) {
      if (errno == EOPNOTSUPP || errno == ENOTTY) return absl::OkStatus();
      return ErrnoStatus("list the guest memory's extents");
    }
    if (map->fm_mapped_extents == 0) return absl::OkStatus();
    for (uint32_t i = 0; i < map->fm_mapped_extents; ++i) {
      const fiemap_extent& e = map->fm_extents[i];
      if ((e.fe_flags & FIEMAP_EXTENT_UNWRITTEN) != 0 &&
          fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    static_cast<off_t>(e.fe_logical), static_cast<off_t>(e.fe_length)) != 0) {
        return ErrnoStatus("give back the guest memory's unused blocks");
      }
      if ((e.fe_flags & FIEMAP_EXTENT_LAST) != 0) return absl::OkStatus();
      at = e.fe_logical + e.fe_length;
    }
  }
}

// The RAM of a VM that writes it into a file (Vm::shared_memory_fd) as the snapshot's memory
// file in dir. A resumed session's memory file becomes the snapshot's, as its disk does: a hard
// link after an fsync, which writes only the pages the guest changed since it was last written
// (issue 43: a pause that costs what changed, not the RAM's size). A memfd (a template's RAM,
// which goes on running) is copied.
absl::Status SaveSharedMemory(int memory_fd, const std::string& dir) {
  std::string path = absl::StrCat(dir, "/", kSnapshotMemoryFile);
  std::string self = absl::StrCat("/proc/self/fd/", memory_fd);
  if (linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) == 0) {
    // Openable by the VM's uid while it ran (OpenSnapshot); a snapshot file is the host's alone.
    if (fchmod(memory_fd, 0600) != 0) return ErrnoStatus("chmod", path);
    if (fsync(memory_fd) != 0) return ErrnoStatus("fsync", path);
    absl::StatusOr<UniqueFd> writable = ReopenFile(memory_fd, /*writable=*/true);
    if (!writable.ok()) return writable.status();
    return GiveBackUnwritten(writable->get());
  }
  if (errno != EXDEV) return ErrnoStatus("link the guest's memory as", path);
  UniqueFd memory(open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!memory.valid()) return ErrnoStatus("create", path);
  if (absl::Status s = CopyDisk(memory_fd, memory.get()); !s.ok()) return s;
  if (fsync(memory.get()) != 0) return ErrnoStatus("fsync", path);
  return absl::OkStatus();
}

// How long the guest may take to stop sending and QEMU to write its state.
constexpr absl::Duration kQuiesceTimeout = absl::Seconds(10);
constexpr absl::Duration kSaveTimeout = absl::Seconds(120);

absl::StatusOr<SnapshotManifest> WriteSnapshotFiles(Vm& vm, int disk_fd, const std::string& tmp,
                                                    SnapshotManifest manifest,
                                                    const std::string& key) {
  std::string state_path = absl::StrCat(tmp, "/", kSnapshotStateFile);
  UniqueFd state(open(state_path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600));
  if (!state.valid()) return ErrnoStatus("create", state_path);
  if (absl::Status s = vm.channel().Quiesce(absl::Now() + kQuiesceTimeout); !s.ok()) return s;
  if (absl::Status s = vm.SaveState(state.get(), absl::Now() + kSaveTimeout); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("saving the VM's state failed: ", s.message()));
  }
  std::string disk_path = absl::StrCat(tmp, "/", kSnapshotDiskFile);
  if (absl::Status s = LinkOpenFile(disk_fd, disk_path, "link the session disk as"); !s.ok()) {
    return s;
  }
  if (fsync(state.get()) != 0) return ErrnoStatus("fsync", state_path);
  if (fsync(disk_fd) != 0) return ErrnoStatus("fsync", disk_path);
  std::vector<const char*> names = {kSnapshotStateFile, kSnapshotDiskFile};
  if (vm.shared_memory_fd() >= 0) {
    // The state left the RAM out: it is that file's bytes.
    if (absl::Status s = SaveSharedMemory(vm.shared_memory_fd(), tmp); !s.ok()) return s;
    names.push_back(kSnapshotMemoryFile);
  }
  manifest.files.clear();
  if (absl::Status s = WriteSignedManifest(tmp, names, key, &manifest); !s.ok()) return s;
  return manifest;
}

// Memory files loaded into sealed memfds, by digest, the most recently used last.
constexpr size_t kLoadedMemories = 4;
struct LoadedMemoryFile {
  std::string digest;
  std::shared_ptr<const UniqueFd> memfd;
};
ABSL_CONST_INIT absl::Mutex memories_mu(absl::kConstInit);
auto* memories ABSL_PT_GUARDED_BY(memories_mu) = new std::vector<LoadedMemoryFile>;

std::shared_ptr<const UniqueFd> LoadedMemory(const std::string& digest) {
  absl::MutexLock lock(&memories_mu);
  for (auto it = memories->begin(); it != memories->end(); ++it) {
    if (it->digest != digest) continue;
    LoadedMemoryFile entry = std::move(*it);
    memories->erase(it);
    memories->push_back(std::move(entry));
    return memories->back().memfd;
  }
  return nullptr;
}

void KeepMemory(const std::string& digest, std::shared_ptr<const UniqueFd> memfd) {
  absl::MutexLock lock(&memories_mu);
  if (memories->size() >= kLoadedMemories) memories->erase(memories->begin());
  memories->push_back({digest, std::move(memfd)});
}

// A new memfd named `name` holding the bytes of from_fd (size bytes), sealed against every
// change.
absl::StatusOr<std::shared_ptr<const UniqueFd>> SealedCopy(int from_fd, off_t size,
                                                           const char* name) {
  auto memfd = std::make_shared<UniqueFd>(memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!memfd->valid()) return ErrnoStatus("memfd_create");
  if (ftruncate(memfd->get(), size) != 0) return ErrnoStatus("size the guest's memory");
  if (absl::Status s = CopyDisk(from_fd, memfd->get()); !s.ok()) return s;
  if (absl::Status s = SealGuestMemory(memfd->get()); !s.ok()) return s;
  return memfd;
}

// The bytes of a snapshot's memory file in a new memfd, sealed, then checked against the
// manifest: what a VM maps is exactly what was checked, and no one (an escaped VM process
// included) can change it afterwards.
absl::StatusOr<std::shared_ptr<const UniqueFd>> LoadMemory(const std::string& dir,
                                                           const SnapshotFile& expected,
                                                           SnapshotUse use) {
  if (use == SnapshotUse::kTemplate) {
    if (std::shared_ptr<const UniqueFd> loaded = LoadedMemory(expected.sha256)) return loaded;
  }
  struct stat st;
  absl::StatusOr<UniqueFd> file = OpenSnapshotFile(dir, expected, &st);
  if (!file.ok()) return file.status();
  absl::StatusOr<std::shared_ptr<const UniqueFd>> memfd =
      SealedCopy(file->get(), st.st_size, "airlock-snapshot-memory");
  if (!memfd.ok()) return memfd.status();
  absl::StatusOr<std::string> digest = SparseSha256((*memfd)->get());
  if (!digest.ok()) return digest.status();
  if (*digest != expected.sha256) {
    return absl::DataLossError(absl::StrCat("snapshot refused: ", expected.name,
                                            " does not match its hash (it was changed)"));
  }
  if (absl::Status s = FillGuestMemory((*memfd)->get(), st.st_size); !s.ok()) return s;
  if (use == SnapshotUse::kTemplate) KeepMemory(expected.sha256, *memfd);
  return memfd;
}

}  // namespace

absl::StatusOr<SnapshotManifest> TakeSnapshot(Vm& vm, int disk_fd, const std::string& dir,
                                              SnapshotManifest manifest, const std::string& key) {
  std::string tmp = dir + ".tmp";
  if (absl::Status s = RemoveTree(tmp); !s.ok()) return s;
  if (absl::Status s = MakeDirectories(DirName(dir), 0700); !s.ok()) return s;
  if (mkdir(tmp.c_str(), 0700) != 0) return ErrnoStatus("create", tmp);
  absl::StatusOr<SnapshotManifest> written =
      WriteSnapshotFiles(vm, disk_fd, tmp, std::move(manifest), key);
  if (written.ok()) {
    // Replace an older snapshot of the same name, if any (templates are rebuilt in place).
    std::string old = dir + ".old";
    struct stat st;
    bool had_old = stat(dir.c_str(), &st) == 0;
    if (had_old && (!RemoveTree(old).ok() || rename(dir.c_str(), old.c_str()) != 0)) {
      written = ErrnoStatus("move aside the older snapshot", dir);
    } else if (rename(tmp.c_str(), dir.c_str()) != 0) {
      written = ErrnoStatus("rename the snapshot to", dir);
    } else {
      MoveVerifiedFiles(tmp, dir);
      if (absl::Status s = SyncDirectory(DirName(dir)); !s.ok()) {
        written = s;
      } else if (had_old) {
        LogIfFailed(RemoveTree(old), "remove the older snapshot");
      }
    }
  }
  if (!written.ok()) LogIfFailed(RemoveTree(tmp), "remove a half-written snapshot");
  return written;
}

absl::StatusOr<SnapshotFiles> TakeForkSnapshot(Vm& vm, int disk_fd,
                                               const std::string& scratch_dir) {
  SnapshotFiles files;
  files.state.reset(memfd_create("airlock-fork-state", MFD_CLOEXEC));
  if (!files.state.valid()) return ErrnoStatus("memfd_create");
  absl::StatusOr<UniqueFd> disk = UnnamedFile(scratch_dir);
  if (!disk.ok()) return disk.status();
  files.disk = *std::move(disk);
  if (absl::Status s = vm.channel().Quiesce(absl::Now() + kQuiesceTimeout); !s.ok()) return s;
  if (absl::Status s = vm.SaveState(files.state.get(), absl::Now() + kSaveTimeout); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("saving the VM's state failed: ", s.message()));
  }
  if (absl::Status s = CopyDisk(disk_fd, files.disk.get()); !s.ok()) return s;
  if (vm.shared_memory_fd() >= 0) {
    // The state left the RAM out: a copy of the file's bytes, which the VM goes on writing.
    struct stat st;
    if (fstat(vm.shared_memory_fd(), &st) != 0) return ErrnoStatus("stat the guest's memory");
    absl::StatusOr<std::shared_ptr<const UniqueFd>> memory =
        SealedCopy(vm.shared_memory_fd(), st.st_size, "airlock-fork-memory");
    if (!memory.ok()) return memory.status();
    if (absl::Status s = FillGuestMemory((*memory)->get(), st.st_size); !s.ok()) return s;
    files.memory = *std::move(memory);
  }
  // Read from the start by whoever loads it (ReopenFile gives each its own offset).
  if (lseek(files.state.get(), 0, SEEK_SET) != 0) return ErrnoStatus("rewind the VM's state");
  return files;
}

absl::Status ReserveGuestMemory(int memory_fd) {
  struct stat st;
  if (fstat(memory_fd, &st) != 0) return ErrnoStatus("stat the guest's memory");
  absl::StatusOr<UniqueFd> writable = ReopenFile(memory_fd, /*writable=*/true);
  if (!writable.ok()) return writable.status();
  if (fallocate(writable->get(), 0, 0, st.st_size) != 0) {
    absl::Status failed = ErrnoStatus(
        absl::StrCat("reserve disk space for the guest's RAM (", st.st_size >> 20, " MiB)"));
    LogIfFailed(GiveBackUnwritten(writable->get()), "give back a part of a reservation");
    return failed;
  }
  return absl::OkStatus();
}

absl::Status SealGuestMemory(int memfd) {
  if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    return ErrnoStatus("seal the guest's memory");
  }
  return absl::OkStatus();
}

absl::Status FillGuestMemory(int memfd, off_t size) {
  // Every page is given to the memfd now, once, in airlockd's memory. A VM maps the memfd
  // privately, and Linux gives a hole a page of the memfd's own the first time a VM touches
  // it, charged to that VM's host cgroup on top of the VM's private copy when it writes: a
  // guest that used all its RAM was charged nearly twice its RAM and killed by the host
  // (issue 44). Allocated pages are shared by every VM that maps the memfd and charged to none.
  // (Filling holes changes no byte: the seals allow it, and the contents hold.)
  if (fallocate(memfd, 0, 0, size) != 0) {
    return ErrnoStatus("allocate the guest's memory (the host is short of memory)");
  }
  return absl::OkStatus();
}

absl::Status WriteSignedManifest(const std::string& dir, const std::vector<const char*>& names,
                                 const std::string& key, SnapshotManifest* manifest,
                                 bool writers_ended) {
  for (const char* name : names) {
    absl::StatusOr<SnapshotFile> file = DescribeFile(dir, name, writers_ended);
    if (!file.ok()) return file.status();
    manifest->files.push_back(*file);
  }
  return WriteFileAtomically(absl::StrCat(dir, "/", kSnapshotManifestFile),
                             SignManifest(*manifest, key), 0600);
}

absl::StatusOr<UniqueFd> ReopenFile(int fd, bool writable) {
  UniqueFd reopened(
      open(absl::StrCat("/proc/self/fd/", fd).c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC));
  if (!reopened.valid()) return ErrnoStatus("reopen a snapshot file");
  return reopened;
}

absl::StatusOr<SnapshotManifest> OpenSnapshot(const std::string& dir, const std::string& key,
                                              SnapshotFiles* files, SnapshotUse use) {
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
  // With `files`, the memory is checked where it is loaded (its memfd), not read twice.
  SnapshotManifest to_check = *manifest;
  std::optional<SnapshotFile> memory;
  if (files != nullptr && use != SnapshotUse::kResume) {
    for (auto it = to_check.files.begin(); it != to_check.files.end(); ++it) {
      if (it->name != kSnapshotMemoryFile) continue;
      memory = *it;
      to_check.files.erase(it);
      break;
    }
  }
  std::map<std::string, UniqueFd> opened;
  if (absl::Status s = VerifySnapshotFiles(dir, to_check, files ? &opened : nullptr); !s.ok()) {
    return s;
  }
  if (files != nullptr) {
    files->state = std::move(opened[kSnapshotStateFile]);
    files->disk = std::move(opened[kSnapshotDiskFile]);
    files->memory = nullptr;
    if (auto it = opened.find(kSnapshotMemoryFile); it != opened.end()) {
      // kResume: the VM (another uid) opens the file again through its descriptor, read-write,
      // and maps it shared: it writes its RAM there from now on. It changes nothing another VM
      // sees: the session's snapshot is used up by this restore.
      if (fchmod(it->second.get(), 0666) != 0) return ErrnoStatus("hand the guest's memory over");
      files->memory = std::make_shared<const UniqueFd>(std::move(it->second));
      files->memory_own = true;
    } else if (memory) {
      absl::StatusOr<std::shared_ptr<const UniqueFd>> loaded = LoadMemory(dir, *memory, use);
      if (!loaded.ok()) return loaded.status();
      files->memory = *std::move(loaded);
    }
  }
  return manifest;
}

absl::Status CopyDisk(int from_fd, int new_fd) {
  if (ioctl(new_fd, FICLONE, from_fd) == 0) return absl::OkStatus();
  struct stat st;
  if (fstat(from_fd, &st) != 0) return ErrnoStatus("stat a disk to copy");
  if (ftruncate(new_fd, st.st_size) != 0) return ErrnoStatus("size a disk copy");
  off_t at = 0;
  bool plain_copy = false;
  std::string buffer;
  while (at < st.st_size) {
    off_t data = lseek(from_fd, at, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;  // the rest is a hole
    if (data < 0) return ErrnoStatus("seek in a disk to copy");
    off_t hole = lseek(from_fd, data, SEEK_HOLE);
    if (hole < 0) return ErrnoStatus("seek in a disk to copy");
    for (off_t in = data, out = data; in < hole;) {
      ssize_t n = -1;
      if (!plain_copy) {
        n = copy_file_range(from_fd, &in, new_fd, &out, static_cast<size_t>(hole - in), 0);
        if (n < 0 && (errno == EXDEV || errno == EOPNOTSUPP || errno == EINVAL)) {
          plain_copy = true;  // between filesystems (a memfd and a file): read and write
          continue;
        }
      } else {
        buffer.resize(1 << 20);
        n = pread(from_fd, buffer.data(),
                  static_cast<size_t>(std::min<off_t>(hole - in, buffer.size())), in);
        if (n > 0 && !WriteAllAt(new_fd, buffer.data(), static_cast<size_t>(n), out)) n = -1;
        if (n > 0) in += n, out += n;
      }
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
