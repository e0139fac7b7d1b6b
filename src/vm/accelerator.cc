#include "src/vm/accelerator.h"

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "src/common/unique_fd.h"

namespace airlock {
namespace {

bool CpuHasVirtualization() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    std::string word;
    while (words >> word) {
      if (word == "vmx" || word == "svm") return true;
    }
    return false;
  }
  return false;
}

// Creates and destroys a VM to prove /dev/kvm works; returns why not otherwise.
std::string ProbeKvm() {
  UniqueFd kvm(open("/dev/kvm", O_RDWR | O_CLOEXEC));
  if (!kvm.valid()) return "/dev/kvm cannot be opened";
  if (ioctl(kvm.get(), KVM_GET_API_VERSION, 0) != KVM_API_VERSION)
    return "/dev/kvm has another API";
  UniqueFd vm(ioctl(kvm.get(), KVM_CREATE_VM, 0));
  if (!vm.valid()) return "/dev/kvm refuses to create a VM";
  return "";
}

}  // namespace

AcceleratorChoice ChooseAccelerator() {
  const char* forced = std::getenv("AIRLOCK_ACCEL");
  std::string force = forced ? forced : "";
  if (force == "tcg") return {"tcg", "AIRLOCK_ACCEL=tcg asks for software emulation"};
  bool cpu = CpuHasVirtualization();
  if (!cpu && force != "kvm") {
    return {"tcg",
            "the CPU flags in /proc/cpuinfo show no vmx/svm, so any /dev/kvm here is paravirtual "
            "(it cannot boot a stock kernel); using TCG software emulation"};
  }
  std::string why_not = ProbeKvm();
  if (!why_not.empty()) return {"tcg", why_not + "; using TCG software emulation"};
  return {"kvm", cpu ? "the CPU has hardware virtualization and /dev/kvm creates VMs"
                     : "AIRLOCK_ACCEL=kvm and /dev/kvm creates VMs"};
}

}  // namespace airlock
