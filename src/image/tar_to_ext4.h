// Converts tar streams (plain or compressed) into a read-only ext4 image through libarchive
// and Ext4Writer. Nothing is ever unpacked on the host: every entry becomes an inode inside the
// image file, so no entry can reach a host path. Tar input is untrusted (fuzz/tar_to_ext4_fuzz.cc).
#ifndef AIRLOCK_IMAGE_TAR_TO_EXT4_H_
#define AIRLOCK_IMAGE_TAR_TO_EXT4_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/image/ext4_writer.h"

struct archive;

namespace airlock {

struct ArchiveCloser {
  void operator()(archive* a) const;
};
using ArchivePtr = std::unique_ptr<archive, ArchiveCloser>;

// Once at start-up, before threads: entry names that tars store as UTF-8 (pax headers, such as
// ca-certificates' non-ASCII file names) are read whatever the environment's locale is
// (libarchive converts names to the locale's charset, and the "C" locale has no room for them).
void ReadTarNamesAsUtf8();

// Enables the decompressions libarchive does in-process (gzip, bzip2, xz, lzma, zstd, lz4). One
// that it would do by running an outside program (lrzip, lzop, grzip, ...; or any of these where
// it was built without the library) is never enabled: what is read is untrusted, and the host
// runs no program on it.
void SupportInProcessFilters(archive* a);

// A tar (compressed as SupportInProcessFilters allows) opened for reading; the error names the
// file.
[[nodiscard]] absl::StatusOr<ArchivePtr> OpenTar(const std::string& path);

// Largest image the converter will create, and largest single file it accepts.
inline constexpr uint64_t kMaxImageBytes = 64ull << 30;

struct TarStats {
  uint64_t entries = 0;
  uint64_t data_bytes = 0;  // regular file content
  uint64_t blocks = 0;      // 4 KiB blocks the content and directories need, estimated
};

// Reads a tar (any compression libarchive knows) and sums what the image needs.
[[nodiscard]] absl::StatusOr<TarStats> ScanTar(const std::string& tar_path);

// Size and inode count for an image holding the given layers, with room for metadata.
Ext4Writer::Options ImageSizeFor(const std::vector<TarStats>& layers);

// Applies one tar to the filesystem being written. With whiteouts, OCI layer semantics apply:
// ".wh.NAME" removes NAME, ".wh..wh..opq" empties its directory.
[[nodiscard]] absl::Status ApplyTar(const std::string& tar_path, Ext4Writer* writer,
                                    bool whiteouts);

// Layers (tars, applied in order) become an image at out_path; with whiteouts as in ApplyTar.
[[nodiscard]] absl::Status ConvertLayers(const std::vector<std::string>& layers,
                                         const std::string& out_path, bool whiteouts);

// An image build's step: the files of the image at base_image ("" for none: FROM scratch)
// with the layers laid over them, whiteouts applied, becomes an image at out_path.
[[nodiscard]] absl::Status ConvertLayersOver(const std::string& base_image,
                                             const std::vector<std::string>& layers,
                                             const std::string& out_path);

// ScanTar + Ext4Writer::Create + ApplyTar + Finish: a rootfs tar becomes an image at out_path.
[[nodiscard]] absl::Status ConvertRootfsTar(const std::string& tar_path,
                                            const std::string& out_path);

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_TAR_TO_EXT4_H_
