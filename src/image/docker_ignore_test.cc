#include "src/image/docker_ignore.h"

#include <gtest/gtest.h>

#include <string>

namespace airlock {
namespace {

DockerIgnore ParseOk(const std::string& text) {
  absl::StatusOr<DockerIgnore> i = DockerIgnore::Parse(text);
  EXPECT_TRUE(i.ok()) << i.status();
  return i.ok() ? *i : DockerIgnore();
}

TEST(DockerIgnoreTest, GlobsStayWithinOneElementButDoubleStarCrosses) {
  EXPECT_TRUE(DockerIgnore::Match("*.md", "README.md"));
  EXPECT_FALSE(DockerIgnore::Match("*.md", "docs/README.md"));
  EXPECT_TRUE(DockerIgnore::Match("*/*.md", "docs/README.md"));
  EXPECT_TRUE(DockerIgnore::Match("**/*.md", "README.md"));
  EXPECT_TRUE(DockerIgnore::Match("**/*.md", "a/b/c/README.md"));
  EXPECT_TRUE(DockerIgnore::Match("a/**", "a/b/c"));
  EXPECT_TRUE(DockerIgnore::Match("a/**/z", "a/z"));
  EXPECT_TRUE(DockerIgnore::Match("a/**/z", "a/b/c/z"));
  EXPECT_FALSE(DockerIgnore::Match("a/**/z", "a/b/cz"));
  EXPECT_TRUE(DockerIgnore::Match("file?.txt", "file1.txt"));
  EXPECT_FALSE(DockerIgnore::Match("a?b", "a/b"));
  EXPECT_TRUE(DockerIgnore::Match("[a-c]x", "bx"));
  EXPECT_FALSE(DockerIgnore::Match("[^a-c]x", "bx"));
  EXPECT_TRUE(DockerIgnore::Match("[^a-c]x", "dx"));
  EXPECT_TRUE(DockerIgnore::Match("\\*lit", "*lit"));
  EXPECT_FALSE(DockerIgnore::Match("\\*lit", "xlit"));
}

TEST(DockerIgnoreTest, LastMatchDecidesAndDirectoriesCoverTheirContents) {
  DockerIgnore i = ParseOk(
      "# comment\n"
      "node_modules\n"
      "/build/\n"
      "*.log\n"
      "!important.log\n"
      "  .git  \n"
      "secrets/**\n"
      "!secrets/public.pem\n");
  EXPECT_TRUE(i.Excluded("node_modules"));
  EXPECT_TRUE(i.Excluded("node_modules/x/index.js"));
  EXPECT_FALSE(i.Excluded("src/node_modules"));  // patterns are from the root
  EXPECT_TRUE(i.Excluded("build/out.o"));
  EXPECT_TRUE(i.Excluded("debug.log"));
  EXPECT_FALSE(i.Excluded("important.log"));
  EXPECT_FALSE(i.Excluded("logs/debug.log"));
  EXPECT_TRUE(i.Excluded(".git/config"));
  EXPECT_TRUE(i.Excluded("secrets/key"));
  EXPECT_FALSE(i.Excluded("secrets/public.pem"));
  EXPECT_FALSE(i.Excluded("Dockerfile"));
  EXPECT_TRUE(i.HasExceptions());
}

TEST(DockerIgnoreTest, PatternsAreCleaned) {
  DockerIgnore i = ParseOk("./a/../b//c/\n");
  EXPECT_TRUE(i.Excluded("b/c/d"));
  EXPECT_EQ(CleanSlashPath("a/./b/../../.."), "..");
  EXPECT_EQ(CleanSlashPath("/../x"), "/x");
  EXPECT_EQ(CleanSlashPath(""), ".");
  EXPECT_FALSE(ParseOk("*\n!keep\n").Excluded("keep"));
  EXPECT_FALSE(ParseOk("x\n").HasExceptions());
}

TEST(DockerIgnoreTest, BadPatternsAreRefusedWithTheirLine) {
  absl::StatusOr<DockerIgnore> i = DockerIgnore::Parse("ok\n[abc\n");
  ASSERT_FALSE(i.ok());
  EXPECT_EQ(i.status().message(), ".dockerignore line 2: a [ without its ] in \"[abc\"");
  EXPECT_FALSE(DockerIgnore::Parse("a\\").ok());
  EXPECT_FALSE(DockerIgnore::Parse("[z-a]").ok());
  EXPECT_FALSE(DockerIgnore::Parse(std::string((1 << 20) + 1, 'a')).ok());
}

TEST(DockerIgnoreTest, AHostilePatternCostsPatternTimesPath) {
  std::string pattern;
  for (int i = 0; i < 200; ++i) pattern += "*a";
  pattern += "b";
  std::string path(4000, 'a');
  EXPECT_FALSE(DockerIgnore::Match(pattern, path));  // backtracking would never finish
  std::string stars;
  for (int i = 0; i < 200; ++i) stars += "**/x";
  std::string deep;
  for (int i = 0; i < 500; ++i) deep += "x/";
  EXPECT_FALSE(DockerIgnore::Match(stars + "q", deep + "y"));
}

}  // namespace
}  // namespace airlock
