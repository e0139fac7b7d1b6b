#include "src/image/tar_to_ext4.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

#include "src/common/file_util.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

using testing::Debugfs;
using testing::Fsck;
using testing::TarEntry;
using testing::TempDir;
using testing::WriteTar;

TEST(TarToExt4Test, ConvertsARootfsWithoutTouchingTheHost) {
  TempDir dir;
  std::string tar = dir.File("rootfs.tar.gz");
  WriteTar(tar,
           {{.name = "./", .type = S_IFDIR, .mode = 0755},
            {.name = "./usr/bin/tool", .data = "#!/bin/sh\n", .mode = 0755},  // parents implied
            {.name = "/etc/abs", .data = "absolute"},                         // confined
            {.name = "./etc/escape", .type = S_IFLNK, .data = "../../../../etc/shadow"},
            {.name = "./etc/tool2", .data = "./usr/bin/tool", .hardlink = true},
            {.name = "./dev/null", .type = S_IFCHR, .mode = 0666},
            {.name = "./bin/ping", .data = "elf", .xattrs = {{"security.capability", "caps"}}}},
           testing::Compression::kGzip);
  std::string image = dir.File("image.ext4");
  ASSERT_TRUE(ConvertRootfsTar(tar, image).ok());
  std::string fsck;
  EXPECT_EQ(Fsck(image, &fsck), 0) << fsck;
  EXPECT_EQ(Debugfs(image, "cat /etc/abs"), "absolute");
  EXPECT_EQ(Debugfs(image, "cat /etc/tool2"), "#!/bin/sh\n");
  EXPECT_NE(Debugfs(image, "stat /etc/escape").find("../../../../etc/shadow"), std::string::npos);
  EXPECT_NE(Debugfs(image, "ea_list /bin/ping").find("security.capability"), std::string::npos);
  // Nothing named in the tar appeared on the host next to the archive.
  EXPECT_NE(access(dir.File("etc").c_str(), F_OK), 0);
  EXPECT_NE(access(dir.File("usr").c_str(), F_OK), 0);
}

TEST(TarToExt4Test, Utf8NamesAreKeptWhateverTheLocale) {
  ReadTarNamesAsUtf8();  // as airlock and airlockd do at start-up
  TempDir dir;
  std::string tar = dir.File("rootfs.tar");
  const std::string name =
      "./usr/share/ca-certificates/F\xc5\x91tan\xc3\xbas\xc3\xadtv\xc3\xa1ny.crt";
  WriteTar(tar, {{.name = name, .data = "cert"}});
  std::string image = dir.File("image.ext4");
  absl::Status converted = ConvertRootfsTar(tar, image);
  ASSERT_TRUE(converted.ok()) << converted;
  EXPECT_EQ(Debugfs(image, "cat " + name.substr(1)), "cert");
}

TEST(TarToExt4Test, HostileArchivesAreClearErrors) {
  TempDir dir;
  struct Case {
    const char* what;
    std::vector<TarEntry> entries;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"dot-dot", {{.name = "../evil", .data = "x"}}, "escape"},
      {"nested dot-dot", {{.name = "a/../../evil", .data = "x"}}, "escape"},
      {"hard link outside",
       {{.name = "x", .data = "../../etc/passwd", .hardlink = true}},
       "escape"},
      {"hard link to nothing",
       {{.name = "x", .data = "etc/passwd", .hardlink = true}},
       "not in the image"},
      {"through a file",
       {{.name = "f", .data = "x"}, {.name = "f/g", .data = "y"}},
       "not a directory"},
  };
  for (const Case& c : cases) {
    std::string tar = dir.File("bad.tar");
    WriteTar(tar, c.entries);
    absl::Status s = ConvertRootfsTar(tar, dir.File("bad.ext4"));
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_NE(s.message().find(c.expect), absl::string_view::npos) << c.what << ": " << s;
  }
}

// Rewrites the size field of the tar header of `name` (base-256, as tar does for big sizes)
// and fixes the header's checksum: sizes no honest writer would produce.
void PatchSize(const std::string& tar, const std::string& name, int64_t size) {
  std::string bytes = *ReadFileToString(tar, 1 << 20);
  for (size_t at = 0; at + 512 <= bytes.size(); at += 512) {
    if (bytes.compare(at, name.size() + 1, name.c_str(), name.size() + 1) != 0) continue;
    char* header = bytes.data() + at;
    uint64_t v = static_cast<uint64_t>(size);
    for (int i = 11; i >= 1; --i, v >>= 8) header[124 + i] = static_cast<char>(v & 0xff);
    header[124] = static_cast<char>(size < 0 ? 0xff : 0x80);
    std::memset(header + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; ++i) sum += static_cast<unsigned char>(header[i]);
    std::snprintf(header + 148, 8, "%06o", sum);
    ASSERT_TRUE(WriteFileAtomically(tar, bytes, 0644).ok());
    return;
  }
  FAIL() << name << " not in " << tar;
}

