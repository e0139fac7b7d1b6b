// The fuzz targets by name, from the one list in CMakeLists.txt (AIRLOCK_FUZZERS), for the two
// programs that run them: airlock_fuzz (libFuzzer) and airlock_fuzz_corpus (each seed corpus as
// a test).
#ifndef AIRLOCK_FUZZ_FUZZ_REGISTRY_H_
#define AIRLOCK_FUZZ_FUZZ_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string_view>

namespace airlock::fuzz {

using Target = int (*)(const uint8_t* data, size_t size);

// The target called NAME (as in fuzz/NAME_fuzz.cc, "NAME_fuzz" also accepted), or null.
Target FindTarget(std::string_view name);

// Writes every target's name, one a line.
void ListTargets(FILE* out);

}  // namespace airlock::fuzz

#endif  // AIRLOCK_FUZZ_FUZZ_REGISTRY_H_
