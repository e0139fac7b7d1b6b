#include "src/common/workspace_change.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "src/common/channel_frame.h"

namespace airlock {
namespace {

WorkspaceChange Sample() {
  WorkspaceChange c;
  c.kind = ChangeKind::kModified;
  c.path = "src/main.c";
  c.old_mode = S_IFREG | 0644;
  c.new_mode = S_IFREG | 0755;
  c.old_size = 3;
  c.new_size = 4;
  c.flags = kChangeOldContent | kChangeNewContent;
  c.old_content = "ab\n";
  c.new_content = "abc\n";
  c.new_sha256 = std::string(32, 'x');
  return c;
}

// A record with its payload fields written by hand, for shapes the encoder never makes.
std::string Record(uint32_t kind, const std::string& path, uint32_t old_mode, uint32_t new_mode,
                   uint32_t flags = 0, const std::string& new_content = "",
                   const std::string& sha = "") {
  PayloadWriter w;
  w.U32(kind).Str(path).U32(old_mode).U32(new_mode).U64(0).U64(0).Str("").Str("").U32(flags);
  w.Str("").Str(new_content).Str(sha);
  return PayloadWriter().U32(static_cast<uint32_t>(w.bytes().size())).bytes() + w.bytes();
}

TEST(WorkspaceChangeTest, RecordsSurviveAStreamCutAnywhere) {
  WorkspaceChange added;
  added.kind = ChangeKind::kAdded;
  added.path = "link";
  added.new_mode = S_IFLNK | 0777;
  added.new_target = "../../etc/shadow";
  std::string stream = EncodeWorkspaceChange(Sample()) + EncodeWorkspaceChange(added);
  WorkspaceChangeParser parser;
  std::vector<WorkspaceChange> out;
  std::string error;
  for (char c : stream) {
    ASSERT_TRUE(parser.Feed(std::string_view(&c, 1), &out, &error)) << error;
  }
  EXPECT_TRUE(parser.AtRecordBoundary());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].path, "src/main.c");
  EXPECT_EQ(out[0].new_content, "abc\n");
  EXPECT_EQ(out[0].new_mode, static_cast<uint32_t>(S_IFREG | 0755));
  EXPECT_EQ(out[1].new_target, "../../etc/shadow");
  EXPECT_EQ(out[1].kind, ChangeKind::kAdded);
}

TEST(WorkspaceChangeTest, HostileRecordsFailTheStream) {
  const uint32_t file = S_IFREG | 0644;
  struct Case {
    std::string bytes;
    const char* why;
  } cases[] = {
      {Record(0, "../x", 0, file), "dot-dot path"},
      {Record(0, "/etc/passwd", 0, file), "absolute path"},
      {Record(0, "a//b", 0, file), "empty component"},
      {Record(0, "a/./b", 0, file), "dot component"},
      {Record(0, std::string("a\0b", 3), 0, file), "NUL in path"},
      {Record(7, "a", 0, file), "unknown kind"},
      {Record(0, "a", file, file), "added with an old side"},
      {Record(2, "a", file, file), "deleted with a new side"},
      {Record(0, "a", 0, S_IFDIR | 0755), "a directory"},
      {Record(0, "a", 0, S_IFCHR | 0644), "a device"},
      {Record(0, "a", 0, file, 0, "content"), "content without its flag"},
      {Record(0, "a", 0, file, 1u << 20), "unknown flag"},
      {Record(0, "a", 0, file, 0, "", "short"), "a digest of the wrong length"},
      {PayloadWriter().U32(kMaxChangeRecord + 1).bytes(), "a record over the cap"},
      {PayloadWriter().U32(3).bytes() + "abc", "a truncated payload"},
  };
  for (const Case& c : cases) {
    WorkspaceChangeParser parser;
    std::vector<WorkspaceChange> out;
    std::string error;
    EXPECT_FALSE(parser.Feed(c.bytes, &out, &error)) << c.why;
    EXPECT_TRUE(out.empty()) << c.why;
    EXPECT_FALSE(parser.Feed(EncodeWorkspaceChange(Sample()), &out, &error)) << c.why;
  }
}

TEST(WorkspaceChangeTest, AStreamCutInsideARecordIsNotAtABoundary) {
  std::string record = EncodeWorkspaceChange(Sample());
  WorkspaceChangeParser parser;
  std::vector<WorkspaceChange> out;
  std::string error;
  ASSERT_TRUE(parser.Feed(record.substr(0, record.size() - 1), &out, &error));
  EXPECT_FALSE(parser.AtRecordBoundary());
  EXPECT_TRUE(out.empty());
}

TEST(WorkspaceChangeTest, CleanRelativePaths) {
  EXPECT_TRUE(IsCleanRelativePath("a"));
  EXPECT_TRUE(IsCleanRelativePath("a/b.c/..d"));
  for (const char* bad : {"", "/a", "a/", "a//b", ".", "..", "a/../b", "./a"}) {
    EXPECT_FALSE(IsCleanRelativePath(bad)) << bad;
  }
  EXPECT_FALSE(IsCleanRelativePath(std::string(kMaxChangePath + 1, 'a')));
}

}  // namespace
}  // namespace airlock
