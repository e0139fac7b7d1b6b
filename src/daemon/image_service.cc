#include "src/daemon/image_service.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/common/byte_size.h"
#include "src/common/log.h"
#include "src/telemetry/tracer.h"

namespace airlock {

ImageService::ImageService(std::string images_dir, StateStore* store, const QuotaAdmission* quotas,
                           bool registry_internal, std::atomic<uint64_t>* pulls)
    : dir_(std::move(images_dir)),
      store_(store),
      quotas_(quotas),
      registry_internal_(registry_internal),
      pulls_(pulls) {}

ImageStore ImageService::For(const Principal& who) const {
  return ImageStore(dir_, who.ImageScope());
}

ImageStore ImageService::ForScope(const std::string& scope) const {
  return ImageStore(dir_, scope);
}

RegistryAccess ImageService::AccessFor(const Principal& who) const {
  // Root over the Unix socket is the operator; anyone else gets what the operator allowed.
  bool op = who.IsHostRoot();
  // A tenant's pull may take what is left of its images quota, and no more than one pull may.
  const Quota& quota = quotas_->For(who.Tenant());
  uint64_t images = For(who).OwnBytes();
  uint64_t left = quota.limits.image_bytes > images ? quota.limits.image_bytes - images : 0;
  return {.use_credentials = op,
          .internal_addresses = op || registry_internal_,
          .max_bytes = op ? quota.pull_bytes : std::min(quota.pull_bytes, left)};
}

absl::StatusOr<std::vector<std::string>> ImageService::InUse() const {
  absl::StatusOr<std::vector<SessionRecord>> sessions = store_->sessions().InState(
      {SessionState::kCreating, SessionState::kRunning, SessionState::kPaused});
  if (!sessions.ok()) return sessions.status();
  std::vector<std::string> digests;
  for (const SessionRecord& s : *sessions) digests.push_back(s.image_digest);
  return digests;
}

ImageService::QuotaCheck ImageService::CheckQuotaAfter(const Principal& who) const {
  if (who.IsHostRoot()) return [](const ImageInfo&) { return absl::OkStatus(); };
  ImageStore before = For(who);
  std::map<std::string, std::string> tags;  // the tenant's own, to digests
  for (const std::string& name : before.OwnNames()) {
    absl::StatusOr<ImageInfo> info = before.Resolve(name);
    if (info.ok()) tags[name] = info->digest;
  }
  uint64_t quota = quotas_->For(who.Tenant()).limits.image_bytes;
  return [this, scope = who.ImageScope(), tags = std::move(tags), was = before.OwnBytes(),
          quota](const ImageInfo& made) -> absl::Status {
    ImageStore images = ForScope(scope);
    uint64_t now = images.OwnBytes();
    if (now <= quota || now <= was) return absl::OkStatus();
    absl::Status undone;
    if (auto it = tags.find(made.name); it != tags.end()) {
      undone = images.TagDigest(made.name, it->second).status();
    } else {
      // What sessions use stays (Prune frees it later); if that is unknown, the new image does.
      absl::StatusOr<std::vector<std::string>> in_use = InUse();
      undone = images.Remove(made.name, in_use.ok() ? *in_use : std::vector{made.digest}).status();
    }
    LogIfFailed(undone, absl::StrCat("image ", made.name, " over the images quota not undone"));
    return absl::ResourceExhaustedError(
        absl::StrCat("image ", made.name, " takes ", FormatBytes(made.size_bytes),
                     " on disk, and with your other images that is ", FormatBytes(now),
                     ", over your images quota of ", FormatBytes(quota), "; so it was ",
                     undone.ok() ? "not kept" : "made but could not be taken back",
                     " (airlock quota shows what you use; airlock image rm frees some)"));
  };
}

absl::StatusOr<ImageInfo> ImageService::Pull(const Principal& who, const std::string& reference,
                                             const PullOptions& options) const {
  ImageStore images = For(who);
  if (options.if_missing) {
    absl::StatusOr<ImageInfo> there = images.Resolve(reference);
    if (there.ok() || !absl::IsNotFound(there.status())) return there;
  }
  QuotaCheck within_quota = CheckQuotaAfter(who);
  telemetry::Span span("pull");
  span.SetAttribute("airlock.image", reference);
  ++*pulls_;
  absl::StatusOr<ImageInfo> info =
      options.if_missing ? images.ResolveOrPull(reference, options.progress, AccessFor(who))
                         : images.Pull(reference, options.progress, AccessFor(who));
  if (!info.ok()) span.SetError(std::string(info.status().message()));
  span.End();
  if (info.ok()) {
    if (absl::Status s = within_quota(*info); !s.ok()) info = s;
  }
  if (options.audit) {
    LogIfFailed(
        store_->audit().Audit(who, who.Tenant(), "image.pull", reference,
                              info.ok() ? absl::StrCat("ok; ", info->digest)
                                        : absl::StrCat("failed: ", info.status().message())),
        absl::StrCat("image pull of ", reference, " not audited"));
  }
  return info;
}

}  // namespace airlock
