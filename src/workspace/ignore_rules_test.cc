#include "src/workspace/ignore_rules.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace airlock {
namespace {

constexpr bool kDir = true;
constexpr bool kFile = false;

IgnoreRules Rules(std::string_view text) {
  absl::StatusOr<IgnoreRules> rules = IgnoreRules::Parse(text);
  EXPECT_TRUE(rules.ok()) << text << ": " << rules.status();
  return rules.ok() ? *std::move(rules) : IgnoreRules();
}

// The message of the error the text gives; fails the test if it parses.
std::string Error(std::string_view text) {
  absl::StatusOr<IgnoreRules> rules = IgnoreRules::Parse(text);
  EXPECT_FALSE(rules.ok()) << text << " parsed";
  if (rules.ok()) return "";
  EXPECT_EQ(rules.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(rules.status().message());
}

bool Has(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

TEST(IgnoreRulesTest, EmptyAndCommentsIgnoreNothing) {
  IgnoreRules none;
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(none.Ignored("a", kFile));

  IgnoreRules rules = Rules("");
  EXPECT_TRUE(rules.empty());
  rules = Rules("# a comment\n\n   \n#*.o\n\r\n");
  EXPECT_TRUE(rules.empty());
  EXPECT_FALSE(rules.Ignored("a.o", kFile));
  EXPECT_FALSE(rules.Ignored("#*.o", kFile));

  // "!" and "/" leave nothing to match.
  EXPECT_TRUE(Rules("!\n/\n!/\n").empty());
  // The root itself is never ignored.
  EXPECT_FALSE(Rules("*\n").Ignored("", kDir));
}

TEST(IgnoreRulesTest, NameAtAnyDepth) {
  IgnoreRules rules = Rules("*.o\nnode_modules\n");
  EXPECT_FALSE(rules.empty());
  EXPECT_TRUE(rules.Ignored("c.o", kFile));
  EXPECT_TRUE(rules.Ignored("a/b/c.o", kFile));
  EXPECT_TRUE(rules.Ignored(".o", kFile));
  EXPECT_FALSE(rules.Ignored("c.oo", kFile));
  EXPECT_FALSE(rules.Ignored("c.o.txt", kFile));
  EXPECT_TRUE(rules.Ignored("node_modules", kDir));
  EXPECT_TRUE(rules.Ignored("web/node_modules", kDir));
  EXPECT_TRUE(rules.Ignored("web/node_modules", kFile));
  EXPECT_FALSE(rules.Ignored("web/node_modules2", kDir));
  // Inside an ignored directory.
  EXPECT_TRUE(rules.Ignored("web/node_modules/x/index.js", kFile));
}

TEST(IgnoreRulesTest, SlashAnchorsToTheRoot) {
  IgnoreRules rules = Rules("/build\ndoc/frotz\n");
  EXPECT_TRUE(rules.Ignored("build", kDir));
  EXPECT_TRUE(rules.Ignored("build", kFile));
  EXPECT_TRUE(rules.Ignored("build/x.o", kFile));
  EXPECT_FALSE(rules.Ignored("src/build", kDir));
  EXPECT_FALSE(rules.Ignored("builds", kDir));
  EXPECT_TRUE(rules.Ignored("doc/frotz", kDir));
  EXPECT_TRUE(rules.Ignored("doc/frotz", kFile));
  EXPECT_FALSE(rules.Ignored("a/doc/frotz", kDir));
  EXPECT_FALSE(rules.Ignored("frotz", kFile));
  EXPECT_FALSE(rules.Ignored("doc", kDir));

  // '*' does not cross a '/' in an anchored pattern.
  rules = Rules("doc/*.txt\n");
  EXPECT_TRUE(rules.Ignored("doc/a.txt", kFile));
  EXPECT_FALSE(rules.Ignored("doc/sub/a.txt", kFile));
  EXPECT_FALSE(rules.Ignored("x/doc/a.txt", kFile));
}

TEST(IgnoreRulesTest, TrailingSlashMatchesOnlyDirectories) {
  IgnoreRules rules = Rules("out/\n");
  EXPECT_TRUE(rules.Ignored("out", kDir));
  EXPECT_TRUE(rules.Ignored("a/out", kDir));
  EXPECT_FALSE(rules.Ignored("out", kFile));
  EXPECT_FALSE(rules.Ignored("a/out", kFile));
  EXPECT_TRUE(rules.Ignored("out/file", kFile));

  // With a '/' before the trailing one, the pattern is anchored.
  rules = Rules("doc/out/\n");
  EXPECT_TRUE(rules.Ignored("doc/out", kDir));
  EXPECT_FALSE(rules.Ignored("doc/out", kFile));
  EXPECT_FALSE(rules.Ignored("x/doc/out", kDir));
}

TEST(IgnoreRulesTest, LastMatchWinsAndNegationReincludes) {
  IgnoreRules rules = Rules("*.log\n!keep.log\n");
  EXPECT_TRUE(rules.Ignored("a.log", kFile));
  EXPECT_TRUE(rules.Ignored("x/a.log", kFile));
  EXPECT_FALSE(rules.Ignored("keep.log", kFile));
  EXPECT_FALSE(rules.Ignored("x/keep.log", kFile));

  // In the other order the later "*.log" wins.
  rules = Rules("!keep.log\n*.log\n");
  EXPECT_TRUE(rules.Ignored("keep.log", kFile));

  // A negation cannot reach into an excluded directory.
  rules = Rules("build/\n!build/keep\n");
  EXPECT_TRUE(rules.Ignored("build", kDir));
  EXPECT_TRUE(rules.Ignored("build/keep", kFile));

  // It can when only the directory's contents were excluded.
  rules = Rules("build/*\n!build/keep\n");
  EXPECT_FALSE(rules.Ignored("build", kDir));
  EXPECT_TRUE(rules.Ignored("build/other", kFile));
  EXPECT_FALSE(rules.Ignored("build/keep", kFile));
  EXPECT_TRUE(rules.Ignored("build/sub/keep", kFile));  // build/sub is excluded
}

TEST(IgnoreRulesTest, DoubleStar) {
  IgnoreRules rules = Rules("**/foo\n");
  EXPECT_TRUE(rules.Ignored("foo", kFile));
  EXPECT_TRUE(rules.Ignored("a/foo", kFile));
  EXPECT_TRUE(rules.Ignored("a/b/foo", kDir));
  EXPECT_FALSE(rules.Ignored("a/xfoo", kFile));

  rules = Rules("**/foo/bar\n");
  EXPECT_TRUE(rules.Ignored("foo/bar", kFile));
  EXPECT_TRUE(rules.Ignored("a/b/foo/bar", kFile));
  EXPECT_FALSE(rules.Ignored("a/foo/x/bar", kFile));

  rules = Rules("foo/**\n");
  EXPECT_FALSE(rules.Ignored("foo", kDir));
  EXPECT_TRUE(rules.Ignored("foo/x", kFile));
  EXPECT_TRUE(rules.Ignored("foo/x/y", kFile));
  EXPECT_FALSE(rules.Ignored("a/foo/x", kFile));
  EXPECT_FALSE(rules.Ignored("foox/y", kFile));

  rules = Rules("a/**/b\n");
  EXPECT_TRUE(rules.Ignored("a/b", kFile));
  EXPECT_TRUE(rules.Ignored("a/x/b", kFile));
  EXPECT_TRUE(rules.Ignored("a/x/y/b", kFile));
  EXPECT_FALSE(rules.Ignored("a/xb", kFile));
  EXPECT_FALSE(rules.Ignored("ab", kFile));
  EXPECT_FALSE(rules.Ignored("x/a/b", kFile));
  EXPECT_FALSE(rules.Ignored("a/x/bc", kFile));

  // Not a whole component: a plain '*'.
  rules = Rules("/a**b\n");
  EXPECT_TRUE(rules.Ignored("axyb", kFile));
  EXPECT_FALSE(rules.Ignored("ax/yb", kFile));
  rules = Rules("**\n");
  EXPECT_TRUE(rules.Ignored("anything", kFile));
  EXPECT_TRUE(rules.Ignored("a/b", kFile));
}

TEST(IgnoreRulesTest, QuestionMarkAndStarDoNotMatchSlash) {
  IgnoreRules rules = Rules("/a?b\n/x*y\n");
  EXPECT_TRUE(rules.Ignored("acb", kFile));
  EXPECT_FALSE(rules.Ignored("ab", kFile));
  EXPECT_FALSE(rules.Ignored("a/b", kFile));
  EXPECT_TRUE(rules.Ignored("xy", kFile));
  EXPECT_TRUE(rules.Ignored("x123y", kFile));
  EXPECT_FALSE(rules.Ignored("x/y", kFile));
}

TEST(IgnoreRulesTest, CharacterClasses) {
  IgnoreRules rules = Rules("[abc].txt\n");
  EXPECT_TRUE(rules.Ignored("a.txt", kFile));
  EXPECT_TRUE(rules.Ignored("d/c.txt", kFile));
  EXPECT_FALSE(rules.Ignored("d.txt", kFile));
  EXPECT_FALSE(rules.Ignored("ab.txt", kFile));

  rules = Rules("[!a]x\n");
  EXPECT_FALSE(rules.Ignored("ax", kFile));
  EXPECT_TRUE(rules.Ignored("bx", kFile));
  rules = Rules("[^a]x\n");
  EXPECT_FALSE(rules.Ignored("ax", kFile));
  EXPECT_TRUE(rules.Ignored("bx", kFile));

  rules = Rules("file[a-z]\n");
  EXPECT_TRUE(rules.Ignored("filem", kFile));
  EXPECT_FALSE(rules.Ignored("fileM", kFile));
  EXPECT_FALSE(rules.Ignored("file1", kFile));

  // ']' first is a member, '-' first or last is a member, backslash escapes.
  rules = Rules("[]]\n[-z]\n[a-]\n[\\]]y\n");
  EXPECT_TRUE(rules.Ignored("]", kFile));
  EXPECT_TRUE(rules.Ignored("-", kFile));
  EXPECT_TRUE(rules.Ignored("z", kFile));
  EXPECT_FALSE(rules.Ignored("m", kFile));
  EXPECT_TRUE(rules.Ignored("]y", kFile));

  // A negated class never matches '/'.
  rules = Rules("/a[!x]b\n");
  EXPECT_TRUE(rules.Ignored("acb", kFile));
  EXPECT_FALSE(rules.Ignored("a/b", kFile));

  rules = Rules("[[:digit:]]*\n");
  EXPECT_TRUE(rules.Ignored("1abc", kFile));
  EXPECT_FALSE(rules.Ignored("abc", kFile));
}

TEST(IgnoreRulesTest, Escapes) {
  IgnoreRules rules = Rules("\\#file\n\\!x\n\\*star\n");
  EXPECT_TRUE(rules.Ignored("#file", kFile));
  EXPECT_TRUE(rules.Ignored("!x", kFile));
  EXPECT_FALSE(rules.Ignored("x", kFile));
  EXPECT_TRUE(rules.Ignored("*star", kFile));
  EXPECT_FALSE(rules.Ignored("astar", kFile));
}

TEST(IgnoreRulesTest, TrailingSpacesAndLineEnds) {
  IgnoreRules rules = Rules("foo   \nbar\\ \n baz\nwin\r\n");
  EXPECT_TRUE(rules.Ignored("foo", kFile));
  EXPECT_FALSE(rules.Ignored("foo ", kFile));
  EXPECT_TRUE(rules.Ignored("bar ", kFile));
  EXPECT_FALSE(rules.Ignored("bar", kFile));
  EXPECT_TRUE(rules.Ignored(" baz", kFile));  // leading spaces are kept
  EXPECT_FALSE(rules.Ignored("baz", kFile));
  EXPECT_TRUE(rules.Ignored("win", kFile));

  // A byte order mark and a last line without '\n'.
  rules = Rules(
      "\xEF\xBB\xBF"
      "first\nlast");
  EXPECT_TRUE(rules.Ignored("first", kFile));
  EXPECT_TRUE(rules.Ignored("last", kFile));
}

TEST(IgnoreRulesTest, ErrorsNameTheLine) {
  std::string error = Error("ok\n# fine\nbad[abc\n");
  EXPECT_TRUE(Has(error, "line 3")) << error;
  EXPECT_TRUE(Has(error, "'['")) << error;
  EXPECT_TRUE(Has(error, "column 4")) << error;
  EXPECT_TRUE(Has(Error("["), "line 1"));
  EXPECT_TRUE(Has(Error("[]"), "closing ']'"));
  EXPECT_TRUE(Has(Error("[!]"), "closing ']'"));
  EXPECT_TRUE(Has(Error("[a\\"), "closing ']'"));

  error = Error("a\nb\\");
  EXPECT_TRUE(Has(error, "line 2")) << error;
  EXPECT_TRUE(Has(error, "backslash")) << error;

  error = Error("[[:nope:]]");
  EXPECT_TRUE(Has(error, "[:nope:]")) << error;

  error = Error("a\n" + std::string(kMaxIgnoreLineBytes + 1, 'x') + "\n");
  EXPECT_TRUE(Has(error, "line 2")) << error;
  EXPECT_TRUE(Has(error, "4096")) << error;
  Rules(std::string(kMaxIgnoreLineBytes, 'x'));  // at the cap is fine

  error = Error(std::string("a\n\n# x\0y\n", 9));
  EXPECT_TRUE(Has(error, "line 3")) << error;
  EXPECT_TRUE(Has(error, "NUL")) << error;

  std::string many;
  for (size_t i = 0; i < kMaxIgnorePatterns; ++i) many += "p" + std::to_string(i) + "\n# c\n";
  EXPECT_TRUE(Rules(many).Ignored("p9999", kFile));
  error = Error(many + "one_more\n");
  EXPECT_TRUE(Has(error, "line " + std::to_string(2 * kMaxIgnorePatterns + 1))) << error;
  EXPECT_TRUE(Has(error, "10000")) << error;
}

// Bounded work (no backtracking) is what keeps these from running for ages; the test finishing
// at all under the suite's timeout is the check (tests never assert on wall-clock time).
TEST(IgnoreRulesTest, PathologicalPatternsGiveTheirAnswers) {
  IgnoreRules rules = Rules("*a*a*a*a*a*a*a*a*b\n/**/a*a*a*a*a*a*a*a*b/**\n");
  const std::string name(4000, 'a');
  EXPECT_FALSE(rules.Ignored(name, kFile));
  EXPECT_FALSE(rules.Ignored("x/" + name + "/" + name, kFile));
  EXPECT_TRUE(rules.Ignored(name + "b", kFile));

  std::string long_pattern;
  for (int i = 0; i < 1000; ++i) long_pattern += "*a";
  rules = Rules(long_pattern + "b\n");
  EXPECT_FALSE(rules.Ignored(name, kFile));
}

}  // namespace
}  // namespace airlock
