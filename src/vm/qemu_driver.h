// VmDriver for QEMU's microvm machine (DESIGN.md decisions 1, 4, 7, 8, 9).
//
// QEMU is started from an argv array (never a shell) with -nodefaults, no NIC, the seccomp
// sandbox, and only the descriptors it needs (the disks, the image, the kernel and initramfs,
// and its own binary, run by descriptor). As root, each VM is jailed: new PID, mount, IPC, UTS
// and network namespaces, a root holding only /usr (read-only), three devices and its own
// /proc, and a uid/gid of its own, so one escaped guest cannot signal, trace or read another. A VM
// with a runtime directory (every session's) outlives airlockd: the channel, QMP and console are
// listening sockets there, QEMU's stderr goes to vmm.log and vm.json records the process (pid and
// start time), so Reattach finds it again and Destroy ends it; the directory goes with the VM.
// Without one (template builds, tests) they are socketpairs and QEMU dies with its parent.
#ifndef AIRLOCK_VM_QEMU_DRIVER_H_
#define AIRLOCK_VM_QEMU_DRIVER_H_

#include <string>
#include <vector>

#include "src/vm/vm_driver.h"

namespace airlock {

class QemuDriver : public VmDriver {
 public:
  // vmm_memory_bytes: the host memory each VM process may use beyond its guest's RAM (TCG's
  // code cache, QEMU's heap, the image's page cache) before its host cgroup's limit ends it;
  // 0: 384 MiB under TCG, 128 MiB under KVM.
  explicit QemuDriver(std::string qemu_path, uint64_t vmm_memory_bytes = 0)
      : qemu_path_(std::move(qemu_path)), vmm_memory_bytes_(vmm_memory_bytes) {}
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Vm>> Start(const VmConfig& config) override;
  [[nodiscard]] absl::StatusOr<LaunchedVm> Reattach(const std::string& runtime_dir,
                                                    absl::Time deadline) override;
  void Destroy(const std::string& runtime_dir) override;

  // The argv for a config, with the channel, QMP, console, disks and the rest on descriptors
  // from 3. direct_disk: the session disk is written past the host's page cache (O_DIRECT), so
  // that the guest's own cache is the only one and the VM's host memory does not grow with what
  // it writes (see Start); direct_volumes: the same, for each read-write volume by slot.
  std::vector<std::string> BuildArgv(const VmConfig& config, bool direct_disk = true,
                                     const std::vector<bool>& direct_volumes = {}) const;

 private:
  std::string qemu_path_;
  uint64_t vmm_memory_bytes_;
};

}  // namespace airlock

#endif  // AIRLOCK_VM_QEMU_DRIVER_H_
