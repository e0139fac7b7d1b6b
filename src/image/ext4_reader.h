// Reads an ext4 image without mounting it (libext2fs): one file (what the host learns of an
// image's contents, such as its package list for `airlock doctor`), or a walk of a tree (what
// an image build copies into the next image, or out of an earlier stage). The image's structure is
// Airlock's own (ImageStore converts every image with Ext4Writer); its files' bytes are not, so
// callers treat what comes back as untrusted.
#ifndef AIRLOCK_IMAGE_EXT4_READER_H_
#define AIRLOCK_IMAGE_EXT4_READER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "src/image/ext4_writer.h"

namespace airlock {

// The content of the regular file at `path` (absolute, symbolic links in it followed within
// the image) in the ext4 image at `image_path`; NOT_FOUND if there is none, FAILED_PRECONDITION
// if it is larger than max_bytes.
[[nodiscard]] absl::StatusOr<std::string> ReadFileFromExt4(const std::string& image_path,
                                                           const std::string& path,
                                                           size_t max_bytes);

// One entry of a walk, parents before children, names in directory order.
struct Ext4Entry {
  std::string path;   // relative to the walk's root ("" is the root itself), cleaned
  uint32_t type = 0;  // S_IFDIR, S_IFREG, S_IFLNK, S_IFCHR, S_IFBLK, S_IFIFO or S_IFSOCK
  Ext4Metadata meta;
  uint64_t size = 0;           // regular files
  std::string symlink_target;  // symbolic links, as stored
  uint32_t rdev_major = 0, rdev_minor = 0;
  // A regular file whose inode an earlier entry of this walk had: that entry's path.
  std::string hard_link_to;
  std::vector<std::pair<std::string, std::string>> xattrs;  // name (with its prefix), value
};
// Called per entry; for a regular file (not a hard link), `read` gives its bytes.
using Ext4Visitor =
    std::function<absl::Status(const Ext4Entry& entry, const Ext4Writer::Reader& read)>;

// Walks the tree at `root` (absolute; symbolic links in it followed within the image) of the
// image. NOT_FOUND if root is not there; a root that is not a directory is one entry (path "").
// Stops at the visitor's first error and returns it.
[[nodiscard]] absl::Status WalkExt4(const std::string& image_path, const std::string& root,
                                    const Ext4Visitor& visit);

// What a walk of the whole image would give to an Ext4Writer: sizes for ImageSizeFor.
struct Ext4Usage {
  uint64_t entries = 0;
  uint64_t data_bytes = 0;
  uint64_t blocks = 0;
};
[[nodiscard]] absl::StatusOr<Ext4Usage> MeasureExt4(const std::string& image_path);

// Copies every entry of the image at image_path into writer (an image build's next layer
// starts from its parent's files).
[[nodiscard]] absl::Status CopyExt4(const std::string& image_path, Ext4Writer* writer);

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_EXT4_READER_H_
