#include "src/vm/snapshot.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
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
  ASSERT_TRUE(OpenSnapshot(snap, key, &files, SnapshotUse::kTemplate).ok());
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

// A snapshot directory of a state, a disk and a memory file of 64 MiB whose data (at three
// places) starts with `seed` (each test its own, since loaded memories are kept by digest).
std::string SnapshotWithMemory(testing::TempDir& dir, const std::string& name,
                               const std::string& seed, const std::string& key) {
  std::string snap = dir.File(name);
  EXPECT_EQ(mkdir(snap.c_str(), 0700), 0);
  EXPECT_TRUE(
      WriteFileAtomically(snap + "/" + kSnapshotStateFile, std::string(5000, 's'), 0600).ok());
  SparseFile(snap + "/" + kSnapshotDiskFile);
  UniqueFd memory = SparseFile(snap + "/" + kSnapshotMemoryFile);
  EXPECT_EQ(pwrite(memory.get(), seed.data(), seed.size(), 0), static_cast<ssize_t>(seed.size()));
  SnapshotManifest m;
  m.session_id = "template";
  m.image_digest = "sha256:00";
  m.accelerator = "tcg";
  for (const char* file : {kSnapshotStateFile, kSnapshotDiskFile, kSnapshotMemoryFile}) {
    m.files.push_back(*DescribeFile(snap, file));
  }
  EXPECT_TRUE(
      WriteFileAtomically(snap + "/" + kSnapshotManifestFile, SignManifest(m, key), 0600).ok());
  return snap;
}

TEST(SnapshotTest, AMemoryFileIsLoadedIntoASealedMemfdAndCheckedThere) {
  testing::TempDir dir;
  std::string key(kHostKeyBytes, 'k');
  std::string seed = "memory " + std::to_string(getpid()) + " " + std::to_string(time(nullptr));
  std::string snap = SnapshotWithMemory(dir, "snap", seed, key);
  SnapshotFiles files;
  ASSERT_TRUE(OpenSnapshot(snap, key, &files, SnapshotUse::kTemplate).ok());
  ASSERT_NE(files.memory, nullptr);
  int memfd = files.memory->get();
  EXPECT_EQ(*ReadFileToString("/proc/self/fd/" + std::to_string(memfd), 128 << 20),
            *ReadFileToString(snap + "/" + kSnapshotMemoryFile, 128 << 20));
  // Sealed: nobody changes what was checked, nor its size.
  EXPECT_EQ(pwrite(memfd, "x", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(memfd, 4096), 0);
  UniqueFd reopened(open(("/proc/self/fd/" + std::to_string(memfd)).c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(reopened.valid());  // as QEMU opens it, and still
  EXPECT_EQ(pwrite(reopened.get(), "x", 1, 0), -1);
  // Another restore of the same snapshot shares the memfd: it is loaded once.
  SnapshotFiles again;
  ASSERT_TRUE(OpenSnapshot(snap, key, &again, SnapshotUse::kTemplate).ok());
  EXPECT_EQ(again.memory.get(), files.memory.get());
  // A session's snapshot, restored once, gets a memfd of its own: nothing is kept for it.
  SnapshotFiles once;
  ASSERT_TRUE(OpenSnapshot(snap, key, &once).ok());
  EXPECT_NE(once.memory.get(), files.memory.get());
  EXPECT_EQ(*ReadFileToString("/proc/self/fd/" + std::to_string(once.memory->get()), 128 << 20),
            *ReadFileToString(snap + "/" + kSnapshotMemoryFile, 128 << 20));
  // Without `files` the memory file is hashed like any other.
  EXPECT_TRUE(OpenSnapshot(snap, key).ok());
  // Every page of the memfd is allocated when it is loaded (its holes too), so a VM reading
  // holes through its private mapping allocates nothing more: no page is charged to a VM's
  // host cgroup besides the ones it writes.
  struct stat st;
  ASSERT_EQ(fstat(memfd, &st), 0);
  EXPECT_EQ(st.st_blocks * 512, st.st_size);
  void* map = mmap(nullptr, 64 << 20, PROT_READ, MAP_PRIVATE, memfd, 0);
  ASSERT_NE(map, MAP_FAILED);
  // Each page read through a volatile pointer, so that the reads are not optimized away.
  const volatile char* pages = static_cast<const char*>(map);
  for (size_t at = 0; at < (64u << 20); at += 4096) (void)pages[at];
  munmap(map, 64 << 20);
  ASSERT_EQ(fstat(memfd, &st), 0);
  EXPECT_EQ(st.st_blocks * 512, st.st_size);
  SnapshotFiles later;
  ASSERT_TRUE(OpenSnapshot(snap, key, &later, SnapshotUse::kTemplate).ok());
  EXPECT_EQ(later.memory.get(), files.memory.get());

  // A memory file changed after the manifest was signed is refused, and so is a short one.
  std::string changed = SnapshotWithMemory(dir, "changed", seed + " changed", key);
  {
    UniqueFd memory(open((changed + "/" + kSnapshotMemoryFile).c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_EQ(pwrite(memory.get(), "M", 1, 32 << 20), 1);
  }
  SnapshotFiles refused;
  absl::StatusOr<SnapshotManifest> opened = OpenSnapshot(changed, key, &refused);
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(opened.status().message().find("memory does not match its hash"), std::string::npos)
      << opened.status();
  EXPECT_EQ(truncate((changed + "/" + kSnapshotMemoryFile).c_str(), 4096), 0);
  opened = OpenSnapshot(changed, key, &refused);
  EXPECT_NE(opened.status().message().find("(truncated?)"), std::string::npos) << opened.status();
}

}  // namespace
}  // namespace airlock
