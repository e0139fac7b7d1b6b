// The manifest of a VM snapshot (DESIGN.md decision 6), and the host key that authenticates it.
//
// A snapshot is a directory of files (the device+RAM stream, the writable disk, ...) plus
// manifest.json naming each file with its size and sha256, the VM's shape, and an HMAC-SHA256
// over all of it with a host key that never leaves the host (0600, created on first use). A
// snapshot is loaded only after the HMAC and every file's hash check out, so a flipped byte or a
// truncated file is refused with a clear error, never loaded. The manifest's text is untrusted
// input (fuzz/snapshot_manifest_fuzz.cc): it is parsed once, bounded, and verified before use.
#ifndef AIRLOCK_VM_SNAPSHOT_MANIFEST_H_
#define AIRLOCK_VM_SNAPSHOT_MANIFEST_H_

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/common/unique_fd.h"

namespace airlock {

inline constexpr int kSnapshotFormatVersion = 1;
inline constexpr size_t kMaxManifestBytes = 64 * 1024;
inline constexpr size_t kMaxSnapshotFiles = 16;
inline constexpr size_t kHostKeyBytes = 32;

struct SnapshotFile {
  std::string name;  // a plain file name in the snapshot directory: [a-z0-9._-], no "/"
  uint64_t size = 0;
  std::string sha256;  // hex
};

struct SnapshotManifest {
  int version = kSnapshotFormatVersion;
  std::string session_id;
  std::string image_digest;
  std::string kernel_release;
  std::string qemu_version;
  std::string accelerator;
  uint32_t vcpus = 0;
  uint64_t memory_bytes = 0;
  int64_t created_unix_ms = 0;
  std::vector<SnapshotFile> files;
};

// Reads the host key at path, creating it (random, 0600, written atomically) if it is missing.
[[nodiscard]] absl::StatusOr<std::string> LoadOrCreateHostKey(const std::string& path);

// The manifest as JSON with its "hmac" field.
std::string SignManifest(const SnapshotManifest& manifest, const std::string& key);

// Parses and authenticates a manifest; any shape, size, name or HMAC problem is an error.
[[nodiscard]] absl::StatusOr<SnapshotManifest> VerifyManifest(const std::string& text,
                                                              const std::string& key);

// The digest of a (sparse) file: SHA-256 over each data region's offset, length and bytes, then
// the file's size. Holes are not read, so a 1 GiB disk with 30 MiB of data hashes 30 MiB.
[[nodiscard]] absl::StatusOr<std::string> SparseSha256(int fd);
// The bytes SparseSha256 has read in this process.
uint64_t SnapshotBytesHashed();

// Describes a file of dir for the manifest (size and SparseSha256). With writers_ended (every
// process that wrote the file has exited, and it was fsynced), it is also remembered as verified
// however new it is (see VerifySnapshotFiles), so that opening the snapshot soon after does not
// read it again while it keeps its identity.
[[nodiscard]] absl::StatusOr<SnapshotFile> DescribeFile(const std::string& dir,
                                                        const std::string& name,
                                                        bool writers_ended = false);

// Hashed while a writer still ran (a stopped VM's files at a pause), a file is remembered once
// every process that could write it has ended: call this then, and the files of dir that kept
// their identity since their hash began are verified, however new they are. Only on a
// filesystem where a write through a mapping changes the mtime (ext4, XFS, Btrfs; not tmpfs).
void WritersEnded(const std::string& dir);

// After directory `from` was renamed to `to`: what was remembered (or awaits WritersEnded) for
// files in from is for the same files in to.
void MoveVerifiedFiles(const std::string& from, const std::string& to);

// Opens a file the manifest names (read-only, never through a symlink) and checks that it is a
// regular file of the manifest's size; DATA_LOSS saying what is wrong otherwise.
[[nodiscard]] absl::StatusOr<UniqueFd> OpenSnapshotFile(const std::string& dir,
                                                        const SnapshotFile& expected,
                                                        struct stat* st);

// Checks that every file the manifest names is in dir with its size and hash. A file this process
// verified before and that has not changed since (same inode, size, mtime and ctime) is not read
// again, so restoring the same template many times hashes it once. Files changed in the last
// two seconds are always read (a write in the same clock tick as the hash would leave the times
// as they were), except those DescribeFile remembered once their writers had ended. With `opened`,
// the descriptors the files were checked through (read-only, at offset 0) are returned by name: use
// them, never the paths again, so that what is loaded is what was checked.
[[nodiscard]] absl::Status VerifySnapshotFiles(const std::string& dir,
                                               const SnapshotManifest& manifest,
                                               std::map<std::string, UniqueFd>* opened = nullptr);

}  // namespace airlock

#endif  // AIRLOCK_VM_SNAPSHOT_MANIFEST_H_
