// The history of E2B sandboxes' use that the E2B API's metrics answer with (E2B keeps one; the
// SDK asks for a time range): every kInterval, a sample of each running session that is a
// sandbox of that API, the last kKept of each kept in memory. A restart of airlockd starts the
// histories anew; a paused sandbox's stays until it is older than what is kept. Samples are
// taken under the session's lock (SessionManager::SampleMetrics), so they never stand in the
// way of a pause or a fork. Thread-safe.
#ifndef AIRLOCK_DAEMON_E2B_METRICS_H_
#define AIRLOCK_DAEMON_E2B_METRICS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/gateway/e2b_control.h"

namespace airlock {

class E2bMetrics {
 public:
  static constexpr absl::Duration kInterval = absl::Seconds(5);
  static constexpr size_t kKept = 720;  // an hour of samples

  E2bMetrics(SessionManager* sessions, StateStore* store) : sessions_(sessions), store_(store) {}
  ~E2bMetrics() { Stop(); }
  E2bMetrics(const E2bMetrics&) = delete;
  E2bMetrics& operator=(const E2bMetrics&) = delete;

  // Samples every kInterval on a thread of its own until Stop.
  void Start();
  void Stop();
  // One round: a sample of every running sandbox (the thread's work).
  void SampleAll(absl::Time now);

  // A sample at `at` of what the guest used between two of its answers (CPU) and at the
  // second (memory, disk); nullopt if no CPU time passed between them (or its counters
  // started anew: a resumed or rebooted guest).
  static std::optional<gateway::e2b::Metric> Between(const GuestMetrics& before,
                                                     const GuestMetrics& after, absl::Time at);

  // The sandbox's samples taken from start to end (Unix seconds, both included), oldest
  // first.
  std::vector<gateway::e2b::Metric> History(const std::string& id, int64_t start_s, int64_t end_s);

 private:
  struct Series {
    GuestMetrics last;  // the CPU of the next sample is counted from here
    bool has_last = false;
    absl::Time last_time;
    std::deque<gateway::e2b::Metric> samples;
  };

  SessionManager* sessions_;
  StateStore* store_;
  absl::Mutex mu_;
  std::map<std::string, Series> series_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_E2B_METRICS_H_
