#include "src/image/ext4_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "src/image/ext4_reader.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

using testing::Debugfs;
using testing::Fsck;
using testing::TempDir;

Ext4Writer::Reader StringReader(const std::string& data) {
  auto offset = std::make_shared<size_t>(0);
  return [data, offset](char* buf, size_t cap) -> absl::StatusOr<size_t> {
    size_t n = std::min(cap, data.size() - *offset);
    memcpy(buf, data.data() + *offset, n);
    *offset += n;
    return n;
  };
}

TEST(Ext4WriterTest, WritesEveryKindOfEntryAndPassesFsck) {
  TempDir dir;
  std::string image = dir.File("fs.ext4");
  auto writer = Ext4Writer::Create(image, {.size_bytes = 64 << 20});
  ASSERT_TRUE(writer.ok()) << writer.status();
  Ext4Writer& w = **writer;
  ASSERT_TRUE(w.AddDirectory("etc", {.mode = 0755}).ok());
  ASSERT_TRUE(
      w.AddFile("etc/hello", {.mode = 0640, .uid = 1000, .gid = 100}, 6, StringReader("hello\n"))
          .ok());
  std::string big(5 << 20, 'x');
  big.replace(1 << 20, 1 << 20, std::string(1 << 20, '\0'));  // a hole in the middle
  ASSERT_TRUE(w.AddFile("big", {.mode = 0644}, big.size(), StringReader(big)).ok());
  ASSERT_TRUE(w.AddSymlink("etc/link", "/outside/of/the/image", {}).ok());
  ASSERT_TRUE(w.AddSymlink("longlink", std::string(100, 'l'), {}).ok());
  ASSERT_TRUE(w.AddHardLink("etc/hello2", "etc/hello").ok());
  ASSERT_TRUE(w.AddSpecial("null", S_IFCHR, {.mode = 0666}, 1, 3).ok());
  ASSERT_TRUE(w.SetXattr("etc/hello", "security.capability", std::string(20, '\1')).ok());
  // Many entries force directory blocks to grow.
  ASSERT_TRUE(w.AddDirectory("many", {.mode = 0755}).ok());
  for (int i = 0; i < 600; ++i) {
    ASSERT_TRUE(w.AddFile("many/file-with-a-long-name-" + std::to_string(i), {.mode = 0644}, 1,
                          StringReader("x"))
                    .ok());
  }
  // Later entries replace earlier ones; removal frees whole trees.
  ASSERT_TRUE(w.AddFile("etc/hello2", {.mode = 0600}, 3, StringReader("new")).ok());
  ASSERT_TRUE(w.Remove("many").ok());
  EXPECT_FALSE(w.AddFile("nodir/x", {}, 0, StringReader("")).ok());
  EXPECT_FALSE(w.AddFile("etc/hello/x", {}, 0, StringReader("")).ok());
  ASSERT_TRUE(w.Finish().ok());

  std::string fsck;
  EXPECT_EQ(Fsck(image, &fsck), 0) << fsck;
  EXPECT_EQ(Debugfs(image, "cat /etc/hello"), "hello\n");
  EXPECT_EQ(Debugfs(image, "cat /etc/hello2"), "new");
  EXPECT_NE(Debugfs(image, "stat /etc/link").find("/outside/of/the/image"), std::string::npos);
  EXPECT_NE(Debugfs(image, "stat /etc/hello").find("User:  1000"), std::string::npos);
  EXPECT_NE(Debugfs(image, "stat /null").find("Device major/minor number: 01:03"),
            std::string::npos);
  EXPECT_NE(Debugfs(image, "ea_list /etc/hello").find("security.capability"), std::string::npos);
  EXPECT_NE(Debugfs(image, "ls /").find("lost+found"), std::string::npos);
  EXPECT_EQ(Debugfs(image, "ls /").find("many"), std::string::npos);
}

TEST(Ext4WriterTest, AFileIsReadBackWithoutMountingTheImage) {
  TempDir dir;
  std::string image = dir.File("fs.ext4");
  auto writer = Ext4Writer::Create(image, {.size_bytes = 64 << 20});
  ASSERT_TRUE(writer.ok()) << writer.status();
  Ext4Writer& w = **writer;
  for (const char* d : {"var", "var/lib", "var/lib/dpkg", "etc"}) {
    ASSERT_TRUE(w.AddDirectory(d, {.mode = 0755}).ok());
  }
  std::string status = "Package: jq\nStatus: install ok installed\nVersion: 1.6\n";
  ASSERT_TRUE(
      w.AddFile("var/lib/dpkg/status", {.mode = 0644}, status.size(), StringReader(status)).ok());
  std::string big(3 << 20, 'b');
  ASSERT_TRUE(w.AddFile("big", {.mode = 0644}, big.size(), StringReader(big)).ok());
  // A link is followed inside the image, never on the host.
  ASSERT_TRUE(w.AddSymlink("etc/status", "/var/lib/dpkg/status", {}).ok());
  ASSERT_TRUE(w.AddSymlink("etc/passwd", "/etc/passwd-of-the-host", {}).ok());
  ASSERT_TRUE(w.Finish().ok());

  EXPECT_EQ(*ReadFileFromExt4(image, "/var/lib/dpkg/status", 1 << 20), status);
  EXPECT_EQ(*ReadFileFromExt4(image, "/etc/status", 1 << 20), status);
  EXPECT_EQ(*ReadFileFromExt4(image, "/big", 4 << 20), big);
  EXPECT_EQ(ReadFileFromExt4(image, "/big", 1 << 20).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadFileFromExt4(image, "/nothing", 1 << 20).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadFileFromExt4(image, "/etc/passwd", 1 << 20).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadFileFromExt4(image, "/var/lib", 1 << 20).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(ReadFileFromExt4(dir.File("none.ext4"), "/big", 1 << 20).ok());
}

TEST(Ext4WriterTest, FullFilesystemIsAClearError) {
  TempDir dir;
  auto writer = Ext4Writer::Create(dir.File("small.ext4"), {.size_bytes = 8 << 20});
  ASSERT_TRUE(writer.ok());
  std::string big(16 << 20, 'x');
  absl::Status s = (*writer)->AddFile("big", {.mode = 0644}, big.size(), StringReader(big));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("full"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace airlock
