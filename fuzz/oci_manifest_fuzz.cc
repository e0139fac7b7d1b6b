// Fuzz target: OCI image indexes, manifests and configs, and `docker save` manifest.json, as a
// registry or an archive would hand them over.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/image/oci.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (auto index = airlock::ParseOciIndex(text); index.ok()) {
    for (const airlock::OciDescriptor& d : *index) {
      if (!airlock::IsSha256Digest(d.digest)) __builtin_trap();
    }
    (void)airlock::PickLinuxAmd64(*index);
  }
  if (auto manifest = airlock::ParseOciManifest(text); manifest.ok()) {
    if (manifest->layers.size() > airlock::kMaxOciLayers) __builtin_trap();
  }
  if (auto config = airlock::ParseOciImageConfig(text); config.ok()) {
    for (const std::string& e : config->run.env) {
      if (e.find('=') == std::string::npos) __builtin_trap();
    }
  }
  (void)airlock::ParseDockerSaveManifest(text);
  return 0;
}
