#include "src/workspace/unified_diff.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace airlock {
namespace {

constexpr std::string_view kNoNewline = "\\ No newline at end of file\n";

std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    lines.emplace_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

// Reads "N" or "N,C" at *pos; C defaults to 1.
bool ParseRange(std::string_view text, size_t* pos, size_t* start, size_t* count) {
  auto number = [&](size_t* value) {
    if (*pos >= text.size() || text[*pos] < '0' || text[*pos] > '9') return false;
    *value = 0;
    while (*pos < text.size() && text[*pos] >= '0' && text[*pos] <= '9') {
      *value = *value * 10 + static_cast<size_t>(text[(*pos)++] - '0');
    }
    return true;
  };
  if (!number(start)) return false;
  *count = 1;
  if (*pos < text.size() && text[*pos] == ',') {
    ++*pos;
    if (!number(count)) return false;
  }
  return true;
}

// Applies the hunks of `diff` to `old_text` the strict way `patch` would with no fuzz: every
// context and removed line must match, the header counts must be exact, and the header starts
// must name where the hunk lands on each side. Returns nullopt when anything is off.
std::optional<std::string> ApplyHunks(std::string_view old_text, std::string_view diff) {
  const std::vector<std::string> old_lines = Lines(old_text);
  const std::vector<std::string> diff_lines = Lines(diff);
  std::vector<std::string> result;
  size_t cursor = 0;  // next old line to copy
  size_t d = 0;
  while (d < diff_lines.size()) {
    const std::string& header = diff_lines[d++];
    if (header.rfind("@@ -", 0) != 0) return std::nullopt;
    size_t pos = 4;
    size_t old_start, old_count, new_start, new_count;
    if (!ParseRange(header, &pos, &old_start, &old_count)) return std::nullopt;
    if (header.compare(pos, 2, " +") != 0) return std::nullopt;
    pos += 2;
    if (!ParseRange(header, &pos, &new_start, &new_count)) return std::nullopt;
    if (header.substr(pos) != " @@\n") return std::nullopt;
    // An empty range names the line before it.
    const size_t old_index = old_count == 0 ? old_start : old_start - 1;
    const size_t new_index = new_count == 0 ? new_start : new_start - 1;
    if ((old_count > 0 && old_start == 0) || (new_count > 0 && new_start == 0)) return std::nullopt;
    if (old_index < cursor || old_index > old_lines.size()) return std::nullopt;
    while (cursor < old_index) result.push_back(old_lines[cursor++]);
    if (result.size() != new_index) return std::nullopt;

    size_t old_seen = 0, new_seen = 0;
    while (d < diff_lines.size() && diff_lines[d].rfind("@@", 0) != 0) {
      const std::string& line = diff_lines[d++];
      if (line.size() < 2 || line.back() != '\n') return std::nullopt;
      const char tag = line[0];
      std::string content = line.substr(1);
      if (d < diff_lines.size() && diff_lines[d] == kNoNewline) {
        content.pop_back();
        ++d;
      }
      if (tag == ' ' || tag == '-') {
        if (cursor >= old_lines.size() || old_lines[cursor] != content) return std::nullopt;
        ++cursor;
        ++old_seen;
      }
      if (tag == ' ' || tag == '+') {
        result.push_back(content);
        ++new_seen;
      }
      if (tag != ' ' && tag != '-' && tag != '+') return std::nullopt;
    }
    if (old_seen != old_count || new_seen != new_count) return std::nullopt;
  }
  while (cursor < old_lines.size()) result.push_back(old_lines[cursor++]);
  std::string text;
  for (const std::string& line : result) text += line;
  return text;
}

// Counts the lines of `diff` that start with `tag`.
uint64_t CountTagged(std::string_view diff, char tag) {
  uint64_t count = 0;
  for (const std::string& line : Lines(diff)) count += !line.empty() && line[0] == tag;
  return count;
}

// Length of a longest common subsequence of the lines, by dynamic programming.
size_t Lcs(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::vector<size_t>> table(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      table[i][j] = a[i - 1] == b[j - 1] ? table[i - 1][j - 1] + 1
                                         : std::max(table[i - 1][j], table[i][j - 1]);
    }
  }
  return table[a.size()][b.size()];
}

// "1\n2\n...\n{n}\n".
std::string Numbered(int n) {
  std::string text;
  for (int i = 1; i <= n; ++i) text += std::to_string(i) + "\n";
  return text;
}

TEST(UnifiedDiffTest, IdenticalTextsGiveNothing) {
  DiffStat stat{7, 7};
  EXPECT_EQ(UnifiedDiff("a\nb\n", "a\nb\n", 3, &stat), "");
  EXPECT_EQ(stat.added, 0u);
  EXPECT_EQ(stat.removed, 0u);
  EXPECT_EQ(UnifiedDiff("", ""), "");
  EXPECT_EQ(UnifiedDiff("no newline", "no newline"), "");
}

