// Myers' O(ND) greedy line diff, bounded for hostile input, printed as unified diff hunks.
#include "src/workspace/unified_diff.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace airlock {
namespace {

// Bounds the total time of the search, which is O((N + M) * D) in the worst case: each diagonal's
// snakes can walk the whole input. A search past it gives up like one past kMaxEditDistance.
constexpr uint64_t kMaxWork = uint64_t{1} << 27;

constexpr std::string_view kNoNewline = "\\ No newline at end of file\n";

// The lines of `text`, each with its "\n" (the last may lack one). "" has no lines.
std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    lines.push_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

// Replaces each line with an id, equal ids for equal lines, so that the search compares ints.
// Sorting by (hash, content) rather than using a hash table keeps crafted hash collisions from
// costing more than the comparisons of an ordinary sort.
void InternLines(std::span<const std::string_view> old_lines,
                 std::span<const std::string_view> new_lines, std::vector<int32_t>* old_ids,
                 std::vector<int32_t>* new_ids) {
  struct Entry {
    size_t hash;
    std::string_view line;
    size_t index;  // into old_lines, then new_lines
  };
  std::vector<Entry> entries;
  entries.reserve(old_lines.size() + new_lines.size());
  const std::hash<std::string_view> hasher;
  for (std::string_view line : old_lines) entries.push_back({hasher(line), line, entries.size()});
  for (std::string_view line : new_lines) entries.push_back({hasher(line), line, entries.size()});
  std::sort(entries.begin(), entries.end(), [](const Entry& x, const Entry& y) {
    if (x.hash != y.hash) return x.hash < y.hash;
    return x.line < y.line;
  });
  old_ids->resize(old_lines.size());
  new_ids->resize(new_lines.size());
  int32_t id = -1;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i == 0 || entries[i].hash != entries[i - 1].hash ||
        entries[i].line != entries[i - 1].line) {
      ++id;
    }
    const size_t index = entries[i].index;
    if (index < old_lines.size()) {
      (*old_ids)[index] = id;
    } else {
      (*new_ids)[index - old_lines.size()] = id;
    }
  }
}

// Marks the lines of a shortest edit script from a to b: a_changed[x] for each deleted a[x],
// b_changed[y] for each inserted b[y]. Returns false, marking nothing, when the edit distance
// exceeds kMaxEditDistance or the search exceeds kMaxWork.
//
// Row d of the trace holds, for each diagonal k = x - y in -d, -d + 2, ..., d, the furthest x a
// path with d edits reaches on it; the rows are kept to walk the path back, which is why memory is
// O(D^2). Points past the end of a or b are allowed (no line matches there) and do no harm: a path
// through them never comes back to (n, m), and a shorter one exists to any point they dominate.
bool MyersDiff(const std::vector<int32_t>& a, const std::vector<int32_t>& b, char* a_changed,
               char* b_changed) {
  const int64_t n = static_cast<int64_t>(a.size());
  const int64_t m = static_cast<int64_t>(b.size());
  // x stays below n + m + 1 and fits the int32_t trace.
  if (n + m >= std::numeric_limits<int32_t>::max() / 2) return false;
  const int64_t max_d = std::min<int64_t>(n + m, kMaxEditDistance);
  auto row_start = [](int64_t d) { return static_cast<size_t>(d * (d + 1) / 2); };

  std::vector<int32_t> trace;
  // All at once, so that growing never holds two copies; pages the search does not reach are
  // never touched.
  trace.reserve(row_start(max_d + 1));
  uint64_t work = 0;
  int64_t final_d = -1;
  for (int64_t d = 0; d <= max_d && final_d < 0; ++d) {
    trace.resize(row_start(d + 1));
    int32_t* row = trace.data() + row_start(d);
    const int32_t* prev = d > 0 ? trace.data() + row_start(d - 1) : nullptr;
    for (int64_t k = -d; k <= d; k += 2) {
      // Diagonal k - 1 of row d - 1 sits at index i - 1, diagonal k + 1 at index i.
      const int64_t i = (k + d) / 2;
      int64_t x;
      if (d == 0) {
        x = 0;
      } else if (k == -d || (k != d && prev[i - 1] < prev[i])) {
        x = prev[i];  // down: insert b[y - 1]
      } else {
        x = prev[i - 1] + 1;  // right: delete a[x - 1]
      }
      int64_t y = x - k;
      const int64_t snake_start = x;
      while (x < n && y < m && a[x] == b[y]) {
        ++x;
        ++y;
      }
      work += 1 + static_cast<uint64_t>(x - snake_start);
      row[i] = static_cast<int32_t>(x);
      if (x >= n && y >= m) {
        final_d = d;
        break;
      }
    }
    if (work > kMaxWork) return false;
  }
  if (final_d < 0) return false;

  // Walk back from (n, m), making the same choice of predecessor the search made.
  int64_t x = n;
  int64_t y = m;
  for (int64_t d = final_d; d > 0; --d) {
    const int32_t* prev = trace.data() + row_start(d - 1);
    const int64_t k = x - y;
    const int64_t i = (k + d) / 2;
    const bool down = k == -d || (k != d && prev[i - 1] < prev[i]);
    const int64_t prev_k = down ? k + 1 : k - 1;
    const int64_t prev_x = prev[down ? i : i - 1];
    const int64_t prev_y = prev_x - prev_k;
    if (down) {
      b_changed[prev_y] = 1;
    } else {
      a_changed[prev_x] = 1;
    }
    x = prev_x;
    y = prev_y;
  }
  return true;
}

