// The daemon's images: the one place that opens the image store for a caller (its tenant's
// names over the operator's; never another tenant's), pulls for one (with the registry access
// and the images quota the caller has; counted, traced and audited), and knows which images
// sessions use. Thread-safe (the image store is; this holds no state of its own).
#ifndef AIRLOCK_DAEMON_IMAGE_SERVICE_H_
#define AIRLOCK_DAEMON_IMAGE_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/daemon/quota_admission.h"
#include "src/daemon/state_store.h"
#include "src/image/image_store.h"
#include "src/image/registry_client.h"

namespace airlock {

class ImageService {
 public:
  // store, quotas and pulls (the counter of pulls made) must outlive this. registry_internal:
  // pulls for other users than root may reach registries on internal addresses.
  ImageService(std::string images_dir, StateStore* store, const QuotaAdmission* quotas,
               bool registry_internal, std::atomic<uint64_t>* pulls);

  // The caller's view: its tenant's names over the operator's.
  ImageStore For(const Principal& who) const;
  // A tenant's view by its image scope (Principal::ImageScope).
  ImageStore ForScope(const std::string& scope) const;
  // The operator's names, and every image's blobs by digest (what a session was made from).
  ImageStore Operators() const { return ForScope(""); }
  const std::string& dir() const { return dir_; }

  // What a pull or import the caller makes may use (registry_client.h): the operator's
  // credentials and internal addresses, and how many bytes (its images quota's rest).
  RegistryAccess AccessFor(const Principal& who) const;

  // A tenant's images quota counts what its images take on disk, which a pull, import or build
  // knows only once done (the download cap counts compressed bytes). Called before one, into
  // images (who's view); the check it returns is called with what was made: over the quota,
  // and more than before, the tag made is put back as it was and RESOURCE_EXHAUSTED says so.
  // Root's images have no quota.
  using QuotaCheck = std::function<absl::Status(const ImageInfo& made)>;
  QuotaCheck CheckQuotaAfter(const Principal& who) const;

  struct PullOptions {
    // An image already in the caller's view is returned as it is: nothing is pulled, counted
    // or audited.
    bool if_missing = false;
    RegistryClient::Progress progress;
    bool audit = true;  // a pull is audited as image.pull with its digest or its failure
  };
  // Pulls `reference` for the caller: with its registry access, counted and traced as a pull,
  // and an image that takes the caller over its images quota is taken back (CheckQuotaAfter).
  [[nodiscard]] absl::StatusOr<ImageInfo> Pull(const Principal& who, const std::string& reference,
                                               const PullOptions& options) const;

  // The digests of the images sessions (creating, running, paused) use: what removing a tag
  // must not free.
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> InUse() const;

 private:
  std::string dir_;
  StateStore* store_;
  const QuotaAdmission* quotas_;
  bool registry_internal_;
  std::atomic<uint64_t>* pulls_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_IMAGE_SERVICE_H_
