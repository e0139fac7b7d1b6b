// Fuzz target: a fleet record (fleet_record.h) as read from etcd, which is untrusted storage.
// The input is the signed part: the target signs it with the test key, as a host of the fleet
// would have, so that the parser behind the HMAC is reached; the input as it is must be refused
// unless it carries a valid HMAC itself.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "src/common/sha256.h"
#include "src/daemon/fleet_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string key(32, 'k');
  static const char kHeader[] = "airlock-session-index 1\n";
  static const std::vector<std::string> kFields = {"host", "state", "reason"};
  std::string body(reinterpret_cast<const char*>(data), size);
  (void)airlock::VerifyFleetRecord(body, kHeader, kFields, key).ok();
  std::string value = body + "hmac\t" + airlock::HmacSha256Hex(key, body) + "\n";
  absl::StatusOr<airlock::FleetRecord> read =
      airlock::VerifyFleetRecord(value, kHeader, kFields, key);
  if (!read.ok()) return 0;
  // What was read signs back to a record that reads the same.
  std::vector<std::pair<std::string, std::string>> fields(read->fields.begin(), read->fields.end());
  absl::StatusOr<airlock::FleetRecord> again = airlock::VerifyFleetRecord(
      airlock::SignFleetRecord(kHeader, fields, read->record, key), kHeader, kFields, key);
  if (!again.ok() || again->fields != read->fields || again->record.id != read->record.id ||
      again->record.tenant != read->record.tenant) {
    __builtin_trap();
  }
  return 0;
}