// The expected outputs below are what `git diff --no-index` prints for the same files, from the
// first "@@" line on. The lines start with digits so that git prints no function name after "@@".
TEST(UnifiedDiffTest, OneLineChangedInTheMiddle) {
  const std::string new_text = "1\n2\n3\n4\n5\nsix\n7\n8\n9\n10\n";
  DiffStat stat;
  EXPECT_EQ(UnifiedDiff(Numbered(10), new_text, 3, &stat),
            "@@ -3,7 +3,7 @@\n"
            " 3\n"
            " 4\n"
            " 5\n"
            "-6\n"
            "+six\n"
            " 7\n"
            " 8\n"
            " 9\n");
  EXPECT_EQ(stat.added, 1u);
  EXPECT_EQ(stat.removed, 1u);
}

TEST(UnifiedDiffTest, ContextCount) {
  const std::string new_text = "1\n2\n3\n4\n5\nsix\n7\n8\n9\n10\n";
  EXPECT_EQ(UnifiedDiff(Numbered(10), new_text, 1), "@@ -5,3 +5,3 @@\n 5\n-6\n+six\n 7\n");
  EXPECT_EQ(UnifiedDiff(Numbered(10), new_text, 0), "@@ -6 +6 @@\n-6\n+six\n");
  EXPECT_EQ(UnifiedDiff(Numbered(10), new_text, -5), "@@ -6 +6 @@\n-6\n+six\n");
  // With no context, a pure insertion names the old line it follows.
  EXPECT_EQ(UnifiedDiff("1\n2\n", "1\nx\n2\n", 0), "@@ -1,0 +2 @@\n+x\n");
  EXPECT_EQ(UnifiedDiff("1\nx\n2\n", "1\n2\n", 0), "@@ -2 +1,0 @@\n-x\n");
  // Context reaching past either end stops there.
  EXPECT_EQ(UnifiedDiff("1\n2\n3\n", "1\nX\n3\n", 100), "@@ -1,3 +1,3 @@\n 1\n-2\n+X\n 3\n");
}

TEST(UnifiedDiffTest, AddToEmptyFile) {
  DiffStat stat;
  EXPECT_EQ(UnifiedDiff("", "x\ny\nz\n", 3, &stat), "@@ -0,0 +1,3 @@\n+x\n+y\n+z\n");
  EXPECT_EQ(stat.added, 3u);
  EXPECT_EQ(stat.removed, 0u);
  EXPECT_EQ(UnifiedDiff("", "x\n"), "@@ -0,0 +1 @@\n+x\n");
}

TEST(UnifiedDiffTest, DeleteEverything) {
  DiffStat stat;
  EXPECT_EQ(UnifiedDiff("x\ny\nz\n", "", 3, &stat), "@@ -1,3 +0,0 @@\n-x\n-y\n-z\n");
  EXPECT_EQ(stat.added, 0u);
  EXPECT_EQ(stat.removed, 3u);
  EXPECT_EQ(UnifiedDiff("1", ""), "@@ -1 +0,0 @@\n-1\n\\ No newline at end of file\n");
}

TEST(UnifiedDiffTest, MissingNewlineOnOldOnly) {
  DiffStat stat;
  EXPECT_EQ(UnifiedDiff("1\n2\n3", "1\n2\n3\n", 3, &stat),
            "@@ -1,3 +1,3 @@\n"
            " 1\n"
            " 2\n"
            "-3\n"
            "\\ No newline at end of file\n"
            "+3\n");
  EXPECT_EQ(stat.added, 1u);
  EXPECT_EQ(stat.removed, 1u);
}

TEST(UnifiedDiffTest, MissingNewlineOnNewOnly) {
  EXPECT_EQ(UnifiedDiff("1\n2\n3\n", "1\n2\n3"),
            "@@ -1,3 +1,3 @@\n"
            " 1\n"
            " 2\n"
            "-3\n"
            "+3\n"
            "\\ No newline at end of file\n");
  EXPECT_EQ(UnifiedDiff("1\n2\n3\n", "1\n2\n3\n4"),
            "@@ -1,3 +1,4 @@\n"
            " 1\n"
            " 2\n"
            " 3\n"
            "+4\n"
            "\\ No newline at end of file\n");
}

