#include "src/daemon/workspace_uploads.h"

#include <sys/random.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/hex.h"
#include "src/daemon/state_store.h"  // NowUnixMs

namespace airlock {

void WorkspaceUploads::DropExpiredLocked(int64_t now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    it = it->second.expires_ms <= now ? pending_.erase(it) : std::next(it);
  }
}

absl::StatusOr<std::string> WorkspaceUploads::Add(PendingWorkspace upload) {
  unsigned char random[16];
  if (getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) {
    return absl::InternalError("getrandom failed");
  }
  std::string token = HexString(random, sizeof random);
  int64_t now = NowUnixMs();
  absl::MutexLock lock(&mu_);
  DropExpiredLocked(now);
  size_t mine = 0;
  for (const auto& [t, p] : pending_) mine += p.tenant == upload.tenant ? 1 : 0;
  if (mine >= kMaxPerTenant) {
    return absl::ResourceExhaustedError(absl::StrCat(
        mine,
        " workspace uploads are already waiting for their sessions; create those sessions "
        "(or wait 10 minutes for the uploads to expire) and try again"));
  }
  upload.expires_ms = now + kLifetimeMs;
  pending_[token] = std::move(upload);
  return token;
}

absl::StatusOr<PendingWorkspace> WorkspaceUploads::Take(const std::string& tenant,
                                                        const std::string& token) {
  absl::MutexLock lock(&mu_);
  DropExpiredLocked(NowUnixMs());
  auto it = pending_.find(token);
  if (it == pending_.end() || it->second.tenant != tenant) {
    return absl::NotFoundError(
        "the workspace upload is unknown or expired (uploads wait 10 minutes for their session); "
        "run the command again");
  }
  PendingWorkspace upload = std::move(it->second);
  pending_.erase(it);
  return upload;
}

absl::StatusOr<std::unique_ptr<PendingWorkspace>> WorkspaceUploads::TakeFor(
    const std::string& tenant, const std::string& token) {
  if (token.empty()) return std::unique_ptr<PendingWorkspace>();
  absl::StatusOr<PendingWorkspace> taken = Take(tenant, token);
  if (!taken.ok()) return taken.status();
  return std::make_unique<PendingWorkspace>(*std::move(taken));
}

}  // namespace airlock
