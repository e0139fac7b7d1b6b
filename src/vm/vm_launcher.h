// Starts a sandbox VM for an image, booted (a fresh writable session disk: an unnamed, sparse
// file formatted with libext2fs, so it vanishes with its last descriptor) or restored from a
// snapshot; returns once the agent is ready to run commands.
#ifndef AIRLOCK_VM_VM_LAUNCHER_H_
#define AIRLOCK_VM_VM_LAUNCHER_H_

#include <cstdint>
#include <memory>
#include <string>

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

// Creates an unnamed ext4 disk of the given size in dir and returns its descriptor.
[[nodiscard]] absl::StatusOr<UniqueFd> CreateSessionDisk(const std::string& dir, uint64_t bytes);

}  // namespace airlock

#endif  // AIRLOCK_VM_VM_LAUNCHER_H_
