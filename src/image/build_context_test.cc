#include "src/image/build_context.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <string>
#include <vector>

#include "src/common/file_util.h"
#include "src/common/sha256.h"
#include "src/image/tar_to_ext4.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

struct TarFile {
  std::string path;
  char type = 'f';   // f, d, l, h (hard link)
  std::string data;  // content, or a link's target
  unsigned mode = 0644;
};

void WriteTar(const std::string& out, const std::vector<TarFile>& files, bool gzip = false) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (gzip) archive_write_add_filter_gzip(a);
  ASSERT_EQ(archive_write_open_filename(a, out.c_str()), ARCHIVE_OK);
  for (const TarFile& f : files) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, f.path.c_str());
    archive_entry_set_perm(e, f.mode);
    if (f.type == 'd') {
      archive_entry_set_filetype(e, AE_IFDIR);
    } else if (f.type == 'l') {
      archive_entry_set_filetype(e, AE_IFLNK);
      archive_entry_set_symlink(e, f.data.c_str());
    } else if (f.type == 'h') {
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_hardlink(e, f.data.c_str());
    } else {
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_size(e, static_cast<la_int64_t>(f.data.size()));
    }
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK);
    if (f.type == 'f') archive_write_data(a, f.data.data(), f.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

// path -> (type letter, content or link) of a tar's entries.
std::map<std::string, std::pair<char, std::string>> ReadBack(
    const std::string& tar, std::map<std::string, unsigned>* modes = nullptr) {
  std::map<std::string, std::pair<char, std::string>> out;
  absl::StatusOr<ArchivePtr> a = OpenTar(tar);
  EXPECT_TRUE(a.ok());
  archive_entry* e;
  while (archive_read_next_header(a->get(), &e) == ARCHIVE_OK) {
    std::string data;
    char buf[4096];
    la_ssize_t n;
    while ((n = archive_read_data(a->get(), buf, sizeof(buf))) > 0) data.append(buf, n);
    char type = archive_entry_filetype(e) == AE_IFDIR   ? 'd'
                : archive_entry_filetype(e) == AE_IFLNK ? 'l'
                                                        : 'f';
    if (type == 'l') data = archive_entry_symlink(e);
    std::string name = archive_entry_pathname(e);
    if (!name.empty() && name.back() == '/') name.pop_back();  // directories end with '/'
    out[name] = {type, data};
    if (modes) (*modes)[name] = archive_entry_perm(e);
  }
  return out;
}

TEST(BuildContextTest, IndexesMatchesAndWritesALayer) {
  testing::TempDir dir;
  std::string tar = dir.File("context.tar");
  WriteTar(tar, {{"./app/", 'd', "", 0750},
                 {"app/main.py", 'f', "print(1)\n"},
                 {"app/lib/util.py", 'f', "x = 2\n"},  // its parent is not listed
                 {"requirements.txt", 'f', "six\n"},
                 {"notes.txt", 'f', "n"},
                 {"link", 'l', "/etc/passwd"}});
  absl::StatusOr<BuildContext> context = BuildContext::Open(tar);
  ASSERT_TRUE(context.ok()) << context.status();
  const auto& entries = context->entries();
  EXPECT_EQ(entries.at("app").mode, 0750u);
  EXPECT_EQ(entries.at("app/lib").type, static_cast<uint32_t>(S_IFDIR));
  EXPECT_EQ(entries.at("app/main.py").digest, Sha256Hex("print(1)\n"));
  EXPECT_EQ(entries.at("link").link, "/etc/passwd");

  auto names = [](const absl::StatusOr<std::vector<const ContextEntry*>>& m) {
    std::vector<std::string> out;
    if (m.ok()) {
      for (const ContextEntry* e : *m) out.push_back(e->path);
    }
    return out;
  };
  EXPECT_EQ(names(context->Match("*.txt")),
            (std::vector<std::string>{"notes.txt", "requirements.txt"}));
  EXPECT_EQ(names(context->Match("/app/./main.py")), std::vector<std::string>{"app/main.py"});
  EXPECT_EQ(names(context->Match("app/../requirements.txt")),
            std::vector<std::string>{"requirements.txt"});
  EXPECT_EQ(names(context->Match(".")), std::vector<std::string>{""});
  EXPECT_EQ(context->Match("../etc/passwd").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(context->Match("../x").status().message().find("outside the build context"),
            std::string::npos);
  EXPECT_EQ(context->Match("missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(context->Match("*.none").status().code(), absl::StatusCode::kNotFound);
  std::vector<const ContextEntry*> below = context->Below(entries.at("app"));
  ASSERT_EQ(below.size(), 3u);
  EXPECT_EQ(below[0]->path, "app/lib");

  std::vector<LayerItem> items = {
      {.dest = "srv", .type = S_IFDIR, .mode = 0755},
      {.dest = "srv/main.py",
       .source = &entries.at("app/main.py"),
       .type = S_IFREG,
       .mode = 0600,
       .uid = 1000},
      {.dest = "srv/again.py", .source = &entries.at("app/main.py"), .type = S_IFREG, .mode = 0644},
      {.dest = "srv/link", .source = &entries.at("link"), .type = S_IFLNK, .mode = 0777},
      {.dest = "etc/app.conf",
       .inline_content = std::string("a=1\n"),
       .type = S_IFREG,
       .mode = 0644},
  };
  std::string layer = dir.File("layer.tar");
  absl::Status written = context->WriteLayer(items, layer);
  ASSERT_TRUE(written.ok()) << written;
  std::map<std::string, unsigned> modes;
  auto back = ReadBack(layer, &modes);
  EXPECT_EQ(back.at("srv/main.py").second, "print(1)\n");
  EXPECT_EQ(back.at("srv/again.py").second, "print(1)\n");
  EXPECT_EQ(modes.at("srv/main.py"), 0600u);
  EXPECT_EQ(back.at("srv/link"), std::make_pair('l', std::string("/etc/passwd")));
  EXPECT_EQ(back.at("etc/app.conf").second, "a=1\n");
  EXPECT_EQ(back.at("srv").first, 'd');
}

TEST(BuildContextTest, AddUnpacksLocalTarArchivesUnderTheirDestination) {
  testing::TempDir dir;
  std::string inner_gz = dir.File("inner.tar.gz"), inner_tar = dir.File("inner.tar");
  WriteTar(inner_gz,
           {{"pkg/", 'd', "", 0700},
            {"pkg/run.sh", 'f', "echo hi\n", 0755},
            {"pkg/same", 'h', "pkg/run.sh"}},
           true);
  WriteTar(inner_tar, {{"../../up", 'f', "x"}});
  absl::StatusOr<std::string> gz = ReadFileToString(inner_gz, 1 << 20),
                              plain = ReadFileToString(inner_tar, 1 << 20);
  ASSERT_TRUE(gz.ok() && plain.ok());
  std::string tar = dir.File("context.tar");
  WriteTar(tar, {{"app.tgz", 'f', *gz},
                 {"notes.txt.gz", 'f', "not gzip at all"},
                 {"up.tar", 'f', *plain},
                 {"empty", 'f', ""}});
  absl::StatusOr<BuildContext> context = BuildContext::Open(tar);
  ASSERT_TRUE(context.ok()) << context.status();
  const auto& entries = context->entries();
  EXPECT_TRUE(*context->IsTarArchive(entries.at("app.tgz")));
  EXPECT_TRUE(*context->IsTarArchive(entries.at("up.tar")));
  EXPECT_FALSE(*context->IsTarArchive(entries.at("notes.txt.gz")));
  EXPECT_FALSE(*context->IsTarArchive(entries.at("empty")));

  std::string layer = dir.File("layer.tar");
  LayerItem unpack{.dest = "opt/app",
                   .source = &entries.at("app.tgz"),
                   .type = S_IFREG,
                   .uid = 1000,
                   .gid = 1000,
                   .unpack = true,
                   .own = true};
  ASSERT_TRUE(context->WriteLayer({unpack}, layer).ok());
  std::map<std::string, unsigned> modes;
  auto back = ReadBack(layer, &modes);
  EXPECT_EQ(back.at("opt/app/pkg/run.sh").second, "echo hi\n");
  EXPECT_EQ(modes.at("opt/app/pkg/run.sh"), 0755u);
  EXPECT_EQ(modes.at("opt/app/pkg"), 0700u);
  EXPECT_EQ(back.count("opt/app/pkg/same"), 1u);

  // More than the build may write, and names that leave the destination: refused, saying so.
  absl::Status over = context->WriteLayer({unpack}, layer, 4);
  EXPECT_NE(over.message().find("ADD app.tgz: unpacks to more than"), std::string::npos) << over;
  LayerItem up = unpack;
  up.source = &entries.at("up.tar");
  absl::Status outside = context->WriteLayer({up}, layer);
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(outside.message().find("ADD up.tar: "), std::string::npos) << outside;
}

TEST(BuildContextTest, HostileContextsAreRefused) {
  testing::TempDir dir;
  std::string tar = dir.File("c.tar");
  WriteTar(tar, {{"../escape", 'f', "x"}});
  EXPECT_NE(BuildContext::Open(tar).status().message().find(".."), std::string::npos);
  WriteTar(tar, {{"a", 'f', "x"}, {"b", 'h', "a"}});
  EXPECT_NE(BuildContext::Open(tar).status().message().find("hard link"), std::string::npos);
  WriteTar(tar, {{"a", 'f', "x"}, {"a/b", 'f', "y"}});
  EXPECT_NE(BuildContext::Open(tar).status().message().find("both as a file and as a directory"),
            std::string::npos);
  std::string junk = dir.File("junk");
  ASSERT_TRUE(WriteFileAtomically(junk, std::string(3000, 'j'), 0600).ok());
  EXPECT_FALSE(BuildContext::Open(junk).ok());
}

}  // namespace
}  // namespace airlock