TEST(UnifiedDiffTest, MissingNewlineOnBoth) {
  // The last line changed.
  EXPECT_EQ(UnifiedDiff("1\n2\n3", "1\n2\nC"),
            "@@ -1,3 +1,3 @@\n"
            " 1\n"
            " 2\n"
            "-3\n"
            "\\ No newline at end of file\n"
            "+C\n"
            "\\ No newline at end of file\n");
  // The last line unchanged, in the context: one marker.
  EXPECT_EQ(UnifiedDiff("1\n2\n3", "0\n2\n3"),
            "@@ -1,3 +1,3 @@\n"
            "-1\n"
            "+0\n"
            " 2\n"
            " 3\n"
            "\\ No newline at end of file\n");
}

TEST(UnifiedDiffTest, ChangesFarApartGiveTwoHunks) {
  std::string new_text = Numbered(20);
  new_text.replace(new_text.find("\n2\n") + 1, 1, "X");
  new_text.replace(new_text.find("\n19\n") + 1, 2, "Y");
  DiffStat stat;
  EXPECT_EQ(UnifiedDiff(Numbered(20), new_text, 3, &stat),
            "@@ -1,5 +1,5 @@\n"
            " 1\n"
            "-2\n"
            "+X\n"
            " 3\n"
            " 4\n"
            " 5\n"
            "@@ -16,5 +16,5 @@\n"
            " 16\n"
            " 17\n"
            " 18\n"
            "-19\n"
            "+Y\n"
            " 20\n");
  EXPECT_EQ(stat.added, 2u);
  EXPECT_EQ(stat.removed, 2u);
}

TEST(UnifiedDiffTest, ChangesFourLinesApartShareAHunk) {
  EXPECT_EQ(UnifiedDiff(Numbered(12), "1\n2\nX\n4\n5\n6\n7\nY\n9\n10\n11\n12\n"),
            "@@ -1,11 +1,11 @@\n"
            " 1\n"
            " 2\n"
            "-3\n"
            "+X\n"
            " 4\n"
            " 5\n"
            " 6\n"
            " 7\n"
            "-8\n"
            "+Y\n"
            " 9\n"
            " 10\n"
            " 11\n");
}

TEST(UnifiedDiffTest, HunksMergeOnlyWhenTheirContextTouches) {
  // Six unchanged lines between the changes: the two contexts of three meet, one hunk (as git).
  std::string six_apart = Numbered(16);
  six_apart.replace(six_apart.find("\n3\n") + 1, 1, "X");
  six_apart.replace(six_apart.find("\n10\n") + 1, 2, "Y");
  EXPECT_EQ(UnifiedDiff(Numbered(16), six_apart),
            "@@ -1,13 +1,13 @@\n"
            " 1\n"
            " 2\n"
            "-3\n"
            "+X\n"
            " 4\n"
            " 5\n"
            " 6\n"
            " 7\n"
            " 8\n"
            " 9\n"
            "-10\n"
            "+Y\n"
            " 11\n"
            " 12\n"
            " 13\n");
  // Seven: two hunks, as git prints them.
  std::string seven_apart = Numbered(16);
  seven_apart.replace(seven_apart.find("\n3\n") + 1, 1, "X");
  seven_apart.replace(seven_apart.find("\n11\n") + 1, 2, "Y");
  EXPECT_EQ(UnifiedDiff(Numbered(16), seven_apart),
            "@@ -1,6 +1,6 @@\n"
            " 1\n"
            " 2\n"
            "-3\n"
            "+X\n"
            " 4\n"
            " 5\n"
            " 6\n"
            "@@ -8,7 +8,7 @@\n"
            " 8\n"
            " 9\n"
            " 10\n"
            "-11\n"
            "+Y\n"
            " 12\n"
            " 13\n"
            " 14\n");
}

TEST(UnifiedDiffTest, Stat) {
  const std::string old_text = "a\nb\nc\nd\n";
  const std::string new_text = "a\nB\nc\nd\ne\nf\n";
  DiffStat stat;
  const std::string diff = UnifiedDiff(old_text, new_text, 3, &stat);
  EXPECT_EQ(stat.added, 3u);
  EXPECT_EQ(stat.removed, 1u);
  EXPECT_EQ(stat.added, CountTagged(diff, '+'));
  EXPECT_EQ(stat.removed, CountTagged(diff, '-'));
  const DiffStat counted = CountChangedLines(old_text, new_text);
  EXPECT_EQ(counted.added, 3u);
  EXPECT_EQ(counted.removed, 1u);
  // A minimal diff: moving one line is one removal and one addition.
  const DiffStat moved = CountChangedLines("1\n2\n3\n4\n5\n", "2\n3\n4\n5\n1\n");
  EXPECT_EQ(moved.added, 1u);
  EXPECT_EQ(moved.removed, 1u);
}

