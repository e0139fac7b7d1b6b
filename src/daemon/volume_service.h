// The Volumes gRPC service (proto/airlock/v1/airlock.proto): the caller's volumes
// (src/daemon/volumes.h), each call as the caller's tenant.
#ifndef AIRLOCK_DAEMON_VOLUME_SERVICE_H_
#define AIRLOCK_DAEMON_VOLUME_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "proto/airlock/v1/airlock.grpc.pb.h"
#include "src/common/host_paths.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/unix_listener.h"

namespace airlock {

class VolumesService final : public v1::Volumes::Service {
 public:
  VolumesService(SessionManager* sessions, const PeerRegistry* peers, HostPaths paths)
      : sessions_(sessions), peers_(peers), paths_(std::move(paths)) {}
  grpc::Status Create(grpc::ServerContext* context, const v1::CreateVolumeRequest* request,
                      v1::Volume* response) override;
  grpc::Status List(grpc::ServerContext* context, const v1::ListVolumesRequest* request,
                    v1::ListVolumesResponse* response) override;
  grpc::Status Remove(grpc::ServerContext* context, const v1::RemoveVolumeRequest* request,
                      v1::RemoveVolumeResponse* response) override;
  grpc::Status Snapshot(grpc::ServerContext* context, const v1::SnapshotVolumeRequest* request,
                        v1::Volume* response) override;
  grpc::Status Import(grpc::ServerContext* context,
                      grpc::ServerReader<v1::ImportVolumeChunk>* reader,
                      v1::Volume* response) override;

 private:
  SessionManager* sessions_;
  const PeerRegistry* peers_;
  HostPaths paths_;
};

// A volume as the API shows it.
void ToProto(const VolumeRecord& v, v1::Volume* out);

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_VOLUME_SERVICE_H_
