// VmDriver for QEMU's microvm machine (DESIGN.md decisions 1, 4, 7, 9).
//
// QEMU is started from an argv array (never a shell) with -nodefaults, no NIC, the seccomp
// sandbox, and only the descriptors it needs: the channel, QMP and console sockets are
// socketpairs and the writable disk an inherited descriptor, so nothing of a VM exists on the
// host filesystem and nothing is left behind when it ends. As root, QEMU also runs in new
// mount/IPC/UTS/network namespaces as an unprivileged user. QEMU dies with its parent.
#ifndef AIRLOCK_VM_QEMU_DRIVER_H_
#define AIRLOCK_VM_QEMU_DRIVER_H_

#include <string>
#include <vector>

#include "src/vm/vm_driver.h"

namespace airlock {

class QemuDriver : public VmDriver {
 public:
  explicit QemuDriver(std::string qemu_path) : qemu_path_(std::move(qemu_path)) {}
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Vm>> Start(const VmConfig& config) override;

  // The argv for a config, with the channel, QMP, console and disk on descriptors 3 to 7.
  std::vector<std::string> BuildArgv(const VmConfig& config) const;

 private:
  std::string qemu_path_;
};

}  // namespace airlock

#endif  // AIRLOCK_VM_QEMU_DRIVER_H_
