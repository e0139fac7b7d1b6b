// Fuzz target: the packed form of a snapshot file as a blob store hands it back (untrusted until
// its digest is checked, which happens only after it was all unpacked). Besides not crashing:
// whatever is accepted ends up a file within the size allowed.
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "src/vm/snapshot_pack.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr uint64_t kCap = 1 << 20;
  FILE* tmp = tmpfile();
  if (tmp == nullptr) return 0;
  airlock::Unpacker unpacker(fileno(tmp), kCap);
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  // In two pieces, so that a header or a region may be split.
  size_t half = size / 2;
  absl::Status st = unpacker.Feed(bytes.substr(0, half));
  if (st.ok()) st = unpacker.Feed(bytes.substr(half));
  if (st.ok()) st = unpacker.Finish();
  struct stat s;
  if (fstat(fileno(tmp), &s) == 0 && static_cast<uint64_t>(s.st_size) > kCap) __builtin_trap();
  if (st.ok() && static_cast<uint64_t>(s.st_size) != unpacker.size()) __builtin_trap();
  fclose(tmp);
  return 0;
}
