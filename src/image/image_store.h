// The local image store under $AIRLOCK_HOME/images:
//   blobs/<key>/rootfs.ext4   read-only root filesystem (key: the OCI manifest digest, or a hash
//                             of the source and converter)
//   blobs/<key>/image.json    what it was built from, and how the image says to run it
//   blobs/<key>/manifest.json, config.json   the OCI manifest and config, as the source had them
//                             (the layers themselves are not kept: the ext4 is their cached form)
//   refs/<escaped name>       {"digest": key}: the operator's tags, which every tenant sees
//   tenant-refs/<escaped tenant>/<escaped name>   a tenant's own tags (what its pulls name):
//                             they hide an operator's tag of the same name from that tenant only
// An image becomes visible only by an atomic rename of a complete blob directory and ref file,
// so a crash mid-import leaves no half image. Thread-compatible; processes may import at once.
#ifndef AIRLOCK_IMAGE_IMAGE_STORE_H_
#define AIRLOCK_IMAGE_IMAGE_STORE_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "src/image/oci.h"
#include "src/image/registry_client.h"

namespace airlock {

// What DebianRootfs takes: a suite name (bookworm) and package names as Debian policy writes
// them (lowercase letters, digits, and - or + - . respectively; at most 100 bytes).
bool IsDebianSuiteName(const std::string& word);
bool IsDebianPackageName(const std::string& word);

struct ImageInfo {
  std::string name;
  std::string digest;       // "sha256:<hex>" of the source plus converter version
  std::string rootfs_path;  // the ext4 image a VM boots with
  uint64_t size_bytes = 0;  // apparent size of rootfs.ext4
  int64_t created = 0;      // unix seconds
  std::string source;       // what it was imported from
  OciRunConfig run;         // how the image says to run it (OCI images; empty for rootfs tars)
  // What a Dockerfile recorded and Airlock does not act on: labels, exposed_ports, volumes,
  // stop_signal, healthcheck (an object; empty for other images).
  nlohmann::json recorded = nlohmann::json::object();
};

class ImageStore {
 public:
  // tenant empty: the operator's view (its tags are everyone's). Otherwise that tenant's view:
  // its own tags first, then the operator's; what it tags (pulls) is its own, so no tenant can
  // change what a name means to another. Blobs are shared by digest.
  explicit ImageStore(std::string root, std::string tenant = "")
      : root_(std::move(root)), tenant_(std::move(tenant)) {}

  // Modes of what the store holds: root's, readable by the airlock group (QEMU gets images as
  // descriptors, never by path).
  static constexpr mode_t kStoreDirMode = 0750;
  static constexpr mode_t kStoreFileMode = 0640;

