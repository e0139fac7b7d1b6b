#include "src/image/ext4_writer.h"

extern "C" {
#include <et/com_err.h>
}
#include <ext2fs/ext2fs.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/common/errno_status.h"
#include "src/common/unique_fd.h"

namespace airlock {
namespace {

constexpr uint32_t kBlockSize = 4096;
constexpr int kMaxDepth = 256;

int FileType(uint32_t type) {
  switch (type) {
    case S_IFREG:
      return EXT2_FT_REG_FILE;
    case S_IFDIR:
      return EXT2_FT_DIR;
    case S_IFLNK:
      return EXT2_FT_SYMLINK;
    case S_IFCHR:
      return EXT2_FT_CHRDEV;
    case S_IFBLK:
      return EXT2_FT_BLKDEV;
    case S_IFIFO:
      return EXT2_FT_FIFO;
    case S_IFSOCK:
      return EXT2_FT_SOCK;
    default:
      return EXT2_FT_UNKNOWN;
  }
}

}  // namespace

absl::Status Ext4Writer::Check(long err, absl::string_view what, absl::string_view path) {
  if (err == 0) return absl::OkStatus();
  std::string message = absl::StrCat(what, path.empty() ? "" : " ", path, ": ", error_message(err));
  if (err == EXT2_ET_BLOCK_ALLOC_FAIL || err == EXT2_ET_INODE_ALLOC_FAIL || err == ENOSPC) {
    return absl::ResourceExhaustedError(absl::StrCat(message, " (the filesystem is full)"));
  }
  return absl::InternalError(message);
}

absl::StatusOr<std::unique_ptr<Ext4Writer>> Ext4Writer::Create(const std::string& path,
                                                               const Options& options) {
  if (options.size_bytes < 8 * 1024 * 1024) {
    return absl::InvalidArgumentError("an ext4 filesystem needs at least 8 MiB");
  }
  {
    UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    if (!fd.valid()) return ErrnoStatus("create", path);
    if (ftruncate(fd.get(), 0) != 0 ||
        ftruncate(fd.get(), static_cast<off_t>(options.size_bytes)) != 0) {
      return ErrnoStatus("truncate", path);
    }
  }
  initialize_ext2_error_table();
  ext2_super_block param = {};
  ext2fs_blocks_count_set(&param, options.size_bytes / kBlockSize);
  param.s_log_block_size = 2;  // 1024 << 2
  param.s_rev_level = EXT2_DYNAMIC_REV;
  param.s_inode_size = 256;
  param.s_inodes_count = options.inode_count;
  param.s_feature_incompat = EXT2_FEATURE_INCOMPAT_FILETYPE | EXT3_FEATURE_INCOMPAT_EXTENTS;
  param.s_feature_ro_compat = EXT2_FEATURE_RO_COMPAT_SPARSE_SUPER |
                              EXT2_FEATURE_RO_COMPAT_LARGE_FILE | EXT4_FEATURE_RO_COMPAT_HUGE_FILE |
                              EXT4_FEATURE_RO_COMPAT_DIR_NLINK | EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE;
  param.s_feature_compat = EXT2_FEATURE_COMPAT_EXT_ATTR;
  param.s_min_extra_isize = param.s_want_extra_isize = 32;
  ext2_filsys fs = nullptr;
  errcode_t err = ext2fs_initialize(path.c_str(), EXT2_FLAG_RW | EXT2_FLAG_64BITS, &param,
                                    unix_io_manager, &fs);
  if (err != 0) {
    return absl::InternalError(absl::StrCat("format ", path, ": ", error_message(err)));
  }
  std::unique_ptr<Ext4Writer> writer(new Ext4Writer(fs, path));
  absl::Status status = writer->Format(options);
  if (!status.ok()) return status;
  return writer;
}

Ext4Writer::~Ext4Writer() {
  if (fs_ != nullptr) {
    ext2fs_free(fs_);  // abandoned without Finish(): nothing more is written
  }
}

absl::Status Ext4Writer::Format(const Options& options) {
  ext2_filsys fs = fs_;
  fs->super->s_r_blocks_count = 0;
  ext2fs_r_blocks_count_set(fs->super, 0);
  if (getrandom(fs->super->s_uuid, sizeof(fs->super->s_uuid), 0) !=
          static_cast<ssize_t>(sizeof(fs->super->s_uuid)) ||
      getrandom(fs->super->s_hash_seed, sizeof(fs->super->s_hash_seed), 0) !=
          static_cast<ssize_t>(sizeof(fs->super->s_hash_seed))) {
    return ErrnoStatus("getrandom");
  }
  fs->super->s_def_hash_version = EXT2_HASH_HALF_MD4;
  fs->super->s_max_mnt_count = -1;
  strncpy(reinterpret_cast<char*>(fs->super->s_volume_name), options.label.c_str(),
          sizeof(fs->super->s_volume_name));
  fs->super->s_mkfs_time = fs->super->s_wtime = 0;
  fs->stride = 0;
  if (absl::Status s = Check(ext2fs_allocate_tables(fs), "allocate tables"); !s.ok()) return s;
  // A freshly truncated file reads as zeros, so the inode tables need no writing.
  // Reserved inodes (the bad-blocks inode, journal, ...) are in use; the root is made below.
  for (ext2_ino_t ino = EXT2_BAD_INO; ino < EXT2_FIRST_INODE(fs->super); ++ino) {
    if (ino != EXT2_ROOT_INO) ext2fs_inode_alloc_stats2(fs, ino, +1, 0);
  }
  if (absl::Status s = Check(ext2fs_mkdir(fs, EXT2_ROOT_INO, EXT2_ROOT_INO, nullptr), "mkdir /");
      !s.ok()) {
    return s;
  }
  dirs_[""] = EXT2_ROOT_INO;
  if (options.journal) {
    ext2fs_journal_params params;
    if (absl::Status s = Check(ext2fs_get_journal_params(&params, fs), "size the journal");
        !s.ok()) {
      return s;
    }
    // The file reads as zeros where nothing was written: the journal needs no zeroing either.
    if (absl::Status s =
            Check(ext2fs_add_journal_inode3(fs, &params, ~0ULL, EXT2_MKJOURNAL_LAZYINIT),
                  "add a journal");
        !s.ok()) {
      return s;
    }
  }
  return AddDirectory("lost+found", {.mode = 0700});
}

absl::Status Ext4Writer::Finish() {
  errcode_t err = ext2fs_close_free(&fs_);
  fs_ = nullptr;
  return Check(err, "write filesystem", path_);
}

absl::StatusOr<uint32_t> Ext4Writer::Lookup(absl::string_view path) {
  std::string name;
  absl::StatusOr<uint32_t> parent = Parent(path, &name);
  if (!parent.ok()) return parent.status();
  if (name.empty()) return *parent;
  ext2_ino_t ino = 0;
  errcode_t err = ext2fs_lookup(fs_, *parent, name.c_str(), name.size(), nullptr, &ino);
  if (err == EXT2_ET_FILE_NOT_FOUND) return absl::NotFoundError(absl::StrCat(path, " not found"));
  if (absl::Status s = Check(err, "lookup", path); !s.ok()) return s;
  return ino;
}

bool Ext4Writer::Exists(absl::string_view path) { return Lookup(path).ok(); }

absl::StatusOr<uint32_t> Ext4Writer::Parent(absl::string_view path, std::string* name) {
  size_t slash = path.rfind('/');
  std::string dir = slash == absl::string_view::npos ? "" : std::string(path.substr(0, slash));
  *name = std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
  auto cached = dirs_.find(dir);
  if (cached != dirs_.end()) return cached->second;
  // Walk component by component; every component must be a real directory (never a symlink).
  ext2_ino_t ino = EXT2_ROOT_INO;
  size_t start = 0;
  std::string walked;
  int depth = 0;
  while (start < dir.size()) {
    if (++depth > kMaxDepth) return absl::InvalidArgumentError(absl::StrCat(path, ": too deep"));
    size_t end = dir.find('/', start);
    if (end == std::string::npos) end = dir.size();
    std::string component = dir.substr(start, end - start);
    walked = walked.empty() ? component : absl::StrCat(walked, "/", component);
    auto hit = dirs_.find(walked);
    if (hit != dirs_.end()) {
      ino = hit->second;
    } else {
      ext2_ino_t next = 0;
      errcode_t err = ext2fs_lookup(fs_, ino, component.c_str(), component.size(), nullptr, &next);
      if (err == EXT2_ET_FILE_NOT_FOUND) {
        return absl::FailedPreconditionError(
            absl::StrCat(path, ": parent directory ", walked, " does not exist"));
      }
      if (absl::Status s = Check(err, "lookup", walked); !s.ok()) return s;
      ext2_inode inode;
      if (absl::Status s = Check(ext2fs_read_inode(fs_, next, &inode), "read inode", walked);
          !s.ok()) {
        return s;
      }
      if (!LINUX_S_ISDIR(inode.i_mode)) {
        return absl::FailedPreconditionError(
            absl::StrCat(path, ": ", walked, " is not a directory"));
      }
      ino = next;
      dirs_[walked] = ino;
    }
    start = end + 1;
  }
  return ino;
}

absl::Status Ext4Writer::WithRoomIn(uint32_t dir, absl::string_view what, absl::string_view path,
                                    const std::function<long()>& op) {
  errcode_t err = op();
  if (err == EXT2_ET_DIR_NO_SPACE) {
    if (absl::Status s = Check(ext2fs_expand_dir(fs_, dir), "expand directory", path); !s.ok()) {
      return s;
    }
    err = op();
  }
  return Check(err, what, path);
}

absl::Status Ext4Writer::Link(uint32_t parent, const std::string& name, uint32_t ino,
                              int file_type) {
  return WithRoomIn(parent, "link", name,
                    [&] { return ext2fs_link(fs_, parent, name.c_str(), ino, file_type); });
}

absl::Status Ext4Writer::ApplyMetadata(uint32_t ino, uint32_t type, const Ext4Metadata& meta) {
  ext2_inode inode;
  if (absl::Status s = Check(ext2fs_read_inode(fs_, ino, &inode), "read inode"); !s.ok()) return s;
  inode.i_mode = static_cast<uint16_t>(type | (meta.mode & 07777));
  inode.i_uid = static_cast<uint16_t>(meta.uid);
  ext2fs_set_i_uid_high(inode, meta.uid >> 16);
  inode.i_gid = static_cast<uint16_t>(meta.gid);
  ext2fs_set_i_gid_high(inode, meta.gid >> 16);
  uint32_t t = static_cast<uint32_t>(meta.mtime < 0 ? 0 : meta.mtime);
  inode.i_atime = inode.i_mtime = inode.i_ctime = t;
  return Check(ext2fs_write_inode(fs_, ino, &inode), "write inode");
}

absl::StatusOr<uint32_t> Ext4Writer::NewInode(uint32_t parent, uint32_t mode,
                                              const Ext4Metadata& meta, bool extents) {
  ext2_ino_t ino = 0;
  if (absl::Status s = Check(ext2fs_new_inode(fs_, parent, mode, nullptr, &ino), "allocate inode");
      !s.ok()) {
    return s;
  }
  ext2_inode inode = {};
  inode.i_mode = static_cast<uint16_t>(mode | (meta.mode & 07777));
  inode.i_links_count = 1;
  inode.i_uid = static_cast<uint16_t>(meta.uid);
  ext2fs_set_i_uid_high(inode, meta.uid >> 16);
  inode.i_gid = static_cast<uint16_t>(meta.gid);
  ext2fs_set_i_gid_high(inode, meta.gid >> 16);
  uint32_t t = static_cast<uint32_t>(meta.mtime < 0 ? 0 : meta.mtime);
  inode.i_atime = inode.i_mtime = inode.i_ctime = t;
  if (extents) {
    ext2_extent_handle_t handle;
    if (absl::Status s = Check(ext2fs_extent_open2(fs_, ino, &inode, &handle), "extent header");
        !s.ok()) {
      return s;
    }
    ext2fs_extent_free(handle);
  }
  if (absl::Status s = Check(ext2fs_write_new_inode(fs_, ino, &inode), "write inode"); !s.ok()) {
    return s;
  }
  ext2fs_inode_alloc_stats2(fs_, ino, +1, 0);
  return ino;
}

absl::Status Ext4Writer::RemoveInodeTree(uint32_t parent, const std::string& name, uint32_t ino,
                                         absl::string_view path) {
  ext2_inode inode;
  if (absl::Status s = Check(ext2fs_read_inode(fs_, ino, &inode), "read inode", path); !s.ok()) {
    return s;
  }
  bool is_dir = LINUX_S_ISDIR(inode.i_mode);
  if (is_dir) {
    if (absl::Status s = ClearDirectory(path); !s.ok()) return s;
    dirs_.erase(std::string(path));
  }
  if (absl::Status s = Check(ext2fs_unlink(fs_, parent, name.c_str(), ino, 0), "unlink", path);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Check(ext2fs_read_inode(fs_, ino, &inode), "read inode", path); !s.ok()) {
    return s;
  }
  if (is_dir) {
    inode.i_links_count = 0;
    ext2_inode parent_inode;
    if (absl::Status s = Check(ext2fs_read_inode(fs_, parent, &parent_inode), "read inode");
        !s.ok()) {
      return s;
    }
    if (parent_inode.i_links_count > 2) --parent_inode.i_links_count;
    if (absl::Status s = Check(ext2fs_write_inode(fs_, parent, &parent_inode), "write inode");
        !s.ok()) {
      return s;
    }
  } else if (inode.i_links_count > 0) {
    --inode.i_links_count;
  }
  if (inode.i_links_count > 0) return Check(ext2fs_write_inode(fs_, ino, &inode), "write inode");
  if (ext2fs_inode_has_valid_blocks2(fs_, &inode)) {
    if (absl::Status s = Check(ext2fs_punch(fs_, ino, &inode, nullptr, 0, ~0ULL), "free", path);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = Check(ext2fs_read_inode(fs_, ino, &inode), "read inode", path); !s.ok()) {
    return s;
  }
  if (ext2fs_file_acl_block(fs_, &inode) != 0) {
    ext2fs_block_alloc_stats2(fs_, ext2fs_file_acl_block(fs_, &inode), -1);
    ext2fs_file_acl_block_set(fs_, &inode, 0);
  }
  inode.i_links_count = 0;
  inode.i_dtime = static_cast<uint32_t>(time(nullptr));  // small values read as orphan links
  if (absl::Status s = Check(ext2fs_write_inode(fs_, ino, &inode), "write inode"); !s.ok()) {
    return s;
  }
  ext2fs_inode_alloc_stats2(fs_, ino, -1, is_dir ? 1 : 0);
  return absl::OkStatus();
}

absl::Status Ext4Writer::ClearDirectory(absl::string_view path) {
  absl::StatusOr<uint32_t> dir = Lookup(path);
  if (!dir.ok()) return dir.status();
  struct Entry {
    std::string name;
    uint32_t ino;
  };
  std::vector<Entry> entries;
  auto collect = [](ext2_ino_t, int, struct ext2_dir_entry* dirent, int, int, char*,
                    void* priv) -> int {
    std::string name(dirent->name, ext2fs_dirent_name_len(dirent));
    if (name != "." && name != ".." && dirent->inode != 0) {
      static_cast<std::vector<Entry>*>(priv)->push_back({name, dirent->inode});
    }
    return 0;
  };
  if (absl::Status s = Check(ext2fs_dir_iterate2(fs_, *dir, 0, nullptr, collect, &entries),
                             "list directory", path);
      !s.ok()) {
    return s;
  }
  for (const Entry& e : entries) {
    std::string child = path.empty() ? e.name : absl::StrCat(path, "/", e.name);
    if (absl::Status s = RemoveInodeTree(*dir, e.name, e.ino, child); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Ext4Writer::Remove(absl::string_view path) {
  std::string name;
  absl::StatusOr<uint32_t> parent = Parent(path, &name);
  if (!parent.ok()) {
    return absl::IsFailedPrecondition(parent.status()) ? absl::OkStatus() : parent.status();
  }
  bool kept;
  return RemoveExisting(*parent, name, path, false, &kept);
}

absl::Status Ext4Writer::RemoveExisting(uint32_t parent, const std::string& name,
                                        absl::string_view path, bool keep_directory,
                                        bool* kept_directory) {
  *kept_directory = false;
  if (name.empty()) return absl::InvalidArgumentError("cannot replace the root directory");
  ext2_ino_t ino = 0;
  errcode_t err = ext2fs_lookup(fs_, parent, name.c_str(), name.size(), nullptr, &ino);
  if (err == EXT2_ET_FILE_NOT_FOUND) return absl::OkStatus();
  if (absl::Status s = Check(err, "lookup", path); !s.ok()) return s;
  if (keep_directory) {
    ext2_inode inode;
    if (absl::Status s = Check(ext2fs_read_inode(fs_, ino, &inode), "read inode", path); !s.ok()) {
      return s;
    }
    if (LINUX_S_ISDIR(inode.i_mode)) {
      *kept_directory = true;
      return absl::OkStatus();
    }
  }
  return RemoveInodeTree(parent, name, ino, path);
}

absl::Status Ext4Writer::AddDirectory(absl::string_view path, const Ext4Metadata& meta) {
  std::string name;
  absl::StatusOr<uint32_t> parent = Parent(path, &name);
  if (!parent.ok()) return parent.status();
  if (name.empty()) return ApplyMetadata(EXT2_ROOT_INO, LINUX_S_IFDIR, meta);
  bool kept = false;
  if (absl::Status s = RemoveExisting(*parent, name, path, true, &kept); !s.ok()) return s;
  if (kept) {
    absl::StatusOr<uint32_t> ino = Lookup(path);
    if (!ino.ok()) return ino.status();
    return ApplyMetadata(*ino, LINUX_S_IFDIR, meta);
  }
  if (absl::Status s = WithRoomIn(*parent, "mkdir", path,
                                  [&] { return ext2fs_mkdir(fs_, *parent, 0, name.c_str()); });
      !s.ok()) {
    return s;
  }
  absl::StatusOr<uint32_t> ino = Lookup(path);
  if (!ino.ok()) return ino.status();
  dirs_[std::string(path)] = *ino;
  return ApplyMetadata(*ino, LINUX_S_IFDIR, meta);
}

absl::Status Ext4Writer::AddFile(absl::string_view path, const Ext4Metadata& meta, uint64_t size,
                                 const Reader& read) {
  std::string name;
  absl::StatusOr<uint32_t> parent = Parent(path, &name);
  if (!parent.ok()) return parent.status();
  bool kept;
  if (absl::Status s = RemoveExisting(*parent, name, path, false, &kept); !s.ok()) return s;
  absl::StatusOr<uint32_t> ino = NewInode(*parent, LINUX_S_IFREG, meta, true);
  if (!ino.ok()) return ino.status();
  if (absl::Status s = Link(*parent, name, *ino, EXT2_FT_REG_FILE); !s.ok()) return s;
  ext2_file_t file;
  if (absl::Status s = Check(ext2fs_file_open(fs_, *ino, EXT2_FILE_WRITE, &file), "open", path);
      !s.ok()) {
    return s;
  }
  std::vector<char> buf(1 << 20);
  uint64_t written = 0;
  absl::Status status;
  while (status.ok()) {
    absl::StatusOr<size_t> n = read(buf.data(), buf.size());
    if (!n.ok()) {
      status = n.status();
      break;
    }
    if (*n == 0) break;
    if (written + *n > size) {
      status = absl::InvalidArgumentError(absl::StrCat(path, ": more data than its declared size"));
      break;
    }
    // Leave all-zero blocks as holes, so sparse inputs stay sparse.
    size_t at = 0;
    while (at < *n && status.ok()) {
      size_t chunk = std::min<size_t>(kBlockSize - (written + at) % kBlockSize, *n - at);
      bool zero = true;
      for (size_t i = 0; i < chunk && zero; ++i) zero = buf[at + i] == 0;
      if (zero && chunk == kBlockSize) {
        status = Check(ext2fs_file_llseek(file, written + at + chunk, EXT2_SEEK_SET, nullptr),
                       "seek", path);
      } else {
        unsigned int done = 0;
        status = Check(ext2fs_file_write(file, buf.data() + at, chunk, &done), "write", path);
        if (status.ok() && done != chunk) status = absl::InternalError("short write");
      }
      at += chunk;
    }
    written += *n;
  }
  if (status.ok() && written != size) {
    status = absl::InvalidArgumentError(
        absl::StrCat(path, ": ", written, " bytes of data for a declared size of ", size));
  }
  if (status.ok()) status = Check(ext2fs_file_set_size2(file, size), "set size", path);
  absl::Status closed = Check(ext2fs_file_close(file), "close", path);
  return status.ok() ? closed : status;
}

absl::Status Ext4Writer::AddSymlink(absl::string_view path, absl::string_view target,
                                    const Ext4Metadata& meta) {
  if (target.empty() || target.size() >= kBlockSize || target.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": invalid symlink target"));
  }
  std::string name;
  absl::StatusOr<uint32_t> parent = Parent(path, &name);
  if (!parent.ok()) return parent.status();
  bool kept;
  if (absl::Status s = RemoveExisting(*parent, name, path, false, &kept); !s.ok()) return s;
  std::string target_copy(target);
  if (absl::Status s = WithRoomIn(
          *parent, "symlink", path,
          [&] { return ext2fs_symlink(fs_, *parent, 0, name.c_str(), target_copy.c_str()); });
      !s.ok()) {
    return s;
  }
  absl::StatusOr<uint32_t> ino = Lookup(path);
  if (!ino.ok()) return ino.status();
  Ext4Metadata link_meta = meta;
  link_meta.mode = 0777;
  return ApplyMetadata(*ino, LINUX_S_IFLNK, link_meta);
}

absl::Status Ext4Writer::AddHardLink(absl::string_view path, absl::string_view existing) {
  absl::StatusOr<uint32_t> target = Lookup(existing);
  if (!target.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": hard link to ", existing, ", which is not in the image"));
  }
  ext2_inode inode;
  if (absl::Status s = Check(ext2fs_read_inode(fs_, *target, &inode), "read inode", existing);
      !s.ok()) {
    return s;
  }
  if (LINUX_S_ISDIR(inode.i_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": hard link to a directory"));
  }
  if (inode.i_links_count >= 65000) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": too many hard links"));
  }
  std::string name;
  absl::StatusOr<uint32_t> parent = Parent(path, &name);
  if (!parent.ok()) return parent.status();
  if (path == existing) return absl::OkStatus();
  bool kept;
  if (absl::Status s = RemoveExisting(*parent, name, path, false, &kept); !s.ok()) return s;
  if (absl::Status s = Link(*parent, name, *target, FileType(inode.i_mode & LINUX_S_IFMT));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Check(ext2fs_read_inode(fs_, *target, &inode), "read inode"); !s.ok()) {
    return s;
  }
  ++inode.i_links_count;
  return Check(ext2fs_write_inode(fs_, *target, &inode), "write inode", path);
}

