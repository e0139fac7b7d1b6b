// Fuzz target: a snapshot manifest as read back from disk (it may have been tampered with).
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/vm/snapshot_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  static const std::string key(airlock::kHostKeyBytes, 'k');
  absl::StatusOr<airlock::SnapshotManifest> m = airlock::VerifyManifest(text, key);
  // Whatever verifies must sign back to something that verifies.
  if (m.ok() && !airlock::VerifyManifest(airlock::SignManifest(*m, key), key).ok()) {
    __builtin_trap();
  }
  return 0;
}
