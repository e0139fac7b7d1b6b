// The warm pool: VMs restored from a template ahead of need, so that a create or an `airlock run`
// takes one that already runs instead of waiting for QEMU to start and load a state.
//
// A pooled VM is the template's own warm-up only: no user code and no user data has ever been in
// it, and each one goes to exactly one session and never comes back. Taking one hands it over
// (Vm::Adopt: its runtime directory and host cgroup get the session's names, and the guest gets
// the session's hostname, process limit, a new random seed and the clock).
//
// Each kind (image and VM shape) has a target size that follows demand: a create that finds
// none raises it by one (up to max_per_kind), and a kind nobody asked for during `idle` drops to
// zero, its VMs destroyed. A background thread fills kinds up to their targets, one VM at a
// time, while the guest RAM of every pooled VM together stays within the memory budget. Every
// pooled VM remembers the template it came from (whose name covers image, kernel, agent and
// QEMU): one of an older template is destroyed, never handed out. Thread-safe.
#ifndef AIRLOCK_DAEMON_VM_POOL_H_
#define AIRLOCK_DAEMON_VM_POOL_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/daemon/templates.h"
#include "src/image/image_store.h"
#include "src/vm/vm_driver.h"

namespace airlock {

struct VmPoolOptions {
  uint32_t max_per_kind = 2;  // airlockd --pool; 0: no pool
  // The guest RAM of all pooled VMs together (airlockd --pool-memory).
  uint64_t memory_budget_bytes = 2ull << 30;
  // A kind nobody asked for this long is emptied (the pool scales to zero).
  absl::Duration idle = absl::Minutes(5);
  // A refill waits while the host's CPUs are mostly busy (sessions come first), but no longer
  // than this, so that the pool never stays empty.
  absl::Duration most_calm_wait = absl::Seconds(30);
};

// A VM in the pool, for `airlock ps`.
struct PooledVmInfo {
  std::string image;  // name
  VmShape shape;
  pid_t pid = 0;
  std::string accelerator;
};

class VmPool {
 public:
  // Restores a VM of this image and shape from its template for the pool, with its runtime
  // directory at runtime_dir and its host cgroup named `name`; sets *template_dir to the
  // template it came from.
  using Maker = std::function<absl::StatusOr<LaunchedVm>(
      const ImageInfo& image, const VmShape& shape, const std::string& runtime_dir,
      const std::string& name, std::string* template_dir)>;

  // dir: where pooled VMs keep their runtime directories ($AIRLOCK_HOME/pool). VMs an earlier
  // airlockd left there are destroyed with `destroy` (VmDriver::Destroy).
  VmPool(VmPoolOptions options, std::string dir, Maker make,
         std::function<void(const std::string&)> destroy);
  // Destroys every pooled VM.
  ~VmPool();

  // A pooled VM of this image and shape restored from template_dir (the current template), or
  // nullopt; either way the kind counts as asked for, and a miss raises its target.
  std::optional<LaunchedVm> Take(const ImageInfo& image, const VmShape& shape,
                                 const std::string& template_dir);
  std::vector<PooledVmInfo> List() const;
  const VmPoolOptions& options() const { return options_; }

  // The policy, apart from the VMs (unit tests): the next target of a kind.
  static uint32_t TargetAfterTake(uint32_t target, bool hit, uint32_t max_per_kind);

 private:
  struct Pooled {
    LaunchedVm vm;
    std::string template_dir;
  };
  struct Kind {
    ImageInfo image;
    VmShape shape;
    std::string template_dir;  // the newest a Take named
    uint32_t target = 0;
    absl::Time last_asked;
    std::vector<Pooled> ready;
  };

  void Fill();
  uint64_t PooledBytesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether less than a quarter of the host's CPU time went to work over the next 250 ms (waits on
  // cv_ meanwhile, so Stop is not held up).
  bool HostIsCalm() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const VmPoolOptions options_;
  const std::string dir_;
  const Maker make_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Since when a refill waits for calm.
  absl::Time wanted_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::map<std::string, Kind> kinds_ ABSL_GUARDED_BY(mu_);  // by image digest and shape
  std::thread filler_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_VM_POOL_H_
