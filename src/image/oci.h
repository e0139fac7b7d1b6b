// OCI image metadata (image-spec v1, and Docker's v2 schema 2 equivalents): image indexes,
// manifests, image configs, and `docker save`'s manifest.json. All of it comes from outside
// (registries, archives) and is untrusted: parsed once, without exceptions, bounded, and checked
// (digests are sha256 with 64 hex digits, sizes non-negative, lists capped)
// (fuzz/oci_manifest_fuzz.cc).
#ifndef AIRLOCK_IMAGE_OCI_H_
#define AIRLOCK_IMAGE_OCI_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock {

inline constexpr size_t kMaxOciJsonBytes = 4 << 20;
inline constexpr size_t kMaxOciLayers = 256;

struct OciDescriptor {
  std::string media_type;
  std::string digest;  // "sha256:<64 hex>"
  uint64_t size = 0;
  std::string os;            // platform, in an index
  std::string architecture;  // platform, in an index
  std::string ref_name;      // annotation org.opencontainers.image.ref.name, if any
};

struct OciManifest {
  OciDescriptor config;
  std::vector<OciDescriptor> layers;
};

// What an image says about how to run it.
struct OciRunConfig {
  std::vector<std::string> env;  // KEY=VALUE
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::string working_dir;
  std::string user;
};

struct OciImageConfig {
  std::string os;
  std::string architecture;
  OciRunConfig run;
  // rootfs.diff_ids: the sha256 of each layer's uncompressed tar, bottom first (may be empty).
  std::vector<std::string> diff_ids;
};

// One image of `docker save`'s manifest.json.
struct DockerSaveImage {
  std::string config;  // path of the config JSON in the archive
  std::vector<std::string> repo_tags;
  std::vector<std::string> layers;  // paths of the layer tars in the archive
};

bool IsSha256Digest(const std::string& digest);
bool IsIndexMediaType(const std::string& media_type);

[[nodiscard]] absl::StatusOr<std::vector<OciDescriptor>> ParseOciIndex(const std::string& text);
[[nodiscard]] absl::StatusOr<OciManifest> ParseOciManifest(const std::string& text);
[[nodiscard]] absl::StatusOr<OciImageConfig> ParseOciImageConfig(const std::string& text);
[[nodiscard]] absl::StatusOr<std::vector<DockerSaveImage>> ParseDockerSaveManifest(
    const std::string& text);

// The linux/amd64 entry of an index (an entry without a platform counts if it is the only
// one); the error lists the platforms there are.
[[nodiscard]] absl::StatusOr<OciDescriptor> PickLinuxAmd64(
    const std::vector<OciDescriptor>& manifests);

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_OCI_H_
