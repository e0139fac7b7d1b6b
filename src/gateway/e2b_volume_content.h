// E2B's volume content API (a volume's files without a sandbox: list, make a directory, stat,
// change owner and mode, remove, read, write) as plain data: the query and body of each
// request parsed and checked, and the entries answered as E2B's VolumeEntryStat. What each
// operation does is the daemon's (src/daemon/e2b_volume_content.cc).
//
// Every byte comes from whoever holds (or guesses) a volume's token. A path is inside the
// volume: "/" is its root, a relative path starts there too, and ".." is refused, so no
// request names anything outside it.
#ifndef AIRLOCK_GATEWAY_E2B_VOLUME_CONTENT_H_
#define AIRLOCK_GATEWAY_E2B_VOLUME_CONTENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/common/channel_messages.h"

namespace airlock::gateway::e2b {

// The query of a volume content request: path (required), depth (list: 1 to kMaxFsDepth, 1 by
// default), uid, gid and mode (make a directory, write a file: what it gets; mode is
// permission bits, at most 07777), force (make a directory: its parents too; write a file:
// replace one that is there).
struct VolumeContentQuery {
  std::string path;  // inside the volume, "/"-rooted and clean: no "", "." or ".." parts
  uint32_t depth = 1;
  std::optional<uint32_t> uid, gid, mode;
  bool force = false;
};
// INVALID_ARGUMENT saying which parameter is wrong.
[[nodiscard]] absl::StatusOr<VolumeContentQuery> ParseVolumeContentQuery(absl::string_view target);

// PATCH .../path: {"uid", "gid", "mode"}, each optional (at least one).
struct VolumeMetadata {
  std::optional<uint32_t> uid, gid, mode;
};
[[nodiscard]] absl::StatusOr<VolumeMetadata> ParseVolumeMetadata(absl::string_view body);

// An entry of the guest's (its path absolute in the guest, under mount) as E2B's
// VolumeEntryStat, its path inside the volume.
std::string VolumeEntryJson(const FsEntry& entry, absl::string_view mount);
// A listing (VolumeDirectoryListing).
std::string VolumeListingJson(const std::vector<FsEntry>& entries, absl::string_view mount);

// "Bearer TOKEN" of an Authorization header: the token, or nullopt.
std::optional<std::string> BearerToken(absl::string_view authorization);

}  // namespace airlock::gateway::e2b

#endif  // AIRLOCK_GATEWAY_E2B_VOLUME_CONTENT_H_
