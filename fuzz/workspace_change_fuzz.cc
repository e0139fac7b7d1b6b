// Fuzz target: the records a guest sends about its workspace (`/proc/1/exe workspace-diff`),
// fed to the host's parser in arbitrary pieces, then rendered as the CLI renders them. Whatever
// the parser accepts must hold only clean relative paths and contents within the caps, and a
// stream it refuses stays refused. The first byte picks where the stream is cut.
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/workspace_change.h"
#include "src/workspace/unified_diff.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t cut = data[0];
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  cut = bytes.empty() ? 0 : cut % (bytes.size() + 1);
  airlock::WorkspaceChangeParser parser;
  std::vector<airlock::WorkspaceChange> changes;
  std::string error;
  bool ok = parser.Feed(bytes.substr(0, cut), &changes, &error) &&
            parser.Feed(bytes.substr(cut), &changes, &error);
  if (!ok) {
    std::vector<airlock::WorkspaceChange> more;
    Check(!parser.Feed("", &more, &error) && more.empty());
  }
  for (const airlock::WorkspaceChange& c : changes) {
    Check(airlock::IsCleanRelativePath(c.path));
    Check(c.old_content.size() <= airlock::kMaxDiffContent);
    Check(c.new_content.size() <= airlock::kMaxDiffContent);
    Check(c.kind != airlock::ChangeKind::kAdded || c.old_mode == 0);
    Check(c.kind != airlock::ChangeKind::kDeleted || c.new_mode == 0);
    // What the CLI does with the contents must terminate and stay bounded.
    airlock::DiffStat stat;
    std::string diff = airlock::UnifiedDiff(c.old_content, c.new_content, 3, &stat);
    Check(diff.empty() == (c.old_content == c.new_content));
  }
  return 0;
}
