#include "fuzz/fuzz_registry.h"

// fuzz_targets.inc is written by CMake from AIRLOCK_FUZZERS: one AIRLOCK_FUZZER(NAME) a line.
#define AIRLOCK_FUZZER(name) extern "C" int AirlockFuzz_##name(const uint8_t*, size_t);
#include "fuzz_targets.inc"
#undef AIRLOCK_FUZZER

namespace airlock::fuzz {
namespace {

struct Entry {
  std::string_view name;
  Target target;
};

constexpr Entry kTargets[] = {
#define AIRLOCK_FUZZER(name) {#name, AirlockFuzz_##name},
#include "fuzz_targets.inc"
#undef AIRLOCK_FUZZER
};

}  // namespace

Target FindTarget(std::string_view name) {
  if (name.ends_with("_fuzz")) name.remove_suffix(5);
  for (const Entry& e : kTargets) {
    if (e.name == name) return e.target;
  }
  return nullptr;
}

void ListTargets(FILE* out) {
  for (const Entry& e : kTargets) std::fprintf(out, "  %.*s\n", int(e.name.size()), e.name.data());
}

}  // namespace airlock::fuzz
