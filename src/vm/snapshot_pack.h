// The packed form of a snapshot file, as it travels through a blob store: for each data region
// of the (sparse) file its offset and length, as little-endian u64s, then its bytes; after the
// last region the file's size (u64). These are exactly the bytes SparseSha256 hashes, so a packed
// file's sha256 is the digest the snapshot's manifest names for it: blobs are stored under the
// manifest's own digests, snapshots that share a file (forks, templates) share its blob, and a
// 1 GiB disk with 30 MiB of data travels as 30 MiB.
//
// Unpacking reads untrusted bytes (a blob store is untrusted storage, and a blob's digest is only
// checked once all of it has been read): regions must come in order without overlapping, and
// nothing is written past the size the caller allows (fuzz/snapshot_pack_fuzz.cc).
#ifndef AIRLOCK_VM_SNAPSHOT_PACK_H_
#define AIRLOCK_VM_SNAPSHOT_PACK_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock {

// Where a file's data lies, as SparseSha256 sees it.
struct PackLayout {
  std::vector<std::pair<uint64_t, uint64_t>> regions;  // (offset, length), ascending
  uint64_t size = 0;                                   // the file's size
  uint64_t packed_bytes = 0;                           // the packed form's length
};

[[nodiscard]] absl::StatusOr<PackLayout> MeasurePack(int fd);

// Writes fd's packed form to out (a pipe or a file) as layout found it; DataLoss if the file
// changed meanwhile (a region no longer readable whole).
[[nodiscard]] absl::Status WritePack(int fd, const PackLayout& layout, int out);

// Turns a packed stream back into a sparse file, fed in pieces of any size. The output file
// should be empty: only the regions are written, and Finish sets its size.
class Unpacker {
 public:
  // out: the file written (pwrite); max_size: the size the file may have at most.
  Unpacker(int out, uint64_t max_size) : out_(out), max_size_(max_size) {}

  // The next bytes of the stream; after an error every later call answers the same error.
  [[nodiscard]] absl::Status Feed(absl::string_view bytes);
  // The stream ended: checks that it ended after a whole size field, and sets the file's size.
  [[nodiscard]] absl::Status Finish();

  uint64_t size() const { return size_; }

 private:
  absl::Status Fail(std::string why);

  const int out_;
  const uint64_t max_size_;
  absl::Status status_;
  // What is being read: a header (8 bytes that are an offset, or the size if the stream ends
  // after them, then 8 of length) or a region's bytes.
  std::string header_;
  uint64_t region_at_ = 0;    // where the region's next byte goes
  uint64_t region_left_ = 0;  // its bytes still to come; 0: reading a header
  uint64_t end_ = 0;          // where the last region ended
  uint64_t size_ = 0;
};

// Reads a whole packed stream from in (until EOF) into out through an Unpacker. On an error it
// goes on reading to EOF, so that the writer at the other end of a pipe is never left blocked.
[[nodiscard]] absl::Status UnpackStream(int in, int out, uint64_t max_size);

}  // namespace airlock

#endif  // AIRLOCK_VM_SNAPSHOT_PACK_H_