TEST(TarToExt4Test, HugeAndNegativeSizesAreRefused) {
  TempDir dir;
  for (int64_t size : {int64_t{1} << 50, int64_t{-5}, int64_t{65} << 30}) {
    std::string tar = dir.File("sized.tar");
    WriteTar(tar, {{.name = "ok", .data = "fine"}, {.name = "liar", .data = "x"}});
    PatchSize(tar, "liar", size);
    absl::Status s = ConvertRootfsTar(tar, dir.File("sized.ext4"));
    ASSERT_FALSE(s.ok()) << size;
    // "entry liar has size ...; images are limited to 64 GiB", "... has negative size"
    EXPECT_NE(s.message().find(" size"), absl::string_view::npos) << size << ": " << s;
    EXPECT_NE(access(dir.File("sized.ext4").c_str(), F_OK), 0) << "a partial image was left";
  }
}

TEST(TarToExt4Test, TruncatedAndGarbageInputsAreRefused) {
  TempDir dir;
  std::string tar = dir.File("t.tar.gz");
  std::mt19937 random(42);
  std::string noise(1 << 20, '\0');
  for (char& c : noise) c = static_cast<char>(random());
  WriteTar(tar, {{.name = "big", .data = noise}}, testing::Compression::kGzip);
  ASSERT_EQ(truncate(tar.c_str(), 2000), 0);
  absl::Status s = ConvertRootfsTar(tar, dir.File("t.ext4"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("truncated"), absl::string_view::npos) << s;

  std::string garbage = dir.File("garbage.tar");
  std::ofstream(garbage) << "this is not a tar archive at all, just some words\n";
  EXPECT_FALSE(ConvertRootfsTar(garbage, dir.File("g.ext4")).ok());
  EXPECT_FALSE(ConvertRootfsTar(dir.File("missing.tar"), dir.File("g.ext4")).ok());
}

TEST(TarToExt4Test, LayersHonourWhiteouts) {
  TempDir dir;
  std::string lower = dir.File("lower.tar"), upper = dir.File("upper.tar");
  WriteTar(lower, {{.name = "keep", .data = "k"},
                   {.name = "gone", .data = "g"},
                   {.name = "opq/old", .data = "o"},
                   {.name = "tree/a/b", .data = "b"}});
  WriteTar(upper, {{.name = ".wh.gone", .data = ""},
                   {.name = "opq/.wh..wh..opq", .data = ""},
                   {.name = "opq/new", .data = "n"},
                   {.name = ".wh.tree", .data = ""}});
  absl::StatusOr<TarStats> a = ScanTar(lower), b = ScanTar(upper);
  ASSERT_TRUE(a.ok() && b.ok());
  std::string image = dir.File("layers.ext4");
  auto writer = Ext4Writer::Create(image, ImageSizeFor({*a, *b}));
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(ApplyTar(lower, writer->get(), true).ok());
  ASSERT_TRUE(ApplyTar(upper, writer->get(), true).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  std::string fsck;
  EXPECT_EQ(Fsck(image, &fsck), 0) << fsck;
  std::string root = Debugfs(image, "ls /");
  EXPECT_NE(root.find("keep"), std::string::npos);
  EXPECT_EQ(root.find("gone"), std::string::npos);
  EXPECT_EQ(root.find("tree"), std::string::npos);
  std::string opq = Debugfs(image, "ls /opq");
  EXPECT_NE(opq.find("new"), std::string::npos);
  EXPECT_EQ(opq.find("old"), std::string::npos);
}

TEST(TarToExt4Test, AWhiteoutOfTheDirectoryItselfOrItsParentIsRefused) {
  for (const char* name : {"etc/.wh.", "etc/.wh..", "etc/.wh...", ".wh..."}) {
    TempDir dir;
    std::string lower = dir.File("lower.tar"), upper = dir.File("upper.tar");
    WriteTar(lower, {{.name = "etc/keep", .data = "k"}, {.name = "top", .data = "t"}});
    WriteTar(upper, {{.name = name, .data = ""}});
    absl::StatusOr<TarStats> a = ScanTar(lower), b = ScanTar(upper);
    ASSERT_TRUE(a.ok() && b.ok());
    auto writer = Ext4Writer::Create(dir.File("layers.ext4"), ImageSizeFor({*a, *b}));
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(ApplyTar(lower, writer->get(), true).ok());
    absl::Status s = ApplyTar(upper, writer->get(), true);
    EXPECT_FALSE(s.ok()) << name;
    EXPECT_NE(s.message().find("names no file"), std::string::npos) << name << ": " << s;
  }
}

}  // namespace
}  // namespace airlock
