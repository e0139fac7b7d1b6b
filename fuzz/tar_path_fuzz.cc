// Fuzz target: tar entry names. A cleaned path never escapes the image root.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/image/tar_path.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string name(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::string> path = airlock::CleanTarPath(name);
  if (!path.ok()) return 0;
  const std::string& p = *path;
  if (!p.empty() && (p[0] == '/' || p.back() == '/')) __builtin_trap();
  if (p == ".." || p.rfind("../", 0) == 0 || p.find("/../") != std::string::npos ||
      (p.size() >= 3 && p.compare(p.size() - 3, 3, "/..") == 0)) {
    __builtin_trap();
  }
  if (p.find("//") != std::string::npos) __builtin_trap();
  return 0;
}
