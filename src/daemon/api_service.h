// The Api service: which API level airlockd speaks, so that clients fail loudly and early when
// they and the daemon disagree (see `service Api` in airlock.proto).
#ifndef AIRLOCK_DAEMON_API_SERVICE_H_
#define AIRLOCK_DAEMON_API_SERVICE_H_

#include <string>
#include <utility>

#include "proto/airlock/v1/airlock.grpc.pb.h"
#include "src/daemon/unix_listener.h"

namespace airlock {

// The API level this airlockd serves: grows by one with each addition to airlock.proto that a
// client may rely on, with a line for it in the proto's list of levels.
inline constexpr uint32_t kApiLevel = 2;
// Clients built for a level below this are refused (none yet: v1 only ever grows).
inline constexpr uint32_t kOldestClientLevel = 1;

class ApiService final : public v1::Api::Service {
 public:
  ApiService(const PeerRegistry* peers, std::string daemon_version)
      : peers_(peers), daemon_version_(std::move(daemon_version)) {}
  grpc::Status Version(grpc::ServerContext* context, const v1::VersionRequest* request,
                       v1::VersionReply* response) override;

 private:
  const PeerRegistry* peers_;
  std::string daemon_version_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_API_SERVICE_H_
