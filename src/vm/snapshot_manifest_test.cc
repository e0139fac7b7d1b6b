#include "src/vm/snapshot_manifest.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "src/common/file_util.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

SnapshotManifest Example(const std::string& dir) {
  EXPECT_TRUE(WriteFileAtomically(dir + "/memory.bin", std::string(100000, 'm'), 0600).ok());
  EXPECT_TRUE(WriteFileAtomically(dir + "/disk.ext4", std::string(5000, 'd'), 0600).ok());
  SnapshotManifest m;
  m.session_id = "abc";
  m.image_digest = "sha256:00";
  m.kernel_release = "6.1.192-airlock";
  m.qemu_version = "7.2.22";
  m.accelerator = "tcg";
  m.vcpus = 1;
  m.memory_bytes = 512 << 20;
  m.created_unix_ms = 1;
  for (const char* name : {"memory.bin", "disk.ext4"}) m.files.push_back(*DescribeFile(dir, name));
  return m;
}

TEST(SnapshotManifestTest, HostKeyIsCreatedOnceAndPrivate) {
  testing::TempDir dir;
  auto key = LoadOrCreateHostKey(dir.File("keys/snapshot.key"));
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->size(), kHostKeyBytes);
  struct stat st;
  ASSERT_EQ(stat(dir.File("keys/snapshot.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(*LoadOrCreateHostKey(dir.File("keys/snapshot.key")), *key);
  chmod(dir.File("keys/snapshot.key").c_str(), 0644);
  EXPECT_FALSE(LoadOrCreateHostKey(dir.File("keys/snapshot.key")).ok());
}

TEST(SnapshotManifestTest, SignedManifestVerifiesWithItsFiles) {
  testing::TempDir dir;
  std::string key(kHostKeyBytes, 'k');
  SnapshotManifest m = Example(dir.path());
  std::string text = SignManifest(m, key);
  absl::StatusOr<SnapshotManifest> back = VerifyManifest(text, key);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->files.size(), 2u);
  EXPECT_EQ(back->memory_bytes, 512u << 20);
  EXPECT_TRUE(VerifySnapshotFiles(dir.path(), *back).ok());
}

TEST(SnapshotManifestTest, TamperingIsRefused) {
  testing::TempDir dir;
  std::string key(kHostKeyBytes, 'k');
  SnapshotManifest m = Example(dir.path());
  std::string text = SignManifest(m, key);
  // Another host's key, an edited field, a forged file list: all refused by the HMAC.
  EXPECT_FALSE(VerifyManifest(text, std::string(kHostKeyBytes, 'x')).ok());
  std::string edited = text;
  edited.replace(edited.find("\"vcpus\": 1"), 10, "\"vcpus\": 8");
  absl::Status s = VerifyManifest(edited, key).status();
  EXPECT_NE(s.message().find("HMAC"), absl::string_view::npos) << s;
  EXPECT_FALSE(VerifyManifest("not json", key).ok());
  EXPECT_FALSE(VerifyManifest(std::string(kMaxManifestBytes + 1, ' '), key).ok());
  // A flipped byte or a truncated file in the snapshot directory.
  std::string memory = *ReadFileToString(dir.File("memory.bin"), 1 << 20);
  memory[500] ^= 1;
  ASSERT_TRUE(WriteFileAtomically(dir.File("memory.bin"), memory, 0600).ok());
  s = VerifySnapshotFiles(dir.path(), m);
  EXPECT_NE(s.message().find("does not match its hash"), absl::string_view::npos) << s;
  ASSERT_EQ(truncate(dir.File("disk.ext4").c_str(), 100), 0);
  m.files.erase(m.files.begin());
  s = VerifySnapshotFiles(dir.path(), m);
  EXPECT_NE(s.message().find("truncated"), absl::string_view::npos) << s;
}

// A file whose writers have ended is remembered when it is described, even brand new, and
// follows its directory's rename; a change to it still makes it read and refused.
TEST(SnapshotManifestTest, AFileDescribedOnceItsWritersEndedIsNotReadAgain) {
  testing::TempDir dir;
  std::string from = dir.File("apart"), to = dir.File("snapshot");
  ASSERT_EQ(mkdir(from.c_str(), 0700), 0);
  ASSERT_TRUE(WriteFileAtomically(from + "/memory", std::string(300000, 'm'), 0600).ok());
  absl::StatusOr<SnapshotFile> fresh = DescribeFile(from, "memory");
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  SnapshotManifest m;
  m.files = {*fresh};
  uint64_t before = SnapshotBytesHashed();
  ASSERT_TRUE(VerifySnapshotFiles(from, m).ok());
  EXPECT_EQ(SnapshotBytesHashed() - before, 300000u);  // new, described plainly: read again

  ASSERT_TRUE(DescribeFile(from, "memory", /*writers_ended=*/true).ok());
  before = SnapshotBytesHashed();
  ASSERT_TRUE(VerifySnapshotFiles(from, m).ok());
  EXPECT_EQ(SnapshotBytesHashed(), before);

  ASSERT_EQ(rename(from.c_str(), to.c_str()), 0);
  MoveVerifiedFiles(from, to);
  ASSERT_TRUE(VerifySnapshotFiles(to, m).ok());
  EXPECT_EQ(SnapshotBytesHashed(), before);

  int fd = open((to + "/memory").c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, "x", 1, 100), 1);
  close(fd);
  absl::Status changed = VerifySnapshotFiles(to, m);
  EXPECT_NE(changed.message().find("does not match its hash"), absl::string_view::npos) << changed;
}

