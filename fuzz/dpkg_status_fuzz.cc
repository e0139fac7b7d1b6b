// Fuzz target: an image's dpkg status file. Every package read is named and versioned, with
// no line break in either.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/image/dpkg_status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string status(reinterpret_cast<const char*>(data), size);
  for (const auto& [name, version] : airlock::InstalledDebianPackages(status)) {
    if (name.empty() || version.empty()) __builtin_trap();
    if (name.find('\n') != std::string::npos || version.find('\n') != std::string::npos) {
      __builtin_trap();
    }
  }
  return 0;
}
