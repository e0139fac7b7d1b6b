// VM snapshots on disk (DESIGN.md decision 6). A snapshot is a directory of these files:
//
//   state          QEMU's device stream (Vm::SaveState: QMP stop + migrate to a descriptor passed
//                  over the QMP socket), with the RAM in it unless `memory` holds it
//   memory         the guest's RAM as a sparse file, for a VM whose RAM was a shared memfd
//                  (templates): a restore maps it copy-on-write instead of copying it through
//                  the stream, so it costs the same for any RAM size and every VM restored from
//                  it shares the pages it has not written
//   disk.ext4      the session's writable disk as it was at that moment (sparse)
//   manifest.json  what it is (image, kernel, shape) and each file's size and digest, signed
//                  with the host key (snapshot_manifest.h)
//
// It is written as DIR.tmp (0700; files 0600, fsynced), then renamed to DIR and the parent
// fsynced, so a crash leaves either no snapshot or a whole one. A snapshot is restored only after
// OpenSnapshot has checked the HMAC and every file: a changed or truncated file is refused.
#ifndef AIRLOCK_VM_SNAPSHOT_H_
#define AIRLOCK_VM_SNAPSHOT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/common/unique_fd.h"
#include "src/vm/snapshot_manifest.h"
#include "src/vm/vm_driver.h"

namespace airlock {

inline constexpr char kSnapshotStateFile[] = "state";
inline constexpr char kSnapshotMemoryFile[] = "memory";
inline constexpr char kSnapshotDiskFile[] = "disk.ext4";
inline constexpr char kSnapshotManifestFile[] = "manifest.json";

// The files of a snapshot as OpenSnapshot checked them (read-only, at offset 0).
struct SnapshotFiles {
  UniqueFd state;
  UniqueFd disk;
  // The guest's RAM when the snapshot keeps it apart from the state, holding the bytes that were
  // checked (VmConfig::memory_fd): a memfd sealed against every change that restores of one
  // snapshot share, or for kResume the memory file itself. Null when the state carries the RAM.
  std::shared_ptr<const UniqueFd> memory;
  // kResume: `memory` is the session's own file, which the VM maps shared and goes on writing
  // (VmConfig::memory_holds_ram), so that its next pause writes only what the guest changed.
  bool memory_own = false;
};

// Quiesces the channel, saves the VM's state and its disk into dir (the disk's inode becomes
// the snapshot's, a hard link: for a VM that will not run again; so does a memory file the
// guest writes into, after an fsync, which writes only the pages it changed). `manifest` supplies
// the description (image, kernel, shape); its files are filled in. On success the guest is stopped
// (Continue it or destroy it); on failure nothing is left under dir and, if the guest was
// stopped, it is still stopped.
[[nodiscard]] absl::StatusOr<SnapshotManifest> TakeSnapshot(Vm& vm, int disk_fd,
                                                            const std::string& dir,
                                                            SnapshotManifest manifest,
                                                            const std::string& key);

// Who restores a snapshot, which decides how its memory file reaches the VMs.
enum class SnapshotUse {
  // Its own session, once, using it up (resume): the VM maps the checked memory file itself,
  // shared (nothing is copied; SnapshotFiles::memory_own), which is made openable by the VM's
  // uid for that.
  kResume,
  // Several VMs at once (fork): the memory is loaded into a sealed memfd they share.
  kFork,
  // Many VMs over time (a template): the sealed memfd is also kept for later restores.
  kTemplate,
};

// The snapshot of a VM that goes on running, for the forks made of it at once: the state (RAM
// included, unless the VM's RAM is a shared memfd, whose copy becomes `memory`) in a memfd, and
// a copy of the disk as an unnamed file in scratch_dir. Nothing is named, fsynced or signed: it
// never leaves this process and is gone with its last descriptor. On success the guest is
// stopped (Continue it); on failure it may be stopped too.
[[nodiscard]] absl::StatusOr<SnapshotFiles> TakeForkSnapshot(Vm& vm, int disk_fd,
                                                             const std::string& scratch_dir);

// A memfd holding a guest's RAM for VMs that map it privately: sealed against every change,
// then its holes allocated (FillGuestMemory) so that no VM is charged for the pages it reads.
[[nodiscard]] absl::Status SealGuestMemory(int memfd);
// Allocates every block of a resumed session's memory file (SnapshotFiles::memory_own) before
// its VM maps it: a guest that writes a page of its RAM never finds the host's disk full (the
// VM would die of SIGBUS). The blocks the guest leaves unwritten are given back at its pause.
[[nodiscard]] absl::Status ReserveGuestMemory(int memory_fd);
[[nodiscard]] absl::Status FillGuestMemory(int memfd, off_t size);

// Reads and authenticates dir's manifest and checks every file; the error says what is wrong.
// With `files`, the state and disk it checked: load those, never the paths again. A memory file
// is handed over as `use` says; for kTemplate the last few loaded are kept (by digest), so
// restoring a template again costs no read.
[[nodiscard]] absl::StatusOr<SnapshotManifest> OpenSnapshot(const std::string& dir,
                                                            const std::string& key,
                                                            SnapshotFiles* files = nullptr,
                                                            SnapshotUse use = SnapshotUse::kFork);

// Describes each of `names` in dir and adds it to manifest->files (after the files it holds
// already), then writes the signed manifest as dir's manifest file (0600, atomically).
// writers_ended: as for DescribeFile.
[[nodiscard]] absl::Status WriteSignedManifest(const std::string& dir,
                                               const std::vector<const char*>& names,
                                               const std::string& key, SnapshotManifest* manifest,
                                               bool writers_ended = false);

// A new open file of its own (a private offset) on the same file as fd, for reading or for
// writing too; never a path lookup.
[[nodiscard]] absl::StatusOr<UniqueFd> ReopenFile(int fd, bool writable);

// Makes an independent copy of a disk in new_fd (empty, writable): a reflink where the
// filesystem can share blocks, else a copy of the data regions only (holes stay holes).
[[nodiscard]] absl::Status CopyDisk(int from_fd, int new_fd);

// An unnamed (O_TMPFILE) file in dir for a VM's private disk: it vanishes with its last
// descriptor.
[[nodiscard]] absl::StatusOr<UniqueFd> UnnamedFile(const std::string& dir);

}  // namespace airlock

#endif  // AIRLOCK_VM_SNAPSHOT_H_
