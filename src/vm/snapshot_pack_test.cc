#include "src/vm/snapshot_pack.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <string>

#include "src/common/hex.h"
#include "src/common/unique_fd.h"
#include "src/testing/test_util.h"
#include "src/vm/snapshot_manifest.h"

namespace airlock {
namespace {

// A sparse file: data at the start, a hole of several MiB, data, and a hole at the end.
UniqueFd SparseFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  EXPECT_TRUE(fd.valid());
  std::string head(8192, 'h'), tail(4096, 't');
  EXPECT_EQ(pwrite(fd.get(), head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  EXPECT_EQ(pwrite(fd.get(), tail.data(), tail.size(), 8 << 20), static_cast<ssize_t>(tail.size()));
  EXPECT_EQ(ftruncate(fd.get(), 16 << 20), 0);
  return fd;
}

std::string Packed(int fd, const PackLayout& layout, const std::string& path) {
  UniqueFd out(open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  EXPECT_TRUE(WritePack(fd, layout, out.get()).ok());
  std::string bytes(layout.packed_bytes + 1, '\0');
  EXPECT_EQ(pread(out.get(), bytes.data(), bytes.size(), 0),
            static_cast<ssize_t>(layout.packed_bytes));
  bytes.resize(layout.packed_bytes);
  return bytes;
}

std::string ReadWhole(int fd) {
  std::string bytes;
  char buf[65536];
  for (off_t at = 0;;) {
    ssize_t n = pread(fd, buf, sizeof(buf), at);
    if (n <= 0) return bytes;
    bytes.append(buf, static_cast<size_t>(n));
    at += n;
  }
}

TEST(SnapshotPackTest, APackedFileHashesToItsManifestDigestAndUnpacksSparse) {
  testing::TempDir dir;
  UniqueFd file = SparseFile(dir.File("disk"));
  absl::StatusOr<PackLayout> layout = MeasurePack(file.get());
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->size, 16u << 20);
  EXPECT_LT(layout->packed_bytes, 1u << 20);  // the holes do not travel
  std::string packed = Packed(file.get(), *layout, dir.File("packed"));
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(packed.data()), packed.size(), md);
  EXPECT_EQ(HexString(md, sizeof(md)), *SparseSha256(file.get()));

  UniqueFd copy(open(dir.File("copy").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  Unpacker unpacker(copy.get(), 16 << 20);
  // In odd pieces, so that headers and regions are split across calls.
  for (size_t at = 0; at < packed.size(); at += 7001) {
    ASSERT_TRUE(unpacker.Feed(absl::string_view(packed).substr(at, 7001)).ok());
  }
  ASSERT_TRUE(unpacker.Finish().ok());
  EXPECT_EQ(ReadWhole(copy.get()), ReadWhole(file.get()));
  EXPECT_EQ(*SparseSha256(copy.get()), *SparseSha256(file.get()));
  struct stat st;
  ASSERT_EQ(fstat(copy.get(), &st), 0);
  EXPECT_LT(st.st_blocks * 512, 1 << 20);  // still sparse
}

TEST(SnapshotPackTest, MalformedStreamsAreRefusedAndNothingIsWrittenPastTheCap) {
  testing::TempDir dir;
  UniqueFd file = SparseFile(dir.File("disk"));
  std::string packed = Packed(file.get(), *MeasurePack(file.get()), dir.File("packed"));
  auto unpack = [&](const std::string& bytes, uint64_t cap) {
    UniqueFd out(open(dir.File("out").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    Unpacker unpacker(out.get(), cap);
    absl::Status st = unpacker.Feed(bytes);
    if (st.ok()) st = unpacker.Finish();
    struct stat s;
    fstat(out.get(), &s);
    EXPECT_LE(static_cast<uint64_t>(s.st_size), std::max<uint64_t>(cap, 0));
    return st;
  };
  EXPECT_TRUE(unpack(packed, 16 << 20).ok());
  EXPECT_TRUE(absl::IsDataLoss(unpack(packed, (16 << 20) - 1)));            // its size over the cap
  EXPECT_TRUE(absl::IsDataLoss(unpack(packed, (8 << 20) + 100)));           // a region past it
  EXPECT_TRUE(absl::IsDataLoss(unpack(packed.substr(0, 5000), 16 << 20)));  // inside a region
  EXPECT_TRUE(absl::IsDataLoss(unpack(packed.substr(0, packed.size() - 3), 16 << 20)));
  EXPECT_TRUE(absl::IsDataLoss(unpack(packed + "x", 16 << 20)));  // bytes after the size
  EXPECT_TRUE(absl::IsDataLoss(unpack("", 16 << 20)));
  // The second region moved before the end of the first.
  std::string overlapping = packed;
  size_t second = 16 + 8192;
  overlapping[second] = 0x10;
  for (int i = 1; i < 8; ++i) overlapping[second + i] = 0;
  EXPECT_TRUE(absl::IsDataLoss(unpack(overlapping, 16 << 20)));
}

}  // namespace
}  // namespace airlock
