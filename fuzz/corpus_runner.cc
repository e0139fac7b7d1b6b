// Runs a fuzz target over every file of its seed corpus, so the corpus is an ordinary test in
// every build (libFuzzer builds explore beyond it; see scripts/test.sh).
// Usage: airlock_fuzz_corpus TARGET DIR...
#include <dirent.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "fuzz/fuzz_registry.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TARGET CORPUS_DIR...\n", argv[0]);
    return 2;
  }
  airlock::fuzz::Target target = airlock::fuzz::FindTarget(argv[1]);
  if (target == nullptr) {
    std::fprintf(stderr, "corpus_runner: no fuzz target %s; the targets are:\n", argv[1]);
    airlock::fuzz::ListTargets(stderr);
    return 2;
  }
  int ran = 0;
  for (int i = 2; i < argc; ++i) {
    DIR* dir = opendir(argv[i]);
    if (dir == nullptr) {
      std::fprintf(stderr, "corpus_runner: cannot open %s\n", argv[i]);
      return 1;
    }
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      std::string path = std::string(argv[i]) + "/" + e->d_name;
      std::ifstream in(path, std::ios::binary);
      std::stringstream content;
      content << in.rdbuf();
      std::string bytes = content.str();
      target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++ran;
    }
    closedir(dir);
  }
  if (ran == 0) {
    std::fprintf(stderr, "corpus_runner: no corpus files ran\n");
    return 1;
  }
  std::printf("corpus_runner: %d inputs ran\n", ran);
  return 0;
}
