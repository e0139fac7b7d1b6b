#include "src/image/ext4_reader.h"

extern "C" {
#include <et/com_err.h>
#include <ext2fs/ext2fs.h>
}

#include <sys/stat.h>

#include <algorithm>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace airlock {
namespace {

absl::Status Ext2Error(errcode_t err, const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", error_message(err)));
}

// Deeper than any real tree; a walk stops there rather than recursing without end.
constexpr int kMaxWalkDepth = 256;

class Walker {
 public:
  Walker(ext2_filsys fs, const Ext4Visitor& visit) : fs_(fs), visit_(visit) {}

  absl::Status Visit(ext2_ino_t ino, const std::string& path, int depth) {
    if (depth > kMaxWalkDepth) {
      return absl::FailedPreconditionError(absl::StrCat(path, ": directories nested too deep"));
    }
    ext2_inode_large large{};
    ext2_inode* inode = reinterpret_cast<ext2_inode*>(&large);
    errcode_t err = ext2fs_read_inode_full(fs_, ino, inode, sizeof(large));
    if (err != 0) return Ext2Error(err, absl::StrCat("read the inode of /", path));
    Ext4Entry entry;
    entry.path = path;
    entry.type = inode->i_mode & LINUX_S_IFMT;
    entry.meta.mode = inode->i_mode & 07777;
    entry.meta.uid = inode_uid(*inode);
    entry.meta.gid = inode_gid(*inode);
    entry.meta.mtime = inode->i_mtime;
    if (absl::Status s = ReadXattrs(ino, path, &entry.xattrs); !s.ok()) return s;
    switch (entry.type) {
      case LINUX_S_IFDIR:
        if (absl::Status s = visit_(entry, nullptr); !s.ok()) return s;
        return Children(ino, path, depth);
      case LINUX_S_IFREG:
        return File(ino, inode, &entry);
      case LINUX_S_IFLNK:
        if (absl::Status s = SymlinkTarget(ino, inode, path, &entry.symlink_target); !s.ok()) {
          return s;
        }
        return visit_(entry, nullptr);
      case LINUX_S_IFCHR:
      case LINUX_S_IFBLK: {
        uint32_t dev = inode->i_block[0] != 0 ? inode->i_block[0] : inode->i_block[1];
        // Old encoding in i_block[0] (major 8 bits, minor 8 bits), new in i_block[1].
        if (inode->i_block[0] != 0) {
          entry.rdev_major = (dev >> 8) & 0xff;
          entry.rdev_minor = dev & 0xff;
        } else {
          entry.rdev_major = (dev & 0xfff00) >> 8;
          entry.rdev_minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
        }
        return visit_(entry, nullptr);
      }
      case LINUX_S_IFIFO:
      case LINUX_S_IFSOCK:
        return visit_(entry, nullptr);
      default:
        return absl::FailedPreconditionError(
            absl::StrCat("/", path, " in the image has an unknown type"));
    }
  }

 private:
  absl::Status File(ext2_ino_t ino, ext2_inode* inode, Ext4Entry* entry) {
    if (inode->i_links_count > 1) {
      auto [it, first] = seen_.emplace(ino, entry->path);
      if (!first) {
        entry->hard_link_to = it->second;
        return visit_(*entry, nullptr);
      }
    }
    ext2_file_t file = nullptr;
    errcode_t err = ext2fs_file_open(fs_, ino, 0, &file);
    if (err != 0) return Ext2Error(err, absl::StrCat("open /", entry->path, " in the image"));
    __u64 size = 0;
    err = ext2fs_file_get_lsize(file, &size);
    absl::Status status;
    if (err != 0) {
      status = Ext2Error(err, absl::StrCat("size of /", entry->path));
    } else {
      entry->size = size;
      std::string path = entry->path;
      Ext4Writer::Reader read = [file, path](char* buf, size_t cap) -> absl::StatusOr<size_t> {
        unsigned int got = 0;
        errcode_t e = ext2fs_file_read(
            file, buf, static_cast<unsigned int>(std::min<size_t>(cap, 1 << 20)), &got);
        if (e != 0) return Ext2Error(e, absl::StrCat("read /", path, " in the image"));
        return static_cast<size_t>(got);
      };
      status = visit_(*entry, read);
    }
    ext2fs_file_close(file);
    return status;
  }

