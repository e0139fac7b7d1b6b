// Captures a project directory into a read-only ext4 image for a session's /workspace
// (DESIGN decision 13: captured, not shared). Runs in the caller's own process with the caller's
// own rights (the CLI), so it can never read what its user could not.
//
// The directory is walked with libarchive's disk reader (symlinks not followed, other mounts
// not entered), leaving out what the project's .airlockignore names (see ignore_rules.h) and,
// before it, the files that hold secrets by convention (kSecretFilePatterns: .env files, which
// an .airlockignore line `!.env` takes in again); the .git directory is kept, but a
// .git/config that holds credentials (a remote URL with a password, an http.extraHeader) is
// refused, since the guest could read them. Files become inodes of a new ext4 built with libext2fs
// (Ext4Writer): nothing is unpacked, copied or linked anywhere on the host. Symlinks are stored
// verbatim and never followed; sockets, fifos and devices are left out. Everything is owned by root
// in the image; permission bits are kept (set-id bits dropped).
//
// Alongside the image comes the base manifest: each file's and symlink's path, mode, size and
// SHA-256 (or target), sorted by path, and a digest of it all (the tree digest). `sync` compares
// the project against it later.
#ifndef AIRLOCK_WORKSPACE_WORKSPACE_CAPTURE_H_
#define AIRLOCK_WORKSPACE_WORKSPACE_CAPTURE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "src/workspace/ignore_rules.h"

namespace airlock {

inline constexpr char kIgnoreFileName[] = ".airlockignore";
// Left out of every capture as if the .airlockignore began with these lines.
inline constexpr char kSecretFilePatterns[] =
    ".env\n.env.*\n!.env.example\n!.env.sample\n!.env.template\n!.env.dist\n";

// Why a .git/config's text holds credentials ("a remote URL with a password"); empty if not.
std::string GitConfigCredentials(std::string_view config);
// Default cap on the bytes of file content a workspace holds.
inline constexpr uint64_t kDefaultWorkspaceMaxBytes = 2ull << 30;
// Entries (files, directories, symlinks) a workspace may hold.
inline constexpr uint64_t kMaxWorkspaceEntries = 1000000;

struct BaseEntry {
  std::string path;    // relative: "src/main.c"
  uint32_t mode = 0;   // st_mode: S_IFREG or S_IFLNK, and permission bits
  uint64_t size = 0;   // regular files
  std::string sha256;  // regular files: hex
  std::string target;  // symlinks
};

struct WorkspaceTree {
  std::vector<BaseEntry> entries;  // files and symlinks, sorted by path
  uint64_t data_bytes = 0;         // file content
  uint64_t directories = 0;
  std::string digest;  // "sha256:<hex>" of the sorted entries
};

struct CapturedWorkspace {
  std::string root;    // the project directory, absolute
  std::string head;    // its HEAD commit when it is a git work tree; else ""
  std::string branch;  // its current branch ("main"); "" when detached or not git
  WorkspaceTree tree;
  uint64_t image_bytes = 0;  // the ext4's size
};

struct CaptureOptions {
  uint64_t max_bytes = kDefaultWorkspaceMaxBytes;
};

// Captures dir into a new ext4 at image_path (created or truncated; /proc/self/fd/N works).
// Errors say what to do: not a directory, over the cap (naming the largest directories and
// how to leave them out), a bad .airlockignore (its line), a file that changed while it was read.
[[nodiscard]] absl::StatusOr<CapturedWorkspace> CaptureWorkspace(const std::string& dir,
                                                                 const std::string& image_path,
                                                                 const CaptureOptions& options);

// Walks dir as CaptureWorkspace does and describes it, without writing an image (sync).
[[nodiscard]] absl::StatusOr<WorkspaceTree> DescribeWorkspace(const std::string& dir,
                                                              const CaptureOptions& options);

// The digest of a sorted list of entries (WorkspaceTree::digest).
std::string TreeDigest(const std::vector<BaseEntry>& entries);

// Human sizes for messages: "1.4 GiB", "300 MiB", "12 KiB", "17 bytes".
std::string HumanBytes(uint64_t bytes);

}  // namespace airlock

#endif  // AIRLOCK_WORKSPACE_WORKSPACE_CAPTURE_H_
