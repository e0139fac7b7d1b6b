#include "src/daemon/volume_service.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/common/byte_size.h"
#include "src/common/file_util.h"
#include "src/daemon/airlock_service.h"
#include "src/daemon/session_files.h"
#include "src/daemon/upload_messages.h"
#include "src/vm/snapshot.h"

namespace airlock {

void ToProto(const VolumeRecord& v, v1::Volume* out) {
  out->set_name(v.name);
  out->set_size_bytes(v.size_bytes);
  out->set_read_only(v.read_only);
  out->set_origin(v.origin);
  out->set_generation(v.generation);
  out->set_created_unix_ms(v.created_ms);
  for (const std::string& h : v.holders) out->add_holders(h);
  out->set_held_read_write(v.held_read_write);
}

grpc::Status VolumesService::Create(grpc::ServerContext* context,
                                    const v1::CreateVolumeRequest* request, v1::Volume* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  absl::StatusOr<VolumeRecord> v =
      sessions_->volumes().Create(*who, request->name(), request->size_bytes());
  if (!v.ok()) return ToGrpc(v.status());
  ToProto(*v, response);
  return grpc::Status::OK;
}

grpc::Status VolumesService::List(grpc::ServerContext* context, const v1::ListVolumesRequest*,
                                  v1::ListVolumesResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  absl::StatusOr<std::vector<VolumeRecord>> all = sessions_->volumes().List(*who);
  if (!all.ok()) return ToGrpc(all.status());
  for (const VolumeRecord& v : *all) ToProto(v, response->add_volumes());
  return grpc::Status::OK;
}

grpc::Status VolumesService::Remove(grpc::ServerContext* context,
                                    const v1::RemoveVolumeRequest* request,
                                    v1::RemoveVolumeResponse*) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  return ToGrpc(sessions_->volumes().Remove(*who, request->name()));
}

grpc::Status VolumesService::Snapshot(grpc::ServerContext* context,
                                      const v1::SnapshotVolumeRequest* request,
                                      v1::Volume* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  absl::StatusOr<VolumeRecord> v =
      sessions_->volumes().Snapshot(*who, request->name(), request->snapshot());
  if (!v.ok()) return ToGrpc(v.status());
  ToProto(*v, response);
  return grpc::Status::OK;
}

grpc::Status VolumesService::Import(grpc::ServerContext* context,
                                    grpc::ServerReader<v1::ImportVolumeChunk>* reader,
                                    v1::Volume* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  v1::ImportVolumeChunk chunk;
  if (!reader->Read(&chunk)) {
    return ToGrpc(absl::InvalidArgumentError("Import starts with a message naming the volume"));
  }
  const std::string name = chunk.name();
  absl::StatusOr<VolumeRecord> volume = sessions_->volumes().Get(*who, name);
  if (!volume.ok()) return ToGrpc(volume.status());
  // A tar bigger than this cannot fit (its headers take 512 bytes a file; compressed ones are
  // checked by their content).
  uint64_t cap = volume->size_bytes + volume->size_bytes / 4 + (64ull << 20);
  absl::StatusOr<UniqueFd> archive = UnnamedFile(paths_.scratch);
  if (!archive.ok()) return ToGrpc(archive.status());
  UploadMessages<v1::ImportVolumeChunk> messages(context, reader, "the volume is unchanged");
  uint64_t received = 0;
  for (bool first = true;; first = false) {
    if (!first) {
      if (absl::Status s = messages.Next(&chunk); !s.ok()) return ToGrpc(s);
      if (!chunk.name().empty()) {
        return ToGrpc(
            absl::InvalidArgumentError("only the first message of Import names the volume"));
      }
    }
    if (chunk.data().size() > kMaxFilePiece) {
      return ToGrpc(absl::InvalidArgumentError(
          "a piece of an archive is at most 1 MiB; send it in more messages"));
    }
    received += chunk.data().size();
    if (received > cap) {
      return ToGrpc(absl::ResourceExhaustedError(absl::StrCat(
          "the archive is larger than volume ", name, " (", FormatBytes(volume->size_bytes),
          ") can take: make a larger volume (airlock volume create NAME --size ...)")));
    }
    if (absl::Status s = WriteAll(archive->get(), chunk.data()); !s.ok()) return ToGrpc(s);
    if (chunk.last()) break;
  }
  absl::StatusOr<VolumeRecord> imported =
      sessions_->volumes().Import(*who, name, absl::StrCat("/proc/self/fd/", archive->get()));
  if (!imported.ok()) return ToGrpc(imported.status());
  ToProto(*imported, response);
  return grpc::Status::OK;
}

}  // namespace airlock
