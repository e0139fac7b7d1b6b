// One libFuzzer program for every target: each fuzz/NAME_fuzz.cc is compiled with its
// LLVMFuzzerTestOneInput renamed to AirlockFuzz_NAME (CMakeLists.txt), and this file picks the
// target by the name the program was started as (build-asan/NAME_fuzz, a link to airlock_fuzz),
// so the sanitized build links one fuzzer instead of one per target.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fuzz/fuzz_registry.h"

namespace {

airlock::fuzz::Target chosen = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  const char* program = (*argv)[0];
  if (const char* slash = std::strrchr(program, '/')) program = slash + 1;
  chosen = airlock::fuzz::FindTarget(program);
  if (chosen == nullptr) {
    std::fprintf(stderr,
                 "airlock_fuzz: %s names no fuzz target; run it as NAME_fuzz (a link "
                 "to this program) where NAME is one of:\n",
                 program);
    airlock::fuzz::ListTargets(stderr);
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return chosen(data, size);
}
