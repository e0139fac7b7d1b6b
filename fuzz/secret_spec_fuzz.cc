// Fuzz target: --secret specs as a client (or a model, through MCP) sends them. Besides not
// crashing: an accepted spec is well formed, and its canonical text parses back to it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "src/secrets/secret_spec.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<airlock::secrets::SecretSpec> spec = airlock::secrets::ParseSecretSpec(text);
  if (!spec.ok()) {
    Check(!spec.status().message().empty());
    return 0;
  }
  Check(!spec->name.empty() && !spec->hosts.empty() && !spec->source.empty());
  Check(spec->hosts.size() <= airlock::secrets::kMaxSecretHosts);
  for (const std::string& h : spec->hosts) {
    for (char c : h) Check(!(c >= 'A' && c <= 'Z') && c != ',' && c != '@' && c != '*');
  }
  std::string canonical = airlock::secrets::FormatSecretSpec(*spec);
  absl::StatusOr<airlock::secrets::SecretSpec> again = airlock::secrets::ParseSecretSpec(canonical);
  Check(again.ok() && *again == *spec);
  Check(airlock::secrets::FormatSecretSpec(*again) == canonical);
  return 0;
}