// Which lines each side does not share with the other: 1 for a removed old line / an added new one.
struct LineChanges {
  std::vector<char> removed;
  std::vector<char> added;
};

LineChanges ComputeChanges(const std::vector<std::string_view>& old_lines,
                           const std::vector<std::string_view>& new_lines) {
  LineChanges changes;
  changes.removed.assign(old_lines.size(), 0);
  changes.added.assign(new_lines.size(), 0);

  // Most edits touch a small part of a file: trimming what is common at both ends leaves the search
  // only that part, and compares the rest once.
  size_t prefix = 0;
  while (prefix < old_lines.size() && prefix < new_lines.size() &&
         old_lines[prefix] == new_lines[prefix]) {
    ++prefix;
  }
  size_t suffix = 0;
  while (suffix < old_lines.size() - prefix && suffix < new_lines.size() - prefix &&
         old_lines[old_lines.size() - 1 - suffix] == new_lines[new_lines.size() - 1 - suffix]) {
    ++suffix;
  }
  const size_t old_count = old_lines.size() - prefix - suffix;
  const size_t new_count = new_lines.size() - prefix - suffix;
  char* removed = changes.removed.data() + prefix;
  char* added = changes.added.data() + prefix;
  if (old_count == 0 || new_count == 0) {
    std::fill(removed, removed + old_count, 1);
    std::fill(added, added + new_count, 1);
    return changes;
  }

  std::vector<int32_t> old_ids;
  std::vector<int32_t> new_ids;
  InternLines(std::span(old_lines).subspan(prefix, old_count),
              std::span(new_lines).subspan(prefix, new_count), &old_ids, &new_ids);
  if (!MyersDiff(old_ids, new_ids, removed, added)) {
    // Too different to search: replace the whole middle, which is still a correct diff.
    std::fill(removed, removed + old_count, 1);
    std::fill(added, added + new_count, 1);
  }
  return changes;
}

DiffStat CountOf(const LineChanges& changes) {
  DiffStat stat;
  stat.removed =
      static_cast<uint64_t>(std::count(changes.removed.begin(), changes.removed.end(), 1));
  stat.added = static_cast<uint64_t>(std::count(changes.added.begin(), changes.added.end(), 1));
  return stat;
}

// A run of removed old lines and added new lines between unchanged ones (0-based line indexes).
struct Block {
  size_t old_start;
  size_t old_count;
  size_t new_start;
  size_t new_count;
};

