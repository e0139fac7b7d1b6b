// Volumes: a tenant's named disks that outlive sessions. Each is an ext4 filesystem of the size
// asked for, in a sparse file of kVolumeDiskBytes (the size of the placeholder every VM has in
// its volume slots, so that template restores serve sessions with volumes too), at
// volumes/<id>.ext4 (0600). The table (volume_repository.h) says who holds one.
//
//   Attach: read-write by one session at a time (running or paused: a paused session keeps its
//     claim), read-only by any number, never both at once; up to kVolumeSlots per session.
//   Fork: each child gets its own copy of every read-write volume (named NAME-<child id>, listed
//     by `volume ls`, removed like any volume); read-only ones are shared.
//   Snapshot: a read-only copy (NAME@TAG) of a volume no session writes now.
//   Import: replaces the content with a tar's, written with libext2fs (never mounted or
//     unpacked on the host), while no session holds the volume.
//   Export: a session that attaches the volume read-only runs tar in the guest (the client's
//     `airlock volume export`): what sessions wrote is never parsed on the host.
//
// Nothing changes a volume under a session that holds it, so a paused session resumes with the
// data it saw (its attachment records the generation; a resume checks it).
#ifndef AIRLOCK_DAEMON_VOLUMES_H_
#define AIRLOCK_DAEMON_VOLUMES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/daemon/quota_admission.h"
#include "src/daemon/records.h"
#include "src/daemon/session_handoff.h"
#include "src/daemon/session_layout.h"
#include "src/daemon/state_store.h"

namespace airlock {

// A volume a new session asks for, where its guest mounts it.
struct VolumeRequest {
  std::string name;
  std::string path;
  bool read_only = false;
};

// Sizes a volume may have.
inline constexpr uint64_t kMinVolumeBytes = 16ull << 20;
inline constexpr uint64_t kMaxVolumeBytes = 1ull << 40;

class Volumes {
 public:
  // store and quotas must outlive this.
  Volumes(StateStore* store, QuotaAdmission* quotas, const SessionLayout& layout);

  // At start-up: the directory exists, nothing is busy, and disks no volume names (a create or
  // import that a crash cut short) are deleted.
  [[nodiscard]] absl::Status Recover();

  // A new, empty volume (an ext4 with a journal, its root owned by root, 0755), within the
  // tenant's disk quota.
  [[nodiscard]] absl::StatusOr<VolumeRecord> Create(const Principal& who, const std::string& name,
                                                    uint64_t size_bytes);
  [[nodiscard]] absl::StatusOr<std::vector<VolumeRecord>> List(const Principal& who);
  // The caller's volume of that name (NOT_FOUND saying how to list them).
  [[nodiscard]] absl::StatusOr<VolumeRecord> Get(const Principal& who, const std::string& name);
  [[nodiscard]] absl::Status Remove(const Principal& who, const std::string& name);
  // A read-only copy of the volume as it is, named snapshot_name (NAME@TAG); refused while a
  // session writes the volume (a paused one is fine: its volumes are frozen, clean).
  [[nodiscard]] absl::StatusOr<VolumeRecord> Snapshot(const Principal& who, const std::string& name,
                                                      const std::string& snapshot_name);
  // Replaces the volume's content with the tar at tar_path (any compression libarchive reads;
  // a hostile one is refused, never unpacked), while no session holds it.
  [[nodiscard]] absl::StatusOr<VolumeRecord> Import(const Principal& who, const std::string& name,
                                                    const std::string& tar_path);

  // A new session's attachments: each volume exists, each mount point is allowed and used once,
  // at most kVolumeSlots. Whether the volumes are free is decided when the session's record is
  // inserted (VolumeRepository::CheckAttachments).
  [[nodiscard]] absl::StatusOr<std::vector<VolumeAttachment>> Resolve(
      const Principal& who, const std::vector<VolumeRequest>& requests);
  // What a fork of `source` attaches: a new copy of each read-write volume, made from the open
  // disk in `disks` (by slot; -1 for read-only ones), named for the child; read-only ones as
  // the source has them. made_names gets the new volumes' names (to remove if the fork fails).
  [[nodiscard]] absl::StatusOr<std::vector<VolumeAttachment>> CopyForFork(
      const Principal& who, const SessionRecord& source, const std::vector<int>& disks,
      const std::string& child_id, std::vector<std::string>* made_names);
  // The bytes the read-write volumes of a session take, each (a fork's quota).
  uint64_t ReadWriteBytes(const SessionRecord& session);
  // For a session another host published (SessionHandoff::Published), taken over here: the
  // disks of its volumes from the blob store, each in place of this host's copy of that volume
  // (or as a new volume of the tenant's), as the publishing host left them. FAILED_PRECONDITION,
  // changing nothing of that volume, when the tenant has another volume of that name here, or
  // another session here holds the volume.
  [[nodiscard]] absl::Status Adopt(const Principal& who, const SessionHandoff::Published& published,
                                   SessionHandoff& handoff);
  // FAILED_PRECONDITION if a volume the paused session saw has changed since (it cannot, but a
  // resume checks rather than show a guest a disk its cache does not match).
  [[nodiscard]] absl::Status CheckUnchanged(const SessionRecord& session);

 private:
  StateStore* store_;
  QuotaAdmission* quotas_;
  SessionLayout layout_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_VOLUMES_H_