absl::Status Ext4Writer::AddSpecial(absl::string_view path, uint32_t type, const Ext4Metadata& meta,
                                    uint32_t rdev_major, uint32_t rdev_minor) {
  if (type != S_IFCHR && type != S_IFBLK && type != S_IFIFO && type != S_IFSOCK) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": unsupported file type"));
  }
  std::string name;
  absl::StatusOr<uint32_t> parent = Parent(path, &name);
  if (!parent.ok()) return parent.status();
  bool kept;
  if (absl::Status s = RemoveExisting(*parent, name, path, false, &kept); !s.ok()) return s;
  absl::StatusOr<uint32_t> ino = NewInode(*parent, type, meta, false);
  if (!ino.ok()) return ino.status();
  if (type == S_IFCHR || type == S_IFBLK) {
    ext2_inode inode;
    if (absl::Status s = Check(ext2fs_read_inode(fs_, *ino, &inode), "read inode"); !s.ok()) {
      return s;
    }
    // The "new" Linux encoding in i_block[1], valid for every major/minor.
    inode.i_block[0] = 0;
    inode.i_block[1] =
        (rdev_minor & 0xff) | ((rdev_major & 0xfff) << 8) | ((rdev_minor & ~0xffu) << 12);
    if (absl::Status s = Check(ext2fs_write_inode(fs_, *ino, &inode), "write inode"); !s.ok()) {
      return s;
    }
  }
  return Link(*parent, name, *ino, FileType(type));
}

absl::Status Ext4Writer::SetXattr(absl::string_view path, const std::string& name,
                                  absl::string_view value) {
  absl::StatusOr<uint32_t> ino = Lookup(path);
  if (!ino.ok()) return ino.status();
  ext2_xattr_handle* handle = nullptr;
  if (absl::Status s = Check(ext2fs_xattrs_open(fs_, *ino, &handle), "xattrs", path); !s.ok()) {
    return s;
  }
  absl::Status status = Check(ext2fs_xattrs_read(handle), "read xattrs", path);
  if (status.ok()) {
    status = Check(ext2fs_xattr_set(handle, name.c_str(), value.data(), value.size()),
                   absl::StrCat("set xattr ", name, " on"), path);
  }
  absl::Status closed = Check(ext2fs_xattrs_close(&handle), "write xattrs", path);
  return status.ok() ? closed : status;
}

}  // namespace airlock
