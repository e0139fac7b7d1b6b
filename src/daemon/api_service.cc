#include "src/daemon/api_service.h"

#include "absl/strings/str_cat.h"
#include "src/daemon/airlock_service.h"

namespace airlock {

grpc::Status ApiService::Version(grpc::ServerContext* context, const v1::VersionRequest* request,
                                 v1::VersionReply* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (request->client_level() != 0 && request->client_level() < kOldestClientLevel) {
    return ToGrpc(absl::FailedPreconditionError(
        absl::StrCat("this client speaks Airlock API level ", request->client_level(),
                     "; airlockd ", daemon_version_, " serves levels ", kOldestClientLevel, " to ",
                     kApiLevel, ": upgrade the client (SDK or CLI)")));
  }
  response->set_level(kApiLevel);
  response->set_oldest_client_level(kOldestClientLevel);
  response->set_daemon_version(daemon_version_);
  return grpc::Status::OK;
}

}  // namespace airlock
