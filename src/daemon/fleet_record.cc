#include "src/daemon/fleet_record.h"

#include <openssl/crypto.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/common/sha256.h"
#include "src/daemon/state_store.h"  // EncodeSessionRecord

namespace airlock {

std::string SignFleetRecord(absl::string_view header,
                            const std::vector<std::pair<std::string, std::string>>& fields,
                            const SessionRecord& record, const std::string& key) {
  std::string value(header);
  for (const auto& [name, field] : fields) {
    absl::StrAppend(&value, name, "\t", absl::CEscape(field), "\n");
  }
  absl::StrAppend(&value, EncodeSessionRecord(record));
  absl::StrAppend(&value, "hmac\t", HmacSha256Hex(key, value), "\n");
  return value;
}

absl::StatusOr<FleetRecord> VerifyFleetRecord(absl::string_view value, absl::string_view header,
                                              const std::vector<std::string>& fields,
                                              const std::string& key) {
  size_t mac_at = value.rfind("hmac\t");
  if (value.size() > kMaxFleetRecordBytes || mac_at == absl::string_view::npos ||
      !absl::StartsWith(value, header)) {
    return absl::DataLossError("it is not a record airlockd writes");
  }
  absl::string_view signed_part = value.substr(0, mac_at);
  std::string mac(absl::StripSuffix(value.substr(mac_at + 5), "\n"));
  std::string expected = HmacSha256Hex(key, signed_part);
  if (mac.size() != expected.size() ||
      CRYPTO_memcmp(mac.data(), expected.data(), expected.size()) != 0) {
    return absl::DataLossError(
        "its signature does not match this host's key (every host of a fleet needs the same "
        "host.key), or it was changed");
  }
  FleetRecord out;
  std::string rest;
  for (absl::string_view line :
       absl::StrSplit(signed_part.substr(header.size()), '\n', absl::SkipEmpty())) {
    size_t tab = line.find('\t');
    std::string name(line.substr(0, tab));
    if (tab != absl::string_view::npos &&
        std::find(fields.begin(), fields.end(), name) != fields.end()) {
      std::string field;
      if (!absl::CUnescape(line.substr(tab + 1), &field) ||
          !out.fields.emplace(name, std::move(field)).second) {
        return absl::DataLossError(absl::StrCat("its ", name, " line is malformed"));
      }
    } else {
      absl::StrAppend(&rest, line, "\n");
    }
  }
  absl::StatusOr<SessionRecord> record = DecodeSessionRecord(rest);
  if (!record.ok()) return absl::DataLossError(record.status().message());
  out.record = *std::move(record);
  return out;
}

}  // namespace airlock
