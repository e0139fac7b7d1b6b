// A VmDriver without a VMM, for unit tests of what drives VMs (the session manager's pause,
// resume, fork, idle timeout and time to live) without booting QEMU.
//
// Each fake VM plays a guest agent on the other end of a socketpair, speaking the channel's frames
// as src/guest/ does for what the daemon asks of a guest in a session's life: hello, sync and
// ready, pause and paused, and on streams the host opens: commands (a few built in: `echo ARGS`,
// `cat PATH` or stdin, `hostname`, `boots`, `exit N`), files written and read, metrics. Its "VMM
// process" is a child that sleeps, so pid() is real and a test can kill it as a VM dies
// (ExitReason, the channel fails). What the guest holds (files, hostname, how often it booted
// and was restored) is its RAM: SaveState writes it into the state, or into the memory file of
// a VM whose RAM is a file (VmConfig::memory_shared), and a start from incoming_state_fd (and
// memory_fd) reads it back, so pause, resume, fork and the RAM-apart rewrite carry the guest's
// state through snapshot files as QEMU carries a real guest's. SaveState refuses a guest that
// was not quiesced first. A VM with a runtime_dir that is detached keeps running in the driver,
// and Reattach finds it again (airlockd restarting over its VMs).
//
// Thread-safe. The driver must outlive its VMs.
#ifndef AIRLOCK_TESTING_FAKE_VM_H_
#define AIRLOCK_TESTING_FAKE_VM_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "src/vm/vm_driver.h"

namespace airlock {

class FakeVmCore;

class FakeVmDriver : public VmDriver {
 public:
  FakeVmDriver();
  ~FakeVmDriver() override;

  absl::StatusOr<std::unique_ptr<Vm>> Start(const VmConfig& config) override;
  absl::StatusOr<LaunchedVm> Reattach(const std::string& runtime_dir, absl::Time deadline) override;
  void Destroy(const std::string& runtime_dir) override;

  // The next `count` Starts fail with `status` (a VMM that cannot start).
  void FailStarts(absl::Status status, int count = 1);
  // VMs started so far: booted fresh, and restored from a saved state.
  int booted() const;
  int restored() const;
  // The pids of the VM processes that run now.
  std::vector<pid_t> RunningPids() const;

 private:
  friend class FakeVm;
  void Forget(const FakeVmCore* core);
  void Keep(std::shared_ptr<FakeVmCore> core);
  // The detached VM of that runtime directory, no longer kept (null if none).
  std::shared_ptr<FakeVmCore> TakeDetached(const std::string& runtime_dir);

  mutable absl::Mutex mu_;
  absl::Status fail_status_ ABSL_GUARDED_BY(mu_);
  int fail_count_ ABSL_GUARDED_BY(mu_) = 0;
  int booted_ ABSL_GUARDED_BY(mu_) = 0;
  int restored_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::weak_ptr<FakeVmCore>> all_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<FakeVmCore>> detached_
      ABSL_GUARDED_BY(mu_);  // by runtime dir
};

}  // namespace airlock

#endif  // AIRLOCK_TESTING_FAKE_VM_H_
