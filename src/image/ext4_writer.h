// Builds an ext4 filesystem in a file with libext2fs, entry by entry, without mounting it and
// without any host path ever being created: names are resolved inside the new filesystem only.
//
// Paths given to the Add* methods are relative to the filesystem root, already cleaned
// ("usr/bin/python3": no leading "/", no "." or ".." components; see tar_path.h). Parents must
// exist. Symlink targets are stored verbatim and never followed. Not thread-safe.
#ifndef AIRLOCK_IMAGE_EXT4_WRITER_H_
#define AIRLOCK_IMAGE_EXT4_WRITER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct struct_ext2_filsys;

namespace airlock {

struct Ext4Metadata {
  uint32_t mode = 0;  // permission bits (07777); the type comes from the Add* call
  uint32_t uid = 0;
  uint32_t gid = 0;
  int64_t mtime = 0;
};

class Ext4Writer {
 public:
  struct Options {
    uint64_t size_bytes = 0;   // the file is truncated (sparse) to this size
    uint32_t inode_count = 0;  // 0: one per 16 KiB
    std::string label;
    // With a journal (a filesystem mounted read-write that must survive its VM's death, such
    // as a volume); images are read-only and need none.
    bool journal = false;
  };

  // Creates (truncates) the file at path and formats it. path may be /proc/self/fd/N.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Ext4Writer>> Create(const std::string& path,
                                                                          const Options& options);
  ~Ext4Writer();

  // Each Add* replaces an existing non-directory entry of the same name (tar semantics: a
  // later entry wins). A directory over an existing directory updates its metadata.
  [[nodiscard]] absl::Status AddDirectory(absl::string_view path, const Ext4Metadata& meta);
  // read(buf, cap) returns bytes read (0 at end) or an error.
  using Reader = std::function<absl::StatusOr<size_t>(char* buf, size_t cap)>;
  [[nodiscard]] absl::Status AddFile(absl::string_view path, const Ext4Metadata& meta,
                                     uint64_t size, const Reader& read);
  [[nodiscard]] absl::Status AddSymlink(absl::string_view path, absl::string_view target,
                                        const Ext4Metadata& meta);
  [[nodiscard]] absl::Status AddHardLink(absl::string_view path, absl::string_view existing);
  // type is S_IFCHR, S_IFBLK, S_IFIFO or S_IFSOCK.
  [[nodiscard]] absl::Status AddSpecial(absl::string_view path, uint32_t type,
                                        const Ext4Metadata& meta, uint32_t rdev_major,
                                        uint32_t rdev_minor);
  [[nodiscard]] absl::Status SetXattr(absl::string_view path, const std::string& name,
                                      absl::string_view value);
  // Removes an entry (a directory with everything below it). Missing is not an error.
  [[nodiscard]] absl::Status Remove(absl::string_view path);
  // Removes everything below a directory, keeping the directory (an opaque whiteout).
  [[nodiscard]] absl::Status ClearDirectory(absl::string_view path);
  // True if the path exists.
  bool Exists(absl::string_view path);

  // Writes superblock, descriptors and bitmaps and closes the filesystem.
  [[nodiscard]] absl::Status Finish();

 private:
  explicit Ext4Writer(struct_ext2_filsys* fs, std::string path) : fs_(fs), path_(std::move(path)) {}
  absl::Status Format(const Options& options);
  absl::StatusOr<uint32_t> Lookup(absl::string_view path);
  // Resolves the parent directory of path; *name receives the last component.
  absl::StatusOr<uint32_t> Parent(absl::string_view path, std::string* name);
  // Unlinks an existing non-directory (or, if allowed, a directory tree) named path.
  absl::Status RemoveExisting(uint32_t parent, const std::string& name, absl::string_view path,
                              bool keep_directory, bool* kept_directory);
  absl::Status Link(uint32_t parent, const std::string& name, uint32_t ino, int file_type);
  // Runs op (a libext2fs call that adds an entry to dir); if dir had no room, grows it and
  // runs op once more.
  absl::Status WithRoomIn(uint32_t dir, absl::string_view what, absl::string_view path,
                          const std::function<long()>& op);
  absl::StatusOr<uint32_t> NewInode(uint32_t parent, uint32_t mode, const Ext4Metadata& meta,
                                    bool extents);
  absl::Status ApplyMetadata(uint32_t ino, uint32_t type, const Ext4Metadata& meta);
  absl::Status RemoveInodeTree(uint32_t parent, const std::string& name, uint32_t ino,
                               absl::string_view path);
  absl::Status Check(long err, absl::string_view what, absl::string_view path = "");

  struct_ext2_filsys* fs_;
  std::string path_;
  // Directory inode by path, so that deep trees do not rescan every component.
  std::unordered_map<std::string, uint32_t> dirs_;
};

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_EXT4_WRITER_H_
