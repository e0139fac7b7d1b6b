#include "src/guest/guest_layer.h"

#include <fcntl.h>
#include <ftw.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

namespace airlock::guest {
namespace {

struct TarEntry {
  char type = 0;
  std::string content;
  std::string link;
  unsigned mode = 0;
  std::map<std::string, std::string> xattrs;
};

// A reader of just what WriteLayerTar writes (ustar blocks, PAX records), checking the
// checksum of every header: what the host's libarchive will see.
std::map<std::string, TarEntry> ReadTar(const std::string& tar) {
  std::map<std::string, TarEntry> out;
  std::map<std::string, std::string> pax;
  size_t at = 0;
  auto octal = [](const char* f, size_t n) {
    return std::strtoull(std::string(f, n).c_str(), nullptr, 8);
  };
  while (at + 512 <= tar.size()) {
    const char* h = tar.data() + at;
    if (std::string(h, 512) == std::string(512, '\0')) break;
    unsigned sum = 0;
    for (size_t i = 0; i < 512; ++i)
      sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    EXPECT_EQ(octal(h + 148, 8), sum) << "checksum at " << at;
    uint64_t size = octal(h + 124, 12);
    std::string data = tar.substr(at + 512, size);
    at += 512 + (size + 511) / 512 * 512;
    if (h[156] == 'x') {
      for (size_t p = 0; p < data.size();) {
        size_t space = data.find(' ', p);
        size_t len = std::stoul(data.substr(p, space - p));
        std::string record = data.substr(space + 1, len - (space - p) - 2);
        size_t eq = record.find('=');
        pax[record.substr(0, eq)] = record.substr(eq + 1);
        p += len;
      }
      continue;
    }
    TarEntry e;
    e.type = h[156];
    e.content = data;
    e.mode = static_cast<unsigned>(octal(h + 100, 8));
    std::string name = pax.count("path") ? pax["path"] : std::string(h, strnlen(h, 100));
    e.link = pax.count("linkpath") ? pax["linkpath"] : std::string(h + 157, strnlen(h + 157, 100));
    for (const auto& [k, v] : pax) {
      if (k.rfind("SCHILY.xattr.", 0) == 0) e.xattrs[k.substr(13)] = v;
    }
    pax.clear();
    out[name] = e;
  }
  return out;
}

class LayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/layer-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    nftw(
        dir_.c_str(), [](const char* path, const struct stat*, int, FTW*) { return remove(path); },
        16, FTW_DEPTH | FTW_PHYS);
  }
  void Write(const std::string& rel, const std::string& data) {
    std::ofstream(dir_ + "/" + rel) << data;
  }
  std::string Tar(const std::vector<std::string>& skip = {}) {
    std::string out = dir_ + ".tar";
    int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    EXPECT_EQ(WriteLayerTar(dir_, fd, skip), "");
    close(fd);
    std::ifstream in(out);
    std::string tar((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    unlink(out.c_str());
    EXPECT_EQ(tar.size() % 512, 0u);
    return tar;
  }
  std::string dir_;
};

TEST_F(LayerTest, FilesDirectoriesLinksAndLongNamesBecomeTarEntries) {
  ASSERT_EQ(mkdir((dir_ + "/usr").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir_ + "/usr/lib").c_str(), 0700), 0);
  Write("usr/lib/a.txt", "hello");
  ASSERT_EQ(chmod((dir_ + "/usr/lib/a.txt").c_str(), 0751), 0);
  ASSERT_EQ(link((dir_ + "/usr/lib/a.txt").c_str(), (dir_ + "/usr/lib/b.txt").c_str()), 0);
  ASSERT_EQ(symlink("/usr/lib/a.txt", (dir_ + "/usr/link").c_str()), 0);
  std::string long_name(150, 'n');
  Write(long_name, std::string(70000, 'x'));
  ASSERT_EQ(mkdir((dir_ + "/etc").c_str(), 0755), 0);
  Write("etc/resolv.conf", "nameserver 10.0.0.1\n");
  Write("etc/keep", "k");

  std::map<std::string, TarEntry> tar = ReadTar(Tar({"etc/resolv.conf"}));
  EXPECT_EQ(tar.at("usr/").type, '5');
  EXPECT_EQ(tar.at("usr/lib/").mode, 0700u);
  EXPECT_EQ(tar.at("usr/lib/a.txt").content, "hello");
  EXPECT_EQ(tar.at("usr/lib/a.txt").mode, 0751u);
  EXPECT_EQ(tar.at("usr/lib/b.txt").type, '1');
  EXPECT_EQ(tar.at("usr/lib/b.txt").link, "usr/lib/a.txt");
  EXPECT_EQ(tar.at("usr/link").type, '2');
  EXPECT_EQ(tar.at("usr/link").link, "/usr/lib/a.txt");
  EXPECT_EQ(tar.at(long_name).content.size(), 70000u);
  EXPECT_EQ(tar.count("etc/resolv.conf"), 0u);
  EXPECT_EQ(tar.count("etc/keep"), 1u);
}

TEST_F(LayerTest, OverlayWhiteoutsAndOpaqueDirectoriesBecomeOciWhiteouts) {
  ASSERT_EQ(mkdir((dir_ + "/etc").c_str(), 0755), 0);
  if (mknod((dir_ + "/etc/gone").c_str(), S_IFCHR | 0, makedev(0, 0)) != 0) {
    GTEST_SKIP() << "mknod needs root: " << strerror(errno);
  }
  ASSERT_EQ(mkdir((dir_ + "/opt").c_str(), 0755), 0);
  if (setxattr((dir_ + "/opt").c_str(), "trusted.overlay.opaque", "y", 1, 0) != 0) {
    GTEST_SKIP() << "trusted xattrs need root and a filesystem that has them";
  }
  Write("opt/new", "n");
  ASSERT_EQ(setxattr((dir_ + "/opt/new").c_str(), "user.note", "v\n1", 3, 0), 0);

  std::map<std::string, TarEntry> tar = ReadTar(Tar());
  EXPECT_EQ(tar.count("etc/gone"), 0u);
  EXPECT_EQ(tar.at("etc/.wh.gone").type, '0');
  EXPECT_EQ(tar.at("etc/.wh.gone").content, "");
  EXPECT_EQ(tar.at("opt/").xattrs.size(), 0u);  // overlay's own xattr stays behind
  EXPECT_EQ(tar.at("opt/.wh..wh..opq").type, '0');
  EXPECT_EQ(tar.at("opt/new").xattrs.at("user.note"), "v\n1");
}

TEST_F(LayerTest, TheSameTreeGivesTheSameBytes) {
  for (const char* name : {"b", "a", "c"}) Write(name, name);
  EXPECT_EQ(Tar(), Tar());
}

}  // namespace
}  // namespace airlock::guest
