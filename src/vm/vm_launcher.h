// Starts a sandbox VM for an image, booted (a fresh writable session disk: an unnamed, sparse
// file formatted with libext2fs, so it vanishes with its last descriptor) or restored from a
// snapshot; returns once the agent is ready to run commands.
#ifndef AIRLOCK_VM_VM_LAUNCHER_H_
#define AIRLOCK_VM_VM_LAUNCHER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/common/host_paths.h"
#include "src/image/image_store.h"
#include "src/vm/snapshot.h"
#include "src/vm/snapshot_manifest.h"
#include "src/vm/vm_driver.h"

namespace airlock {

// The size every VM's workspace disk has (sparse): a session's captured project is an ext4 of
// at most this size, and a VM without one gets an empty disk of it, so that the guest of a
// template sees the same device a session's workspace is attached to later.
inline constexpr uint64_t kWorkspaceDiskBytes = 64ull << 30;

// A volume for a VM: its disk (a file of kVolumeDiskBytes) and where the guest mounts it.
struct LaunchVolume {
  std::string path;
  std::string mount_point;
  bool read_only = false;
};

struct LaunchOptions {
  uint32_t memory_mib = 512;
  uint32_t vcpus = 1;
  uint64_t disk_bytes = 1ull << 30;  // the writable layer
  std::string hostname;
  uint32_t pids = 0;        // processes of commands inside the guest; 0: no limit
  std::string host_cgroup;  // confine the VM process in a host cgroup of this name; empty: none
  // The session's workspace (an ext4 of kWorkspaceDiskBytes), mounted at /workspace in the
  // guest; empty: none (the VM gets an empty disk in its place).
  std::string workspace_path;
  // The session's volumes, by slot (at most kVolumeSlots).
  std::vector<LaunchVolume> volumes;
  // Where the VM keeps its sockets and record so that it outlives airlockd (see
  // VmConfig::runtime_dir); empty: it dies with this process.
  std::string runtime_dir;
  // Boot with the guest's RAM in a memfd of its own that the guest writes into, so that a
  // snapshot saves it as a file that restores map (templates); otherwise anonymous RAM.
  bool memory_as_file = false;
  bool background = false;  // VmConfig::background
  absl::Duration boot_timeout = absl::Seconds(60);
};

// Boots a fresh VM with a new, empty writable disk.
[[nodiscard]] absl::StatusOr<LaunchedVm> LaunchVm(VmDriver& driver, const HostPaths& paths,
                                                  const ImageInfo& image,
                                                  const LaunchOptions& options);

// Starts a VM from a snapshot that OpenSnapshot verified, loading its state from files.state
// (read through an open file of its own, so restores may share it) and mapping files.memory
// copy-on-write when the snapshot keeps the RAM apart, with `disk` (the VM's own copy of the
// snapshot's disk) as the writable disk. The options' memory and vCPUs must be the snapshot's;
// hostname, process limit and host cgroup are the new VM's own.
[[nodiscard]] absl::StatusOr<LaunchedVm> RestoreVm(VmDriver& driver, const HostPaths& paths,
                                                   const ImageInfo& image,
                                                   const SnapshotFiles& files,
                                                   const SnapshotManifest& manifest, UniqueFd disk,
                                                   const LaunchOptions& options);

// A snapshot whose state carries the guest's RAM (a VM with anonymous or private RAM was saved)
// rewritten to keep the RAM apart as a sparse `memory` file: restoring it maps the RAM instead
// of copying it through the stream, so it costs the same for any RAM size, and forks of it share
// the pages they do not write. Two steps, so that the long one needs no lock:
//   PrepareSnapshotMemoryApart writes the new snapshot in work_dir (replaced; on dir's
//     filesystem, and outside dir's parent if another thread may remove that): a VM of the
//     same shape (`options`: memory, vCPUs, host cgroup) loads the state with its RAM in that
//     file, held stopped, and saves only its devices; the disk is linked, not copied.
//   CommitSnapshotMemoryApart puts it in place of dir in one step, unless dir no longer holds
//     the snapshot it was made from (FAILED_PRECONDITION; it is then discarded).
// On any failure dir stays as it was and restores as before. A snapshot that keeps its RAM
// apart already gives NOT_FOUND.
struct SnapshotMemoryApart {
  std::string dir;              // the new snapshot
  std::string source_manifest;  // the manifest it was made from, to check at commit
};
[[nodiscard]] absl::StatusOr<SnapshotMemoryApart> PrepareSnapshotMemoryApart(
    VmDriver& driver, const HostPaths& paths, const ImageInfo& image, const std::string& dir,
    const std::string& work_dir, const std::string& key, LaunchOptions options);
[[nodiscard]] absl::Status CommitSnapshotMemoryApart(const std::string& dir,
                                                     const SnapshotMemoryApart& apart);

// The forks of a running VM map one copy of its RAM, made by a helper: a held VM of the same
// shape whose RAM is a new memfd, allocated whole as QEMU starts (VmConfig::prealloc_memory),
// waiting for a state (VmConfig::await_state). StartForkHelper starts one (ahead of need: it
// holds nothing of anyone's until it is given a state; `options` give its shape, host cgroup
// and CPU weight, disk_bytes the size of the session disk it stands in for).
// SetForkMemoryApart gives it TakeForkSnapshot's state (which carries the RAM) to load, saves
// only the devices, ends it and seals the memfd: files->memory becomes the RAM, files->state the
// devices alone. Nothing is written to disk. Files whose memory is apart already are left as
// they are.
struct ForkHelper {
  std::unique_ptr<Vm> vm;
  std::shared_ptr<UniqueFd> memory;
};
[[nodiscard]] absl::StatusOr<ForkHelper> StartForkHelper(VmDriver& driver, const HostPaths& paths,
                                                         const ImageInfo& image,
                                                         uint64_t memory_bytes, off_t disk_bytes,
                                                         const LaunchOptions& options);
[[nodiscard]] absl::Status SetForkMemoryApart(ForkHelper helper, SnapshotFiles* files);

// Creates an unnamed ext4 disk of the given size in dir and returns its descriptor.
[[nodiscard]] absl::StatusOr<UniqueFd> CreateSessionDisk(const std::string& dir, uint64_t bytes);

}  // namespace airlock

#endif  // AIRLOCK_VM_VM_LAUNCHER_H_
