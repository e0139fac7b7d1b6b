// Fuzz target: a client's Dockerfile and .dockerignore. Whatever the bytes, the reader ends
// (linear time), every stage it returns has a base, every instruction a line inside the file,
// and expanding each word either succeeds within its cap or says why. The first byte picks
// what is fed: even, a Dockerfile (also expanded); odd, a .dockerignore matched against paths
// cut from the rest.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_split.h"
#include "src/image/docker_ignore.h"
#include "src/image/dockerfile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    absl::StatusOr<airlock::Dockerfile> file = airlock::ParseDockerfile(text);
    if (!file.ok()) return 0;
    size_t lines = 1;
    for (char c : text) lines += c == '\n';
    std::map<std::string, std::string> vars = {{"A", "a"}, {"EMPTY", ""}};
    for (const airlock::DockerStage& stage : file->stages) {
      if (stage.base.empty() || stage.line == 0 || stage.line > lines) __builtin_trap();
      for (const airlock::DockerInstruction& ins : stage.instructions) {
        if (ins.line == 0 || ins.line > lines) __builtin_trap();
        for (const std::string& w : ins.words) {
          absl::StatusOr<std::string> out = airlock::ExpandWord(w, vars, file->escape);
          if (out.ok() && out->size() > (1 << 20)) __builtin_trap();
        }
        absl::StatusOr<std::vector<std::string>> words =
            airlock::ExpandWords(ins.rest, vars, file->escape);
        (void)words;
      }
    }
    return 0;
  }
  std::vector<std::string> parts = absl::StrSplit(text, absl::MaxSplits('\0', 1));
  absl::StatusOr<airlock::DockerIgnore> ignore = airlock::DockerIgnore::Parse(parts[0]);
  if (!ignore.ok() || parts.size() < 2) return 0;
  for (absl::string_view path : absl::StrSplit(parts[1], '\n')) {
    (void)ignore->Excluded(airlock::CleanSlashPath(path));
  }
  return 0;
}