// A file hashed while its writer still ran (a paused VM's RAM) is remembered once the writer
// has ended, if nothing changed it meanwhile (also across its directory's rename); one written
// after its hash is read again at the next verification.
TEST(SnapshotManifestTest, AFileHashedBeforeItsWriterEndedIsRememberedIfUnchangedSince) {
  testing::TempDir dir;
  struct statfs fs;
  ASSERT_EQ(statfs(dir.path().c_str(), &fs), 0);
  if (fs.f_type == TMPFS_MAGIC) GTEST_SKIP() << "tmpfs: a write through a mapping keeps its mtime";
  std::string from = dir.File("snapshot.tmp"), to = dir.File("snapshot");
  ASSERT_EQ(mkdir(from.c_str(), 0700), 0);
  ASSERT_TRUE(WriteFileAtomically(from + "/memory", std::string(300000, 'm'), 0600).ok());
  ASSERT_TRUE(WriteFileAtomically(from + "/disk", std::string(200000, 'd'), 0600).ok());
  absl::StatusOr<SnapshotFile> memory = DescribeFile(from, "memory");
  absl::StatusOr<SnapshotFile> disk = DescribeFile(from, "disk");
  ASSERT_TRUE(memory.ok() && disk.ok());
  SnapshotManifest m;
  m.files = {*memory, *disk};
  ASSERT_EQ(rename(from.c_str(), to.c_str()), 0);
  MoveVerifiedFiles(from, to);
  // The writer went on after the hash: what it wrote shows in the file's ctime.
  usleep(20000);
  int fd = open((to + "/disk").c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, "d", 1, 100), 1);  // the same byte: the hash still holds
  close(fd);
  WritersEnded(to);
  uint64_t before = SnapshotBytesHashed();
  ASSERT_TRUE(VerifySnapshotFiles(to, m).ok());
  EXPECT_EQ(SnapshotBytesHashed() - before, 200000u);  // the disk alone is read again
}

TEST(SnapshotManifestTest, FileNamesCannotLeaveTheSnapshotDirectory) {
  testing::TempDir dir;
  std::string key(kHostKeyBytes, 'k');
  SnapshotManifest m = Example(dir.path());
  m.files[0].name = "../../etc/passwd";
  EXPECT_FALSE(VerifyManifest(SignManifest(m, key), key).ok());
  EXPECT_FALSE(DescribeFile(dir.path(), "../x").ok());
}

}  // namespace
}  // namespace airlock
