// Fuzz target: the principal a forwarded call names (fleet_forward.h), as a fleet host's
// metadata carries it. Only a peer the fleet's CA signed may send one, but its bytes are still
// checked before use: whatever decodes encodes back to the same principal and groups.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/daemon/fleet_forward.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> groups;
  absl::StatusOr<airlock::Principal> who = airlock::DecodeFleetCaller(
      std::string_view(reinterpret_cast<const char*>(data), size), &groups);
  if (!who.ok()) return 0;
  std::string text = airlock::EncodeFleetCaller(*who, groups);
  for (char c : text) {
    if (c < ' ' || c > '~') __builtin_trap();  // metadata values are printable ASCII
  }
  std::vector<std::string> groups_again;
  absl::StatusOr<airlock::Principal> again = airlock::DecodeFleetCaller(text, &groups_again);
  if (!again.ok() || again->Name() != who->Name() || again->oidc != who->oidc ||
      groups_again != groups) {
    __builtin_trap();
  }
  return 0;
}
