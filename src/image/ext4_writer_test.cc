#include "src/image/ext4_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>

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

namespace airlock {
namespace {

TEST(Ext4ReaderTest, AWalkGivesEveryEntryAndACopyIsTheSameTree) {
  testing::TempDir dir;
  std::string image = dir.File("src.ext4");
  {
    auto writer = Ext4Writer::Create(image, {.size_bytes = 64 << 20});
    ASSERT_TRUE(writer.ok()) << writer.status();
    Ext4Writer& w = **writer;
    ASSERT_TRUE(w.AddDirectory("", {.mode = 0755}).ok());
    ASSERT_TRUE(w.AddDirectory("etc", {.mode = 0750, .uid = 5, .gid = 6, .mtime = 1000}).ok());
    ASSERT_TRUE(
        w.AddFile("etc/hello", {.mode = 0640, .uid = 1000}, 6, StringReader("hello\n")).ok());
    ASSERT_TRUE(w.AddHardLink("etc/hello2", "etc/hello").ok());
    ASSERT_TRUE(w.AddSymlink("short", "etc/hello", {}).ok());
    ASSERT_TRUE(w.AddSymlink("long", std::string(200, 'l'), {}).ok());
    ASSERT_TRUE(w.AddSpecial("null", S_IFCHR, {.mode = 0666}, 1, 3).ok());
    ASSERT_TRUE(w.AddSpecial("big-minor", S_IFBLK, {.mode = 0600}, 259, 70000).ok());
    ASSERT_TRUE(w.SetXattr("etc/hello", "security.capability", std::string(20, '\1')).ok());
    std::string big(3 << 20, 'b');
    ASSERT_TRUE(w.AddFile("big", {.mode = 0644}, big.size(), StringReader(big)).ok());
    ASSERT_TRUE(w.Finish().ok());
  }
  std::map<std::string, Ext4Entry> seen;
  std::string hello;
  absl::Status walked = WalkExt4(image, "/", [&](const Ext4Entry& e, const Ext4Writer::Reader& r) {
    seen[e.path] = e;
    if (e.path == "etc/hello") {
      char buf[64];
      absl::StatusOr<size_t> n = r(buf, sizeof(buf));
      if (n.ok()) hello.assign(buf, *n);
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(walked.ok()) << walked;
  EXPECT_EQ(seen.count("lost+found"), 0u);
  EXPECT_EQ(seen.at("").type, static_cast<uint32_t>(S_IFDIR));
  EXPECT_EQ(seen.at("etc").meta.mode, 0750u);
  EXPECT_EQ(seen.at("etc").meta.uid, 5u);
  EXPECT_EQ(seen.at("etc").meta.mtime, 1000);
  EXPECT_EQ(hello, "hello\n");
  EXPECT_EQ(seen.at("etc/hello").size, 6u);
  EXPECT_EQ(seen.at("etc/hello").xattrs.size(), 1u);
  EXPECT_EQ(seen.at("etc/hello2").hard_link_to, "etc/hello");
  EXPECT_EQ(seen.at("short").symlink_target, "etc/hello");
  EXPECT_EQ(seen.at("long").symlink_target, std::string(200, 'l'));
  EXPECT_EQ(seen.at("null").rdev_major, 1u);
  EXPECT_EQ(seen.at("null").rdev_minor, 3u);
  EXPECT_EQ(seen.at("big-minor").rdev_major, 259u);
  EXPECT_EQ(seen.at("big-minor").rdev_minor, 70000u);

  size_t below_etc = 0;
  ASSERT_TRUE(WalkExt4(image, "/etc", [&](const Ext4Entry&, const Ext4Writer::Reader&) {
                ++below_etc;
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(below_etc, 3u);
  EXPECT_EQ(WalkExt4(image, "/nothing",
                     [](const Ext4Entry&, const Ext4Writer::Reader&) { return absl::OkStatus(); })
                .code(),
            absl::StatusCode::kNotFound);

  absl::StatusOr<Ext4Usage> usage = MeasureExt4(image);
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->entries, seen.size());
  std::string copy = dir.File("copy.ext4");
  {
    auto writer = Ext4Writer::Create(copy, {.size_bytes = 64 << 20});
    ASSERT_TRUE(writer.ok());
    absl::Status copied = CopyExt4(image, writer->get());
    ASSERT_TRUE(copied.ok()) << copied;
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  std::string fsck;
  EXPECT_EQ(testing::Fsck(copy, &fsck), 0) << fsck;
  std::map<std::string, Ext4Entry> copied;
  ASSERT_TRUE(WalkExt4(copy, "/", [&](const Ext4Entry& e, const Ext4Writer::Reader&) {
                copied[e.path] = e;
                return absl::OkStatus();
              }).ok());
  ASSERT_EQ(copied.size(), seen.size());
  for (const auto& [path, e] : seen) {
    const Ext4Entry& c = copied.at(path);
    EXPECT_EQ(c.type, e.type) << path;
    EXPECT_EQ(c.meta.mode, e.meta.mode) << path;
    EXPECT_EQ(c.meta.uid, e.meta.uid) << path;
    EXPECT_EQ(c.size, e.size) << path;
    EXPECT_EQ(c.symlink_target, e.symlink_target) << path;
    EXPECT_EQ(c.hard_link_to, e.hard_link_to) << path;
    EXPECT_EQ(c.xattrs, e.xattrs) << path;
  }
  EXPECT_EQ(*ReadFileFromExt4(copy, "/big", 4 << 20), std::string(3 << 20, 'b'));
}

}  // namespace
}  // namespace airlock