TEST(UnifiedDiffTest, HostileInputFinishesQuickly) {
  std::string old_text;
  std::string new_text;
  for (int i = 0; i < 50000; ++i) {
    old_text += "old line " + std::to_string(i) + "\n";
    new_text += "new line " + std::to_string(i) + "\n";
  }
  DiffStat stat;
  const std::string diff = UnifiedDiff(old_text, new_text, 3, &stat);
  const DiffStat counted = CountChangedLines(old_text, new_text);
  EXPECT_EQ(stat.added, 50000u);
  EXPECT_EQ(stat.removed, 50000u);
  EXPECT_EQ(counted.added, 50000u);
  EXPECT_EQ(counted.removed, 50000u);
  EXPECT_EQ(diff.rfind("@@ -1,50000 +1,50000 @@\n-old line 0\n", 0), 0u);
  EXPECT_EQ(ApplyHunks(old_text, diff), new_text);
}

TEST(UnifiedDiffTest, GivingUpKeepsTheCommonEndsAndStaysCorrect) {
  // Far past kMaxEditDistance between a shared head and tail: one hunk replacing the middle.
  std::string old_text = "head\n";
  std::string new_text = "head\n";
  for (int i = 0; i < 3000; ++i) {
    old_text += "o" + std::to_string(i) + "\n";
    new_text += "n" + std::to_string(i) + "\n";
  }
  old_text += "tail";
  new_text += "tail";
  DiffStat stat;
  const std::string diff = UnifiedDiff(old_text, new_text, 3, &stat);
  EXPECT_EQ(stat.added, 3000u);
  EXPECT_EQ(stat.removed, 3000u);
  EXPECT_EQ(diff.rfind("@@ -1,3002 +1,3002 @@\n head\n", 0), 0u);
  EXPECT_EQ(ApplyHunks(old_text, diff), new_text);
}

TEST(UnifiedDiffTest, RepetitiveInputStaysMinimalBelowTheCap) {
  // Many equal lines make long snakes on many diagonals; the diff is still minimal.
  std::string old_text;
  std::string new_text;
  for (int i = 0; i < 20000; ++i) {
    old_text += i % 10 == 0 ? "b\n" : "a\n";
    new_text += i % 7 == 0 ? "b\n" : "a\n";
  }
  DiffStat stat;
  const std::string diff = UnifiedDiff(old_text, new_text, 3, &stat);
  EXPECT_EQ(ApplyHunks(old_text, diff), new_text);
  EXPECT_LT(stat.added + stat.removed, static_cast<uint64_t>(kMaxEditDistance));  // not given up
  EXPECT_EQ(stat.added, CountTagged(diff, '+'));
  EXPECT_EQ(stat.removed, CountTagged(diff, '-'));
}

TEST(UnifiedDiffTest, RandomDiffsApplyAndAreMinimal) {
  std::mt19937 rng(12345);
  auto random_text = [&rng]() {
    static constexpr std::string_view kWords[] = {"a", "b", "c", "d", ""};
    std::string text;
    const int lines = static_cast<int>(rng() % 16);
    for (int i = 0; i < lines; ++i) {
      text += kWords[rng() % std::size(kWords)];
      text += '\n';
    }
    // Sometimes end without a newline, sometimes with a partial line.
    if (!text.empty() && rng() % 4 == 0) text.pop_back();
    if (rng() % 6 == 0) text += kWords[rng() % 4];
    return text;
  };
  for (int round = 0; round < 200; ++round) {
    std::string old_text = random_text();
    std::string new_text = random_text();
    if (round % 3 == 0) {
      // A small edit of the old text, the common case.
      new_text = old_text;
      const size_t at = new_text.empty() ? 0 : rng() % new_text.size();
      new_text.insert(at, random_text());
    }
    const int context = static_cast<int>(rng() % 5);
    SCOPED_TRACE(::testing::Message() << "round " << round << " context " << context << "\nold:\n"
                                      << old_text << "\nnew:\n"
                                      << new_text);
    DiffStat stat;
    const std::string diff = UnifiedDiff(old_text, new_text, context, &stat);
    EXPECT_EQ(diff.empty(), old_text == new_text);
    EXPECT_EQ(ApplyHunks(old_text, diff), new_text) << diff;
    EXPECT_EQ(stat.added, CountTagged(diff, '+'));
    EXPECT_EQ(stat.removed, CountTagged(diff, '-'));
    const DiffStat counted = CountChangedLines(old_text, new_text);
    EXPECT_EQ(counted.added, stat.added);
    EXPECT_EQ(counted.removed, stat.removed);
    // Myers finds a shortest edit script: everything outside a longest common subsequence.
    const std::vector<std::string> old_lines = Lines(old_text);
    const std::vector<std::string> new_lines = Lines(new_text);
    const size_t lcs = Lcs(old_lines, new_lines);
    EXPECT_EQ(stat.removed, old_lines.size() - lcs);
    EXPECT_EQ(stat.added, new_lines.size() - lcs);
  }
}

}  // namespace
}  // namespace airlock