  absl::Status SymlinkTarget(ext2_ino_t ino, ext2_inode* inode, const std::string& path,
                             std::string* target) {
    if (ext2fs_is_fast_symlink(inode)) {
      const char* text = reinterpret_cast<const char*>(inode->i_block);
      *target = std::string(text, strnlen(text, sizeof(inode->i_block)));
      return absl::OkStatus();
    }
    ext2_file_t file = nullptr;
    errcode_t err = ext2fs_file_open(fs_, ino, 0, &file);
    if (err != 0) return Ext2Error(err, absl::StrCat("open the link /", path));
    uint64_t size = EXT2_I_SIZE(inode);
    if (size > 4096) {
      ext2fs_file_close(file);
      return absl::FailedPreconditionError(absl::StrCat("/", path, ": a link over 4 KiB"));
    }
    target->resize(size);
    unsigned int got = 0;
    err = ext2fs_file_read(file, target->data(), static_cast<unsigned int>(size), &got);
    ext2fs_file_close(file);
    if (err != 0) return Ext2Error(err, absl::StrCat("read the link /", path));
    target->resize(got);
    return absl::OkStatus();
  }

  absl::Status ReadXattrs(ext2_ino_t ino, const std::string& path,
                          std::vector<std::pair<std::string, std::string>>* out) {
    ext2_xattr_handle* handle = nullptr;
    errcode_t err = ext2fs_xattrs_open(fs_, ino, &handle);
    if (err != 0) return Ext2Error(err, absl::StrCat("xattrs of /", path));
    err = ext2fs_xattrs_read(handle);
    if (err == 0) {
      err = ext2fs_xattrs_iterate(
          handle,
          [](char* name, char* value, size_t len, void* data) -> int {
            auto* list = static_cast<std::vector<std::pair<std::string, std::string>>*>(data);
            list->emplace_back(name, std::string(value, len));
            return 0;
          },
          out);
    }
    ext2fs_xattrs_close(&handle);
    if (err != 0) return Ext2Error(err, absl::StrCat("read the xattrs of /", path));
    return absl::OkStatus();
  }

