// E2B's volume content API (E2B_VOLUME_API_URL pointed at the gateway): a volume's files
// without a sandbox of the caller's (list, make a directory, stat, change owner and mode,
// remove, read, write), translated onto a session's files. What sessions wrote on a volume is
// never parsed on the host, so every operation runs in a guest that attaches the volume:
//   - a running session of the tenant's that attaches it (read-write, or read-only for reads),
//     at its mount path: the sandbox sees the change at once;
//   - else a helper session of the tenant's own (the default image, the volume at /volume),
//     started for the first request and ended kLingerSeconds after the last one; a sandbox
//     created through the E2B API with the volume in volumeMounts ends it first (Release).
// A volume held by a paused session, or read-only by running ones for a write, is refused
// (409) saying which session holds it.
//
// Admission: the volume's token (Authorization: Bearer), which Volume.create and getInfo give
// the SDK (TokenFor): "vt_", the tenant in hex, "_", and an HMAC of the tenant and the
// volume's id under a key derived from the host key. A volume removed and made again under the
// same name has a new id, so an old token does not open it. Calls act as the tenant (audited
// as "volume-token"), each takes a place in its `connections` quota while it lasts, and the
// helper session counts in its session quotas. Thread-safe.
#ifndef AIRLOCK_DAEMON_E2B_VOLUME_CONTENT_H_
#define AIRLOCK_DAEMON_E2B_VOLUME_CONTENT_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/daemon/session_files.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/gateway/e2b_control.h"
#include "src/gateway/e2b_volume_content.h"
#include "src/gateway/http_gateway.h"

namespace airlock {

class E2bVolumeContent {
 public:
  // How long a helper session stays after its last request, for the next one.
  static constexpr uint64_t kLingerSeconds = 30;
  // Where a helper session mounts the volume.
  static constexpr char kHelperMount[] = "/volume";
  // A write's body is held in memory: at most this much, and this many at once.
  static constexpr size_t kMaxUploadBytes = 64 << 20;
  static constexpr int kMaxUploadsAtOnce = 8;

  E2bVolumeContent(SessionManager* sessions, StateStore* store)
      : sessions_(sessions), store_(store), files_(sessions, store) {}

  // The token of a volume, for the answers of Volume.create and getInfo.
  std::string TokenFor(const VolumeRecord& volume) const;

  // Serves one request whose route is a volume content operation.
  void Serve(const gateway::e2b::Route& route, const gateway::GatewayRequest& request,
             gateway::GatewayConnection& connection);

  // Whether the session is a helper of this API's (not a sandbox: E2B's list leaves it out).
  bool IsHelper(const std::string& session_id);

  // Ends the helper sessions that hold any of the tenant's volumes `names`, so that a new
  // sandbox may attach them.
  void Release(const Principal& who, const std::vector<std::string>& names);

 private:
  // Where an operation runs: a session, and the volume's path in its guest.
  struct Place {
    std::string session_id;
    std::string mount;
    bool helper = false;
  };
  [[nodiscard]] absl::StatusOr<Place> PlaceFor(const Principal& who, const VolumeRecord& asked,
                                               bool write);
  void Operate(const gateway::e2b::Route& route, const Principal& who, const Place& place,
               const gateway::GatewayRequest& request, gateway::GatewayConnection& connection);
  [[nodiscard]] absl::StatusOr<std::string> Write(const Principal& who, const Place& place,
                                                  const std::string& path,
                                                  const gateway::e2b::VolumeContentQuery& query,
                                                  const gateway::GatewayRequest& request,
                                                  gateway::GatewayConnection& connection);

  SessionManager* sessions_;
  StateStore* store_;
  SessionFiles files_;
  std::atomic<int> uploads_{0};
  absl::Mutex mu_;  // held while a helper session is found or started, or let go
  std::map<std::string, std::string> helpers_ ABSL_GUARDED_BY(mu_);  // volume id -> session
  std::map<std::string, int> busy_ ABSL_GUARDED_BY(mu_);  // helper session -> requests in it
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_E2B_VOLUME_CONTENT_H_
