// The records a fleet keeps in etcd about a session, signed with the fleet's host key: a
// session's published snapshot (session_handoff.h) and its entry in the fleet's session index
// (what `airlock ls` shows of every host). etcd is untrusted storage, so a record is read only
// after its HMAC matches, and even then parsed with caps.
//
//   <header line>
//   NAME\tVALUE            one line per field the kind of record names (host, manifest, ...),
//                          the value C-escaped
//   <the session's record, as EncodeSessionRecord writes it>
//   hmac\t<hex HMAC-SHA256 of everything above>
#ifndef AIRLOCK_DAEMON_FLEET_RECORD_H_
#define AIRLOCK_DAEMON_FLEET_RECORD_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/daemon/records.h"

namespace airlock {

inline constexpr size_t kMaxFleetRecordBytes = 256 * 1024;

struct FleetRecord {
  std::map<std::string, std::string> fields;  // only the names asked for
  SessionRecord record;
};

// The field lines of a session's published snapshot record (SessionHandoff::Publish): the host
// that took it, its manifest's blob, its image's blobs, its generation, and its volumes' disks.
// (No name may be one of EncodeSessionRecord's fields.)
inline const std::vector<std::string>& PublishedRecordFields() {
  static const auto* fields =
      new std::vector<std::string>{"host", "manifest", "image-blobs", "generation", "volume-disks"};
  return *fields;
}

// header: one line, ending in '\n'. Field names hold no tab or newline.
std::string SignFleetRecord(absl::string_view header,
                            const std::vector<std::pair<std::string, std::string>>& fields,
                            const SessionRecord& record, const std::string& key);

// DataLoss, saying why, for anything SignFleetRecord did not write with this key: another
// header, a wrong or missing HMAC, a record that does not decode, more than the cap. `fields`:
// the names of the field lines this kind of record has (any other line is the session's).
absl::StatusOr<FleetRecord> VerifyFleetRecord(absl::string_view value, absl::string_view header,
                                              const std::vector<std::string>& fields,
                                              const std::string& key);

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_FLEET_RECORD_H_
