// Reads an image archive: an OCI image layout in a tar (index.json, blobs/sha256/...) or a
// `docker save` archive (manifest.json, config and layer tars), compressed or not. Its members
// are copied as opaque blobs into a private directory and hashed on the way; the layer contents
// are never unpacked (they become ext4 later, through tar_to_ext4). Every blob named by a digest
// must match it; the image must be linux/amd64.
#ifndef AIRLOCK_IMAGE_OCI_ARCHIVE_H_
#define AIRLOCK_IMAGE_OCI_ARCHIVE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/image/oci.h"

namespace airlock {

struct ArchiveImage {
  // The image's identity: its manifest digest (OCI), or for `docker save` a digest of its
  // config and layer digests.
  std::string digest;
  OciImageConfig config;
  std::string config_json;          // the config as the archive has it
  std::string manifest_json;        // the OCI manifest (empty for `docker save`)
  std::vector<std::string> layers;  // files under dir, bottom layer first
  std::string name;                 // the name the archive gives it, if any
};

[[nodiscard]] absl::StatusOr<ArchiveImage> ReadImageArchive(const std::string& archive_path,
                                                            const std::string& dir);

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_OCI_ARCHIVE_H_
