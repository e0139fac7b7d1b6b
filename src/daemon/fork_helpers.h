// The helper VMs that the forks of a running session need (SetForkMemoryApart: a QEMU of the
// session's shape whose RAM, allocated whole as it starts, takes the snapshot's RAM for the
// forks to map), one started ahead of need: after a fork, a helper of the same kind (image, VM
// shape, disk size) starts in the background for the next fork (Done), which then waits
// neither for QEMU to start nor for the RAM to be allocated.
//
// At most one waits at a time, and only while forks of its kind keep coming: it is ended when
// none came for `idle`, and replaced when another kind is forked. What it holds is host memory
// ahead of need (its guest's RAM, every page allocated, all zero), so it counts against the warm
// pool's budget and is off with the pool (airlockd --pool 0, --pool-memory). A waiting helper has
// never held anyone's data: it is given a state only by the fork that takes it, and it goes
// with that fork. Thread-safe.
#ifndef AIRLOCK_DAEMON_FORK_HELPERS_H_
#define AIRLOCK_DAEMON_FORK_HELPERS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/image/image_store.h"
#include "src/vm/vm_launcher.h"

namespace airlock {

// What a helper must match: the running session's image and shape, and its disk's size.
struct ForkHelperKind {
  ImageInfo image;
  uint64_t memory_bytes = 0;
  uint32_t vcpus = 1;
  off_t disk_bytes = 0;
  std::string Key() const;
};

struct ForkHelpersOptions {
  bool ahead_of_need = true;  // false: every fork starts its own helper
  // A helper ahead of need only for a kind whose RAM fits in this (the warm pool's budget).
  uint64_t memory_budget_bytes = 2ull << 30;
  absl::Duration idle = absl::Minutes(1);
};

class ForkHelpers {
 public:
  // start: starts a helper of a kind; ahead: for a later fork (give it the lowest CPU weight).
  using Starter = std::function<absl::StatusOr<ForkHelper>(const ForkHelperKind&, bool ahead)>;
  ForkHelpers(ForkHelpersOptions options, Starter start);
  // Ends the waiting helper, and one being started.
  ~ForkHelpers();
  ForkHelpers(const ForkHelpers&) = delete;
  ForkHelpers& operator=(const ForkHelpers&) = delete;

  // The helper waiting for this kind (or being started for it, then waited for), or one started
  // now.
  absl::StatusOr<ForkHelper> Take(const ForkHelperKind& kind);
  // After a fork of this kind is made: another helper of it starts in the background for the
  // next (when ahead of need). Not sooner, so as not to slow the restores of that fork.
  void Done(const ForkHelperKind& kind);
  // The kind (Key) of the helper waiting, if one does.
  std::optional<std::string> Waiting() const;

 private:
  void Loop();
  // Ends helper (if any) with mu_ let go meanwhile.
  void EndUnlocked(std::unique_ptr<ForkHelper> helper) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ForkHelpersOptions options_;
  const Starter start_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<ForkHelperKind> wanted_ ABSL_GUARDED_BY(mu_);  // start one of this kind
  absl::Time last_taken_ ABSL_GUARDED_BY(mu_);
  std::string starting_ ABSL_GUARDED_BY(mu_);  // the kind being started, if one is
  std::string spare_kind_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ForkHelper> spare_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_FORK_HELPERS_H_
