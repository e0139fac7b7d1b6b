#include "src/image/ext4_reader.h"

extern "C" {
#include <et/com_err.h>
#include <ext2fs/ext2fs.h>
}

#include "absl/strings/str_cat.h"

namespace airlock {
namespace {

absl::Status Ext2Error(errcode_t err, const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", error_message(err)));
}

}  // namespace

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
