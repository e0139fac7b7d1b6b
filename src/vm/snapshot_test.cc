#include "src/vm/snapshot.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/common/file_util.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

// A sparse file: 64 MiB with data at its start, middle and end.
UniqueFd SparseFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(ftruncate(fd.get(), 64 << 20), 0);
  for (off_t at : {off_t{0}, off_t{32 << 20}, off_t{(64 << 20) - 4096}}) {
    std::string block(4096, static_cast<char>('a' + at % 26));
    EXPECT_EQ(pwrite(fd.get(), block.data(), block.size(), at), 4096);
  }
  return fd;
}

TEST(SnapshotTest, CopyDiskKeepsContentAndHoles) {
  testing::TempDir dir;
  UniqueFd from = SparseFile(dir.File("from"));
  UniqueFd to(open(dir.File("to").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
  ASSERT_TRUE(CopyDisk(from.get(), to.get()).ok());
  EXPECT_EQ(*ReadFileToString(dir.File("to"), 128 << 20),
            *ReadFileToString(dir.File("from"), 128 << 20));
  struct stat st;
  ASSERT_EQ(fstat(to.get(), &st), 0);
  EXPECT_EQ(st.st_size, 64 << 20);
  EXPECT_LT(st.st_blocks * 512, 1 << 20) << "the copy is not sparse";
  EXPECT_EQ(*SparseSha256(from.get()), *SparseSha256(to.get()));
}

TEST(SnapshotTest, SparseDigestSeesEveryByteAndTheSize) {
  testing::TempDir dir;
  UniqueFd fd = SparseFile(dir.File("disk"));
  std::string before = *SparseSha256(fd.get());
  EXPECT_EQ(pwrite(fd.get(), "x", 1, (32 << 20) + 100), 1);
  std::string flipped = *SparseSha256(fd.get());
  EXPECT_NE(before, flipped);
  EXPECT_EQ(ftruncate(fd.get(), (64 << 20) + 4096), 0);
  EXPECT_NE(*SparseSha256(fd.get()), flipped);
}

TEST(SnapshotTest, OpenSnapshotRefusesAChangedOrMissingFile) {
  testing::TempDir dir;
  std::string snap = dir.File("snap");
  ASSERT_EQ(mkdir(snap.c_str(), 0700), 0);
  ASSERT_TRUE(
      WriteFileAtomically(snap + "/" + kSnapshotStateFile, std::string(50000, 's'), 0600).ok());
  SparseFile(snap + "/" + kSnapshotDiskFile);
  std::string key(kHostKeyBytes, 'k');
  SnapshotManifest m;
  m.session_id = "abc";
  m.image_digest = "sha256:00";
  m.accelerator = "tcg";
  for (const char* name : {kSnapshotStateFile, kSnapshotDiskFile}) {
    m.files.push_back(*DescribeFile(snap, name));
  }
  ASSERT_TRUE(
      WriteFileAtomically(snap + "/" + kSnapshotManifestFile, SignManifest(m, key), 0600).ok());
  ASSERT_TRUE(OpenSnapshot(snap, key).ok());

  // What was checked is what gets loaded: a file put in place of the state after the check is
  // not what the descriptors read.
  SnapshotFiles files;
  ASSERT_TRUE(OpenSnapshot(snap, key, &files).ok());
  ASSERT_TRUE(
      WriteFileAtomically(snap + "/" + kSnapshotStateFile + ".swap", std::string(50000, 'X'), 0600)
          .ok());
  ASSERT_EQ(rename((snap + "/" + kSnapshotStateFile + ".swap").c_str(),
                   (snap + "/" + kSnapshotStateFile).c_str()),
            0);
  absl::StatusOr<UniqueFd> state = ReopenFile(files.state.get(), false);
  ASSERT_TRUE(state.ok());
  char c = 0;
  ASSERT_EQ(read(state->get(), &c, 1), 1);
  EXPECT_EQ(c, 's');
  EXPECT_FALSE(OpenSnapshot(snap, key).ok());  // and the swapped one is refused

  ASSERT_TRUE(
      WriteFileAtomically(snap + "/" + kSnapshotStateFile, std::string(50000, 's'), 0600).ok());
  ASSERT_TRUE(OpenSnapshot(snap, key).ok());
  {
    UniqueFd state(open((snap + "/" + kSnapshotStateFile).c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_EQ(pwrite(state.get(), "S", 1, 1234), 1);
  }
  absl::StatusOr<SnapshotManifest> refused = OpenSnapshot(snap, key);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(refused.status().message().find("state does not match"), std::string::npos)
      << refused.status();

  ASSERT_EQ(unlink((snap + "/" + kSnapshotDiskFile).c_str()), 0);
  EXPECT_FALSE(OpenSnapshot(snap, key).ok());
  EXPECT_FALSE(OpenSnapshot(dir.File("none"), key).ok());
}

}  // namespace
}  // namespace airlock
