// Writes an image of the store as an OCI image layout in a tar: what `airlock image save`
// writes and `airlock image push NAME` sends, so that an image Airlock built (from a Dockerfile
// or Debian packages) reaches a registry or another machine. The layout holds one layer, the
// image's whole filesystem walked out of its ext4 (which Airlock itself wrote), uncompressed,
// and a config saying how to run it (environment, command, directory, user, and the labels,
// ports and volumes a Dockerfile recorded). Any OCI tool reads it; ReadImageArchive does.
#ifndef AIRLOCK_IMAGE_OCI_EXPORT_H_
#define AIRLOCK_IMAGE_OCI_EXPORT_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "src/image/image_store.h"

namespace airlock {

// Receives the tar as it is written, in pieces; an error stops the export.
using ExportSink = std::function<absl::Status(absl::string_view bytes)>;

// Writes `image` as an OCI layout tar to sink, naming it ref_name (index.json's
// org.opencontainers.image.ref.name). The layer is written first to an unnamed file in
// scratch_dir (it must be hashed before the tar can name it).
[[nodiscard]] absl::Status ExportOciLayout(const ImageInfo& image, const std::string& ref_name,
                                           const std::string& scratch_dir, const ExportSink& sink);

// The OCI config of an image with one layer whose uncompressed digest is layer_digest.
nlohmann::json OciConfigFor(const ImageInfo& image, const std::string& layer_digest);

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_OCI_EXPORT_H_