std::vector<Block> BlocksOf(const LineChanges& changes) {
  std::vector<Block> blocks;
  const size_t n = changes.removed.size();
  const size_t m = changes.added.size();
  size_t i = 0;
  size_t j = 0;
  while (i < n || j < m) {
    if ((i < n && changes.removed[i]) || (j < m && changes.added[j])) {
      Block block{i, 0, j, 0};
      while (i < n && changes.removed[i]) ++i;
      while (j < m && changes.added[j]) ++j;
      block.old_count = i - block.old_start;
      block.new_count = j - block.new_start;
      blocks.push_back(block);
    } else {
      // An unchanged line on each side: they pair up.
      ++i;
      ++j;
    }
  }
  return blocks;
}

// One side of a hunk header; `start` is the 0-based index of its first line.
void AppendRange(std::string* out, size_t start, size_t count) {
  // An empty range names the line before it, as GNU diff and git do.
  out->append(std::to_string(count == 0 ? start : start + 1));
  if (count != 1) {
    out->push_back(',');
    out->append(std::to_string(count));
  }
}

void AppendLine(std::string* out, char tag, std::string_view line) {
  out->push_back(tag);
  out->append(line);
  // Only a text's last line can lack "\n"; an unchanged such line is the last of both texts.
  if (line.empty() || line.back() != '\n') {
    out->push_back('\n');
    out->append(kNoNewline);
  }
}

}  // namespace

std::string UnifiedDiff(std::string_view old_text, std::string_view new_text, int context,
                        DiffStat* stat) {
  const std::vector<std::string_view> old_lines = SplitLines(old_text);
  const std::vector<std::string_view> new_lines = SplitLines(new_text);
  const LineChanges changes = ComputeChanges(old_lines, new_lines);
  if (stat != nullptr) *stat = CountOf(changes);

  const size_t ctx = static_cast<size_t>(std::max(context, 0));
  const std::vector<Block> blocks = BlocksOf(changes);
  std::string out;
  size_t first = 0;
  while (first < blocks.size()) {
    // Blocks whose context would touch or overlap share a hunk, as in git (xdl_get_hunk).
    size_t last = first;
    while (last + 1 < blocks.size() &&
           blocks[last + 1].old_start - (blocks[last].old_start + blocks[last].old_count) <=
               2 * ctx) {
      ++last;
    }
    // Unchanged lines pair up, so the context runs are as long on both sides.
    const Block& head = blocks[first];
    const Block& tail = blocks[last];
    const size_t before = std::min(ctx, head.old_start);
    const size_t tail_old_end = tail.old_start + tail.old_count;
    const size_t after = std::min(ctx, old_lines.size() - tail_old_end);
    const size_t old_begin = head.old_start - before;
    const size_t old_end = tail_old_end + after;
    const size_t new_begin = head.new_start - before;
    const size_t new_end = tail.new_start + tail.new_count + after;

    out.append("@@ -");
    AppendRange(&out, old_begin, old_end - old_begin);
    out.append(" +");
    AppendRange(&out, new_begin, new_end - new_begin);
    out.append(" @@\n");
    size_t i = old_begin;
    for (size_t b = first; b <= last; ++b) {
      const Block& block = blocks[b];
      while (i < block.old_start) AppendLine(&out, ' ', old_lines[i++]);
      for (size_t k = 0; k < block.old_count; ++k) {
        AppendLine(&out, '-', old_lines[block.old_start + k]);
      }
      for (size_t k = 0; k < block.new_count; ++k) {
        AppendLine(&out, '+', new_lines[block.new_start + k]);
      }
      i = block.old_start + block.old_count;
    }
    while (i < old_end) AppendLine(&out, ' ', old_lines[i++]);
    first = last + 1;
  }
  return out;
}

DiffStat CountChangedLines(std::string_view old_text, std::string_view new_text) {
  return CountOf(ComputeChanges(SplitLines(old_text), SplitLines(new_text)));
}

}  // namespace airlock