  // Converts a root filesystem tar (as mmdebstrap writes) and tags it `name`, with `env`
  // (KEY=VALUE) as the image's environment. Importing the same bytes and env again only moves
  // the tag.
  [[nodiscard]] absl::StatusOr<ImageInfo> ImportRootfsTar(const std::string& tar_path,
                                                          const std::string& name,
                                                          const std::vector<std::string>& env = {});
  // Tars laid over each other in order (no whiteouts) become one image, tagged `name`.
  [[nodiscard]] absl::StatusOr<ImageInfo> ImportRootfsLayers(
      const std::vector<std::string>& tars, const std::string& name,
      const std::vector<std::string>& env = {});
  // An image build's result: the files of `base` (an image's rootfs.ext4; "" for FROM
  // scratch) with layer tars laid over them (OCI whiteouts), run as `run` says (with what the
  // build recorded and Airlock does not use: labels, ports, ...); kept under
  // `key` (64 hex digits, the build's hash of its steps) and tagged `name`. The same key again
  // only moves the tag.
  [[nodiscard]] absl::StatusOr<ImageInfo> ImportBuild(
      const std::string& base, const std::vector<std::string>& layers, const std::string& key,
      const OciRunConfig& run, const nlohmann::json& recorded, const std::string& source,
      const std::string& name);
  // Imports an OCI image layout or `docker save` archive (see oci_archive.h): its layers
  // become one ext4 image, kept per manifest digest, with its run config. name empty: the name
  // the archive gives.
  [[nodiscard]] absl::StatusOr<ImageInfo> ImportArchive(const std::string& archive_path,
                                                        const std::string& name);
  // The root filesystem tar of an image of Debian packages: mmdebstrap (minbase of `suite` plus
  // `packages`, the host's apt sources) writes it, cached under cache_dir/rootfs keyed by the
  // inputs (airlockd's image builds import it like import --rootfs): its path.
  [[nodiscard]] static absl::StatusOr<std::string> DebianRootfs(
      const std::string& suite, const std::vector<std::string>& packages,
      const std::string& cache_dir);
  // Pulls an image from its registry (registry_client.h) and tags it with the reference as
  // written. An image already in the store is not downloaded again.
  [[nodiscard]] absl::StatusOr<ImageInfo> Pull(const std::string& reference,
                                               const RegistryClient::Progress& progress = nullptr,
                                               RegistryAccess access = {});
  [[nodiscard]] absl::StatusOr<ImageInfo> Resolve(const std::string& name) const;
  // Resolve, and an image not in the store yet that names a registry is pulled first (not the
  // default image: setup.sh builds that one).
  [[nodiscard]] absl::StatusOr<ImageInfo> ResolveOrPull(
      const std::string& name, const RegistryClient::Progress& progress = nullptr,
      RegistryAccess access = {});
  // The blob with this digest ("sha256:<hex>"), wherever its tag points now (a session keeps
  // the image it was made from).
  [[nodiscard]] absl::StatusOr<ImageInfo> ResolveDigest(const std::string& name,
                                                        const std::string& digest) const;
  // Installs an image made elsewhere (another host of a fleet) under its digest, untagged
  // (sessions name their image by digest): its metadata (image.json's text, a JSON object) and
  // a function that writes its root filesystem to the path it is given. OK without calling it
  // when the store has that image already.
  [[nodiscard]] absl::Status InstallBlob(
      const std::string& digest, const std::string& meta,
      const std::function<absl::Status(const std::string&)>& write_rootfs);
  // Points name (in this view) at an image the store holds, by digest ("sha256:<hex>").
  [[nodiscard]] absl::StatusOr<ImageInfo> TagDigest(const std::string& name,
                                                    const std::string& digest);
  // The images this view sees, by name.
  [[nodiscard]] absl::StatusOr<std::vector<ImageInfo>> List() const;
  // The names this view tagged itself: the operator's tags, or the tenant's own.
  std::vector<std::string> OwnNames() const;
  // Every view that has tags of its own: the operator's ("") and each such tenant.
  static std::vector<std::string> Tenants(const std::string& root);
  // The size of the images a tenant's view tagged itself, each blob once (0 for the operator's).
  uint64_t OwnBytes() const;
  struct RemoveResult {
    std::string digest;        // what the tag pointed at
    bool freed = false;        // the blob was removed too
    uint64_t freed_bytes = 0;  // disk space it took
  };
  // Removes the tag, and the blob if no other tag uses it and it is not in `keep` (digests
  // sessions still use; Prune frees those later).
  [[nodiscard]] absl::StatusOr<RemoveResult> Remove(const std::string& name,
                                                    const std::vector<std::string>& keep);

  struct PruneResult {
    std::vector<std::string> removed;  // digests of the blobs removed
    uint64_t freed_bytes = 0;          // disk space they took
  };
  // Removes blobs that no tag points at and that are not in `keep` (digests sessions still
  // use), and what crashed imports and pulls left behind. Blobs made in the last ten minutes
  // are kept: an import or pull may be about to tag them.
  [[nodiscard]] absl::StatusOr<PruneResult> Prune(const std::vector<std::string>& keep);

  // Image names: lowercase letters, digits and . _ - / :, at most 200 bytes.
  [[nodiscard]] static absl::Status ValidateName(const std::string& name);

  // The JSON form of a run config in image.json.
  static nlohmann::json RunConfigJson(const OciRunConfig& run);

 private:
  // Where this view's tag of name is (the tenant's own, or the operator's).
  std::string RefPath(const std::string& name) const;
  std::string TenantRefs() const;
  // The tag names in a refs directory.
  static std::vector<std::string> NamesIn(const std::string& dir);
  // The digests of every tag of every view.
  std::set<std::string> AllTaggedDigests() const;
  absl::StatusOr<ImageInfo> ResolveRef(const std::string& ref_path, const std::string& name) const;
  // Builds blobs/<key> (rootfs.ext4 by `convert`, image.json from meta, and `files`: name ->
  // content, empty ones skipped) unless it exists; a crash or a failure leaves no blob.
  absl::Status EnsureBlob(const std::string& key,
                          const std::function<absl::Status(const std::string&)>& convert,
                          nlohmann::json meta,
                          const std::map<std::string, std::string>& files = {});
  absl::StatusOr<ImageInfo> Tag(const std::string& key, const std::string& name);
  absl::StatusOr<ImageInfo> LoadBlob(const std::string& key, const std::string& name) const;
  // root_, blobs/ and refs/, closed to others.
  absl::Status MakeStoreDirectories();
  std::string root_;
  std::string tenant_;
};

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_IMAGE_STORE_H_
