// What the guest reports about its workspace: one record per path that differs between the
// workspace's base (the read-only lower layer captured from the host) and what the session
// made of it (the overlay's upper layer). The guest agent writes them
// (src/guest/guest_workspace.cc), the host reads them (airlockd, then the CLI renders a diff).
//
// Shared by host and guest, so it depends on the standard library only (and channel_frame.h
// for the payload codec). Everything the host parses came from a hostile guest: records, paths,
// modes and contents are checked against caps before anything is kept.
//
// Stream format: records, each u32 length (at most kMaxChangeRecord) then a payload of
//   u32 kind, string path, u32 old_mode, u32 new_mode, u64 old_size, u64 new_size,
//   string old_target, string new_target, u32 flags, string old_content,
//   string new_content, string new_sha256
// (string = u32 length + bytes; little-endian, as in channel_frame.h).
#ifndef AIRLOCK_COMMON_WORKSPACE_CHANGE_H_
#define AIRLOCK_COMMON_WORKSPACE_CHANGE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace airlock {

// Where the session sees its workspace.
inline constexpr char kGuestWorkspaceDir[] = "/workspace";
// The agent's own binary inside the guest, and the argument that makes it list the changes of
// the workspace as records on its stdout (it runs as a command: `/proc/1/exe workspace-diff`).
inline constexpr char kGuestAgentPath[] = "/proc/1/exe";
inline constexpr char kWorkspaceDiffCommand[] = "workspace-diff";

// Largest content of one side of one file included in a record; larger files are summarized.
inline constexpr uint32_t kMaxDiffContent = 1 << 20;
// Largest record: two contents plus paths, link targets and fixed fields.
inline constexpr uint32_t kMaxChangeRecord = 2 * kMaxDiffContent + 64 * 1024;
// Longest path or link target in a record.
inline constexpr uint32_t kMaxChangePath = 4096;

enum class ChangeKind : uint32_t {
  kAdded = 0,     // only in the session: old_mode is 0
  kModified = 1,  // both sides, content, link target or permission bits differ
  kDeleted = 2,   // only in the base: new_mode is 0
};

// Flags of a record.
inline constexpr uint32_t kChangeOldContent = 1;  // old_content holds the base's whole file
inline constexpr uint32_t kChangeNewContent = 2;  // new_content holds the session's whole file
inline constexpr uint32_t kChangeBinary = 4;      // a side holds a NUL byte: not shown as text
inline constexpr uint32_t kChangeTooLarge = 8;    // a side is over kMaxDiffContent
inline constexpr uint32_t kChangeOmitted = 16;    // the guest's budget for content ran out
inline constexpr uint32_t kChangeFlagsMask = 31;

struct WorkspaceChange {
  ChangeKind kind = ChangeKind::kAdded;
  std::string path;       // relative to /workspace: "src/main.c"
  uint32_t old_mode = 0;  // st_mode (type and permissions) in the base; 0: absent
  uint32_t new_mode = 0;  // st_mode in the session; 0: absent
  uint64_t old_size = 0;
  uint64_t new_size = 0;
  std::string old_target;  // symlinks: the target, verbatim
  std::string new_target;
  uint32_t flags = 0;
  std::string old_content;  // with kChangeOldContent
  std::string new_content;  // with kChangeNewContent
  std::string new_sha256;   // regular files in the session: 32 bytes; else empty
};

// One record, length prefix included. Contents must be within the caps.
std::string EncodeWorkspaceChange(const WorkspaceChange& change);

// A path as records carry them: relative, '/'-separated, no empty, "." or ".." component, no
// NUL, at most kMaxChangePath bytes.
bool IsCleanRelativePath(std::string_view path);

// Reads records from a byte stream as it arrives. Not thread-safe; once it has failed it stays
// failed.
class WorkspaceChangeParser {
 public:
  // Appends each whole record to out. False (with *error) if the stream is malformed.
  bool Feed(std::string_view bytes, std::vector<WorkspaceChange>* out, std::string* error);
  // True if no partial record is pending (the stream may end here).
  bool AtRecordBoundary() const { return pending_.empty() && !failed_; }

 private:
  bool ParseRecord(std::string_view payload, WorkspaceChange* change, std::string* error);
  std::string pending_;
  bool failed_ = false;
};

}  // namespace airlock

#endif  // AIRLOCK_COMMON_WORKSPACE_CHANGE_H_
