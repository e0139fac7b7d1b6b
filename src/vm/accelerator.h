// Chooses how QEMU runs guest code: KVM where the CPU has hardware virtualization and a VM can
// really be created, TCG (software emulation) everywhere else (DESIGN.md decision 1).
#ifndef AIRLOCK_VM_ACCELERATOR_H_
#define AIRLOCK_VM_ACCELERATOR_H_

#include <string>

namespace airlock {

struct AcceleratorChoice {
  std::string name;    // "kvm" or "tcg"
  std::string reason;  // one sentence a user can read in `airlock doctor`
};

// AIRLOCK_ACCEL=kvm|tcg overrides the probe (kvm still requires a working /dev/kvm).
AcceleratorChoice ChooseAccelerator();

}  // namespace airlock

#endif  // AIRLOCK_VM_ACCELERATOR_H_
