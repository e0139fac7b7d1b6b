// The seam between Airlock and a virtual machine monitor. QemuDriver (qemu_driver.h) is the
// implementation today; a Firecracker or cloud-host driver is another class behind this.
#ifndef AIRLOCK_VM_VM_DRIVER_H_
#define AIRLOCK_VM_VM_DRIVER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/common/unique_fd.h"
#include "src/vm/guest_channel.h"

namespace airlock {

// The size every volume's disk has (sparse), and its empty placeholder in a VM without one:
// the guest sees the device a template saw. A volume's filesystem may be smaller.
inline constexpr uint64_t kVolumeDiskBytes = 1ull << 40;

// A volume's disk for a VM (VmConfig::volumes).
struct VmVolume {
  int fd = -1;             // not owned; opened read-only for a read-only volume
  bool read_only = false;  // the guest mounts it read-only and QEMU never writes it
  std::string mount_point;
};

struct VmConfig {
  std::string kernel_path;
  std::string initramfs_path;
  std::string image_path;    // read-only root filesystem image (ext4)
  int session_disk_fd = -1;  // writable disk; not owned, the driver keeps its own reference
  // The workspace disk (read-only; an empty one when the session has none, so that every VM
  // has the same devices and a template restores for both); not owned.
  int workspace_disk_fd = -1;
  // Ask the guest to mount the workspace disk at /workspace (see GuestSync).
  bool mount_workspace = false;
  // The volumes, by slot (at most kVolumeSlots); the slots after them get empty placeholders.
  std::vector<VmVolume> volumes;
  uint32_t memory_mib = 512;
  uint32_t vcpus = 1;
  std::string hostname;
  uint32_t guest_pids_max = 0;  // processes of commands inside the guest; 0: no limit
  // A host cgroup named this confines the VM process (CPU quota for its vCPUs, memory for the
  // guest plus the VMM's overhead). Empty: none.
  std::string host_cgroup;
  // The host cgroup gives the VM the lowest CPU weight until Vm::Adopt (a VM made ahead of
  // need must not slow the sessions that run).
  bool background = false;
  std::string accelerator = "tcg";  // "kvm" or "tcg" (see accelerator.h)
  // Where a VM that outlives the process that started it keeps its sockets and its record
  // (VmDriver::Reattach finds it there again). Empty: the VM dies with that process.
  std::string runtime_dir;
  // Restore the device and RAM state saved in this file (Vm::SaveState) instead of booting;
  // not owned. The rest of the config must describe the same machine (memory, vCPUs, image).
  int incoming_state_fd = -1;
  // The guest's RAM as a file (not owned): a memfd the VM maps instead of anonymous memory.
  //   memory_shared: the guest writes into it (a VM whose RAM is to be saved as a file: its
  //     saved state then leaves the RAM out; see Vm::shared_memory_fd). With
  //     incoming_state_fd the state fills it, unless memory_holds_ram: the file already holds
  //     the RAM that state left out (a session resumed from its own snapshot, whose memory file
  //     it goes on writing, so that its next pause saves only the devices).
  //   otherwise: a private, copy-on-write mapping of its bytes (a restore from a snapshot that
  //     keeps the RAM apart, incoming_state_fd then holding only the devices). Every VM restored
  //     from one snapshot shares the pages none of them wrote. Seal the memfd against writes.
  // -1: anonymous RAM, carried in the saved state.
  int memory_fd = -1;
  bool memory_shared = false;
  bool memory_holds_ram = false;
  // With memory_shared: QEMU gives memory_fd every page when it starts, in one call for the
  // whole range (MADV_POPULATE_WRITE): far faster than a fault for each page the guest or a
  // restore touches, and no page is left a hole (see FillGuestMemory). For a memfd only: a file
  // on a disk would be written whole.
  bool prealloc_memory = false;
  // With incoming_state_fd: load the state and leave the guest stopped, never run it (the VM
  // exists only to save that state again in another form: Vm::SaveState, then destroy it).
  // WaitReady must not be called.
  bool hold = false;
  // Start as for incoming_state_fd, but with no state yet: QEMU waits for the one that
  // Vm::LoadState gives it later (a VM started ahead of need). incoming_state_fd stays -1.
  bool await_state = false;
};

// A running VM. Destroying it kills the VM process, reaps it and releases every host resource
// it held (sockets, descriptors, threads). Thread-safe.
class Vm {
 public:
  virtual ~Vm() = default;
  // Waits until the guest agent has booted (or been restored) and synchronized its clock, RNG,
  // limits and hostname with the host.
  [[nodiscard]] virtual absl::Status WaitReady(absl::Time deadline) = 0;
  // Stops the guest and writes its device and RAM state to state_fd (a regular file, from its
  // current offset); for a VM with shared_memory_fd() only the devices: its RAM is that file's
  // bytes, to be saved beside the state. Quiesce the channel first. When this returns, everything
  // the guest wrote to its disks is on them; the guest stays stopped until Continue (or the VM is
  // destroyed).
  [[nodiscard]] virtual absl::Status SaveState(int state_fd, absl::Time deadline) = 0;
  // For a VM started with VmConfig::await_state: loads the state saved in state_fd (as
  // incoming_state_fd would have at the start) and runs the guest, unless VmConfig::hold.
  [[nodiscard]] virtual absl::Status LoadState(int state_fd, absl::Time deadline) {
    return absl::UnimplementedError("this VM loads no state after its start");
  }
  // Runs a guest stopped by SaveState again and synchronizes its agent as after a restore.
  // Also runs a guest stopped for disk space (below) again.
  [[nodiscard]] virtual absl::Status Continue(absl::Time deadline) = 0;
  // Whether the VMM stopped the guest because a write to its disk found no space on the host
  // (QEMU's "io-error" state): the write waits, nothing is lost, and Continue retries it once
  // the host has space again. False for a VMM that never stops so.
  [[nodiscard]] virtual absl::StatusOr<bool> StoppedForDiskSpace(absl::Time deadline) {
    return false;
  }
  virtual GuestChannel& channel() = 0;
  virtual pid_t pid() const = 0;
  // Ends the VM at once; reason becomes the channel's failure.
  virtual void Kill(const absl::Status& reason) = 0;
  // The last lines the guest console and the VMM printed, for error messages.
  virtual std::string DiagnosticTail() const = 0;
  // If the VM process has ended, how ("killed by signal 9"); nullopt while it runs.
  virtual std::optional<std::string> ExitReason() = 0;
  // The file holding the guest's RAM when the guest writes into it (VmConfig::memory_shared):
  // a memfd, or a resumed session's memory file; -1 otherwise. Its bytes are what SaveState
  // leaves out.
  virtual int shared_memory_fd() const = 0;
  // The accelerator the VM runs on ("kvm" or "tcg").
  virtual std::string accelerator() const = 0;
  // The VMM and its version ("qemu 7.2.22"), recorded in snapshots.
  virtual std::string vmm_version() const = 0;
  // Hands a running VM that was started ahead of need (a warm pool's) to its session: its
  // runtime directory moves to runtime_dir (whose parent exists), its host cgroup (if any) is
  // renamed host_cgroup, and the guest is synchronized again with `sync` (hostname, process
  // limit, a new random seed and the clock) before this returns.
  [[nodiscard]] virtual absl::Status Adopt(const std::string& runtime_dir,
                                           const std::string& host_cgroup, GuestSync sync,
                                           absl::Time deadline) = 0;
  // Lets a VM started with a runtime_dir run on without this object (airlockd exits and a later
  // one reattaches): destroying it then releases only this process's hold on the VM.
  virtual void Detach() = 0;
};

struct LaunchedVm {
  std::unique_ptr<Vm> vm;
  UniqueFd disk;  // the VM's writable disk
};

class VmDriver {
 public:
  virtual ~VmDriver() = default;
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<Vm>> Start(const VmConfig& config) = 0;
  // Finds a VM that an earlier process started with this runtime_dir and that still runs: its
  // monitor, console, writable disk and channel again. A stopped guest (a snapshot was being
  // taken) runs again. The guest agent starts its side of the channel over, so streams that
  // were open on the old connection are gone on both sides. NOT_FOUND when the VM is gone.
  [[nodiscard]] virtual absl::StatusOr<LaunchedVm> Reattach(const std::string& runtime_dir,
                                                            absl::Time deadline) = 0;
  // Ends the VM recorded in runtime_dir if it still runs, and removes the directory.
  virtual void Destroy(const std::string& runtime_dir) = 0;
};

}  // namespace airlock

#endif  // AIRLOCK_VM_VM_DRIVER_H_
