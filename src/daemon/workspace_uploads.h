// Workspaces uploaded by clients and not yet given to a session. A client captures its project
// itself (with its own rights), streams the image with Workspaces.Upload, and names the token in
// the request that creates the session; until then the image is an unnamed file in
// $AIRLOCK_HOME/tmp that vanishes with its descriptor (an expired upload, or airlockd stopping,
// leaves nothing behind). Thread-safe.
#ifndef AIRLOCK_DAEMON_WORKSPACE_UPLOADS_H_
#define AIRLOCK_DAEMON_WORKSPACE_UPLOADS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/common/unique_fd.h"
#include "src/daemon/records.h"

namespace airlock {

struct PendingWorkspace {
  std::string tenant;
  UniqueFd image;  // kWorkspaceDiskBytes long (sparse)
  WorkspaceRecord base;
  std::string manifest;  // a serialized v1::WorkspaceInfo with the entries
  int64_t expires_ms = 0;
};

class WorkspaceUploads {
 public:
  // How long an upload waits for its session.
  static constexpr int64_t kLifetimeMs = 10 * 60 * 1000;
  // Uploads one tenant may have waiting at once.
  static constexpr size_t kMaxPerTenant = 4;

  // Keeps an upload; returns its token. RESOURCE_EXHAUSTED past kMaxPerTenant.
  [[nodiscard]] absl::StatusOr<std::string> Add(PendingWorkspace upload);
  // Hands over the tenant's upload of that token (once). NOT_FOUND for one that expired, was
  // used, or is another tenant's.
  [[nodiscard]] absl::StatusOr<PendingWorkspace> Take(const std::string& tenant,
                                                      const std::string& token);
  // The workspace a request's token names, for a new session: nullptr for no token.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<PendingWorkspace>> TakeFor(const std::string& tenant,
                                                                          const std::string& token);

 private:
  void DropExpiredLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Mutex mu_;
  std::map<std::string, PendingWorkspace> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_WORKSPACE_UPLOADS_H_