  absl::Status Children(ext2_ino_t dir, const std::string& path, int depth) {
    std::vector<std::pair<std::string, ext2_ino_t>> children;
    errcode_t err = ext2fs_dir_iterate2(
        fs_, dir, 0, nullptr,
        [](ext2_ino_t, int, ext2_dir_entry* dirent, int, int, char*, void* data) -> int {
          auto* list = static_cast<std::vector<std::pair<std::string, ext2_ino_t>>*>(data);
          std::string name(dirent->name, ext2fs_dirent_name_len(dirent));
          if (name != "." && name != ".." && dirent->inode != 0) {
            list->emplace_back(std::move(name), dirent->inode);
          }
          return 0;
        },
        &children);
    if (err != 0) return Ext2Error(err, absl::StrCat("list /", path));
    for (const auto& [name, ino] : children) {
      if (name.find('/') != std::string::npos) continue;   // cannot be in a directory
      if (path.empty() && name == "lost+found") continue;  // the filesystem's, not the image's
      std::string child = path.empty() ? name : absl::StrCat(path, "/", name);
      if (absl::Status s = Visit(ino, child, depth + 1); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  ext2_filsys fs_;
  const Ext4Visitor& visit_;
  std::unordered_map<ext2_ino_t, std::string> seen_;  // hard-linked files' first paths
};

absl::Status WithImage(const std::string& image_path,
                       const std::function<absl::Status(ext2_filsys)>& use) {
  ext2_filsys fs = nullptr;
  errcode_t err = ext2fs_open(image_path.c_str(), EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &fs);
  if (err != 0) return Ext2Error(err, absl::StrCat("open the image ", image_path));
  absl::Status status = use(fs);
  ext2fs_close_free(&fs);
  return status;
}

}  // namespace

absl::Status WalkExt4(const std::string& image_path, const std::string& root,
                      const Ext4Visitor& visit) {
  return WithImage(image_path, [&](ext2_filsys fs) -> absl::Status {
    ext2_ino_t ino = EXT2_ROOT_INO;
    size_t start = root.find_first_not_of('/');
    if (start != std::string::npos) {
      std::string relative = root.substr(start);
      errcode_t err = ext2fs_namei_follow(fs, EXT2_ROOT_INO, EXT2_ROOT_INO, relative.c_str(), &ino);
      if (err == EXT2_ET_FILE_NOT_FOUND) {
        return absl::NotFoundError(absl::StrCat(root, " is not in the image"));
      }
      if (err != 0) return Ext2Error(err, absl::StrCat("look up ", root, " in the image"));
    }
    return Walker(fs, visit).Visit(ino, "", 0);
  });
}

absl::StatusOr<Ext4Usage> MeasureExt4(const std::string& image_path) {
  Ext4Usage usage;
  absl::Status s = WalkExt4(image_path, "/", [&](const Ext4Entry& e, const Ext4Writer::Reader&) {
    ++usage.entries;
    usage.data_bytes += e.size;
    usage.blocks += e.type == S_IFDIR ? 1 : (e.size + 4095) / 4096;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return usage;
}

absl::Status CopyExt4(const std::string& image_path, Ext4Writer* writer) {
  return WalkExt4(image_path, "/",
                  [&](const Ext4Entry& e, const Ext4Writer::Reader& read) -> absl::Status {
                    absl::Status s;
                    if (e.path.empty()) {
                      s = writer->AddDirectory("", e.meta);
                    } else if (!e.hard_link_to.empty()) {
                      s = writer->AddHardLink(e.path, e.hard_link_to);
                    } else if (e.type == S_IFDIR) {
                      s = writer->AddDirectory(e.path, e.meta);
                    } else if (e.type == S_IFREG) {
                      s = writer->AddFile(e.path, e.meta, e.size, read);
                    } else if (e.type == S_IFLNK) {
                      s = writer->AddSymlink(e.path, e.symlink_target, e.meta);
                    } else {
                      s = writer->AddSpecial(e.path, e.type, e.meta, e.rdev_major, e.rdev_minor);
                    }
                    for (size_t i = 0; s.ok() && i < e.xattrs.size(); ++i) {
                      s = writer->SetXattr(e.path, e.xattrs[i].first, e.xattrs[i].second);
                    }
                    return s;
                  });
}

absl::StatusOr<std::string> ReadFileFromExt4(const std::string& image_path, const std::string& path,
                                             size_t max_bytes) {
  ext2_filsys fs = nullptr;
  errcode_t err = ext2fs_open(image_path.c_str(), EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &fs);
  if (err != 0) return Ext2Error(err, absl::StrCat("open the image ", image_path));
  absl::StatusOr<std::string> content = [&]() -> absl::StatusOr<std::string> {
    ext2_ino_t ino = 0;
    std::string relative =
        path.substr(path.find_first_not_of('/') == std::string::npos ? path.size()
                                                                     : path.find_first_not_of('/'));
    err = ext2fs_namei_follow(fs, EXT2_ROOT_INO, EXT2_ROOT_INO, relative.c_str(), &ino);
    if (err == EXT2_ET_FILE_NOT_FOUND) {
      return absl::NotFoundError(absl::StrCat(path, " is not in the image"));
    }
    if (err != 0) return Ext2Error(err, absl::StrCat("look up ", path, " in the image"));
    ext2_inode inode;
    if ((err = ext2fs_read_inode(fs, ino, &inode)) != 0) {
      return Ext2Error(err, absl::StrCat("read the inode of ", path));
    }
    if (!LINUX_S_ISREG(inode.i_mode)) {
      return absl::NotFoundError(absl::StrCat(path, " in the image is not a regular file"));
    }
    ext2_file_t file = nullptr;
    if ((err = ext2fs_file_open(fs, ino, 0, &file)) != 0) {
      return Ext2Error(err, absl::StrCat("open ", path, " in the image"));
    }
    __u64 size = 0;
    err = ext2fs_file_get_lsize(file, &size);
    std::string data;
    if (err != 0 || size > max_bytes) {
      // said below
    } else {
      data.resize(size);
      size_t at = 0;
      while (at < size) {
        unsigned int got = 0;
        err = ext2fs_file_read(file, data.data() + at, static_cast<unsigned int>(size - at), &got);
        if (err != 0 || got == 0) break;
        at += got;
      }
      data.resize(at);
    }
    ext2fs_file_close(file);
    if (err == 0 && size > max_bytes) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " in the image is larger than ", max_bytes, " bytes"));
    }
    if (err != 0) return Ext2Error(err, absl::StrCat("read ", path, " in the image"));
    return data;
  }();
  ext2fs_close_free(&fs);
  return content;
}

}  // namespace airlock
