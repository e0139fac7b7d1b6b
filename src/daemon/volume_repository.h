// The volumes table: a tenant's named volumes (src/daemon/volumes.h keeps their disks), and
// who holds each. A session's attachments are part of its row (sessions.volumes), so a
// volume's holders are the sessions that attach it and are not stopped or failed, and whether
// a session may attach it is decided in the transaction that inserts the session
// (CheckAttachments). Every change is audited in its own transaction. Thread-safe.
#ifndef AIRLOCK_DAEMON_VOLUME_REPOSITORY_H_
#define AIRLOCK_DAEMON_VOLUME_REPOSITORY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/daemon/records.h"
#include "src/daemon/sqlite_db.h"

namespace airlock {

// A session's attachments as the sessions table keeps them, and back (anything malformed is
// dropped: the text is airlockd's own).
std::string EncodeVolumeAttachments(const std::vector<VolumeAttachment>& volumes);
std::vector<VolumeAttachment> DecodeVolumeAttachments(const std::string& text);

// INVALID_ARGUMENT, saying what a name looks like, unless `name` is one: 1 to 63 of a-z, 0-9,
// '.', '_' and '-', starting with a letter or digit; with `snapshot`, NAME@TAG of two such.
[[nodiscard]] absl::Status CheckVolumeName(std::string_view name, bool snapshot = false);

class VolumeRepository {
 public:
  explicit VolumeRepository(SqliteDb& db) : db_(db) {}

  // The volume as another host of the fleet left it (its disk is in place already): replaces
  // this host's row of it, or inserts it; audited as volume.fetch. FAILED_PRECONDITION if the
  // tenant has another volume of that name.
  [[nodiscard]] absl::Status Adopt(const Principal& who, const VolumeRecord& volume,
                                   const std::string& outcome);
  // Inserts a volume, audited as `action` (volume.create, volume.snapshot, volume.fork);
  // ALREADY_EXISTS if the tenant has one of that name.
  [[nodiscard]] absl::Status Create(const Principal& who, const VolumeRecord& volume,
                                    const std::string& action, const std::string& outcome);
  // The tenant's volume of that name, with its holders; NOT_FOUND saying how to list them.
  [[nodiscard]] absl::StatusOr<VolumeRecord> Get(const std::string& tenant,
                                                 const std::string& name);
  [[nodiscard]] absl::StatusOr<std::vector<VolumeRecord>> List(const std::string& tenant);
  // The sizes of the tenant's volumes, together (they count against its disk quota).
  [[nodiscard]] absl::StatusOr<uint64_t> TotalBytes(const std::string& tenant);
  // Deletes the tenant's volume of that name and returns it; FAILED_PRECONDITION naming the
  // sessions that hold it, or what it is busy with.
  [[nodiscard]] absl::StatusOr<VolumeRecord> Remove(const Principal& who, const std::string& tenant,
                                                    const std::string& name);
  // Marks the volume busy with `what` ("import", "snapshot") so that no session attaches it
  // and nothing else starts on it until Unmark; FAILED_PRECONDITION naming its holders (any
  // holder, or with read_write_only only a read-write one) or what it is busy with already.
  [[nodiscard]] absl::StatusOr<VolumeRecord> Mark(const std::string& tenant,
                                                  const std::string& name, const std::string& what,
                                                  bool read_write_only);
  // Ends what Mark began: with `replaced`, its content is new (generation + 1), audited.
  [[nodiscard]] absl::Status Unmark(const Principal& who, const VolumeRecord& volume, bool replaced,
                                    const std::string& action, const std::string& outcome);
  // At start-up: what a daemon that stopped left busy is not any more (its work is gone).
  [[nodiscard]] absl::Status ClearBusy();
  // Every volume id there is, of every tenant (disks without one are left-overs).
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> AllIds();

  // In the transaction that inserts session `session_id` of `tenant`: each attachment's volume
  // exists (NOT_FOUND), is not busy, is attached read-write only if it is not a snapshot, and
  // is held by no other session in a way that conflicts (read-write by one session at a time,
  // read-only by any number): FAILED_PRECONDITION naming the holder.
  [[nodiscard]] static absl::Status CheckAttachments(SqliteDb::Locked& db,
                                                     const std::string& tenant,
                                                     const std::string& session_id,
                                                     const std::vector<VolumeAttachment>& volumes);

 private:
  SqliteDb& db_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_VOLUME_REPOSITORY_H_
