// Line diffs of two texts, printed as the hunks of a unified diff (what `git diff` prints for one
// file after its "---"/"+++" lines).
//
// Contract:
//  - Lines are compared by their full content, terminator included: "x" at the end of a text with
//    no final newline differs from "x\n". A side whose text does not end in "\n" gets the line
//    "\ No newline at end of file" after its last line, as git prints it.
//  - Hunk headers follow GNU diff / git: "@@ -start,count +start,count @@", ",1" omitted, and an
//    empty side names the line before it (0 for an empty file): adding a file is "@@ -0,0 +1,3 @@".
//    Changes whose context would touch or overlap (at most 2 * context unchanged lines apart) share
//    one hunk.
//  - Identical texts give "" and a zero DiffStat.
//  - The diff is always correct (applying it to old gives new) but is minimal only up to a bound:
//    the input may be hostile (about 1 MiB and 100k lines a side), so time and memory stay bounded
//    (O(lines + kMaxEditDistance^2) ints). Past the bound the lines between the common prefix and
//    suffix are reported as all removed and all added, in one hunk.
//
// The functions are pure and thread-safe.
#ifndef AIRLOCK_WORKSPACE_UNIFIED_DIFF_H_
#define AIRLOCK_WORKSPACE_UNIFIED_DIFF_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace airlock {

// Past this many inserted plus deleted lines (after trimming the common prefix and suffix) the
// search for a minimal diff stops; its memory grows with the square of this.
inline constexpr int kMaxEditDistance = 4000;

// Line counts of a diff.
struct DiffStat {
  uint64_t added = 0;
  uint64_t removed = 0;
};

// The hunks of the unified diff from old_text to new_text with `context` unchanged lines around
// each change (negative counts as 0). Counts go to *stat when it is not null.
std::string UnifiedDiff(std::string_view old_text, std::string_view new_text, int context = 3,
                        DiffStat* stat = nullptr);

// The counts of UnifiedDiff(old_text, new_text), without printing it.
DiffStat CountChangedLines(std::string_view old_text, std::string_view new_text);

}  // namespace airlock

#endif  // AIRLOCK_WORKSPACE_UNIFIED_DIFF_H_
