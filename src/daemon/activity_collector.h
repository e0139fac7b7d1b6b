// Reads a running session's activity record from its guest as it happens and stores it
// (ActivityLog): one thread per running VM, which opens the guest's kWatchActivity stream, and
// opens it again after a snapshot closed it, until the VM's channel ends.
#ifndef AIRLOCK_DAEMON_ACTIVITY_COLLECTOR_H_
#define AIRLOCK_DAEMON_ACTIVITY_COLLECTOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/daemon/state_store.h"
#include "src/vm/guest_channel.h"

namespace airlock {

// The records as the host keeps them: a guest's clock is its own, so each time is brought
// within [the later of earliest_ms (the session's creation) and *last_ms (the record kept
// before it), now_ms] (records reach the host within a second or so, or after a pause or a
// restart of airlockd with their own times), and *last_ms advances.
std::vector<ActivityRecord> StampActivity(std::vector<ActivityRecord> records, int64_t earliest_ms,
                                          int64_t now_ms, int64_t* last_ms);

// Batches stored after a stop, at most, from a guest that goes on sending.
inline constexpr int kMaxBatchesAfterStop = 16;

class ActivityCollector {
 public:
  ActivityCollector(StateStore* store, SessionRecord session,
                    std::shared_ptr<GuestChannel> channel);
  // Stops reading and waits for the thread.
  ~ActivityCollector();
  ActivityCollector(const ActivityCollector&) = delete;
  ActivityCollector& operator=(const ActivityCollector&) = delete;

 private:
  // first: the stream the constructor opened (or why it could not).
  void Loop(std::optional<absl::StatusOr<std::unique_ptr<GuestActivity>>> first);
  // Waits up to d, or until stopped; false once stopped.
  bool Wait(absl::Duration d);

  StateStore* store_;
  SessionRecord session_;
  std::shared_ptr<GuestChannel> channel_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  GuestActivity* reading_ ABSL_GUARDED_BY(mu_) = nullptr;  // the stream being read, if any
  std::thread thread_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_ACTIVITY_COLLECTOR_H_
