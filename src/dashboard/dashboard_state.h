// What the dashboard shows, kept in memory only: the last four minutes of what airlockd said.
// The poller sets the sessions and VM samples every few seconds, the watcher adds events as they
// come; the web page reads all of it as one JSON document. Every list is capped, so a busy host
// cannot make the dashboard grow. Thread-safe.
#ifndef AIRLOCK_DASHBOARD_DASHBOARD_STATE_H_
#define AIRLOCK_DASHBOARD_DASHBOARD_STATE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "proto/airlock/v1/airlock.pb.h"

namespace airlock {

class DashboardState {
 public:
  static constexpr int64_t kWindowMs = 4 * 60 * 1000;
  static constexpr size_t kMaxSessions = 2000;
  static constexpr size_t kMaxEvents = 2000;
  static constexpr size_t kMaxSamplesPerSession = 240;
  static constexpr size_t kMaxTextBytes = 512;  // an argv or reason as shown; longer is cut

  // Every tenant's sessions now (Sessions.List with all_tenants).
  void SetSessions(const std::vector<v1::Session>& sessions, int64_t now_ms);
  // The host's view of each running VM now (Vms.List with all_tenants).
  void AddVmSamples(const std::vector<v1::Vm>& vms, int64_t now_ms);
  // One event of Sessions.Watch.
  void AddEvent(const v1::SessionEvent& event);
  // The last call to airlockd failed (empty: it works again).
  void SetDaemonError(const std::string& error, int64_t now_ms);

  // {"now_ms", "window_ms", "daemon_error", "updated_ms", "by_state": {STATE: n},
  //  "by_tenant": {TENANT: {STATE: n}}, "sessions": [{id, tenant, image, state, reason,
  //  created_ms, last_used_ms, vcpus, memory_bytes, samples: [[ms, cpu_percent, rss_bytes]]}],
  //  "events": [{ms, tenant, session_id, kind, text, failed}] (newest last)}. Text is as airlockd
  // gave it (cut at kMaxTextBytes, invalid UTF-8 replaced): the page shows it as text.
  nlohmann::json ToJson(int64_t now_ms) const;

 private:
  struct Sample {
    int64_t ms;
    double cpu_percent;
    uint64_t rss_bytes;
  };
  struct Event {
    int64_t ms;
    std::string tenant, session_id, kind, text;
    bool failed;
  };
  void TrimLocked(int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<v1::Session> sessions_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::deque<Sample>> samples_ ABSL_GUARDED_BY(mu_);  // by session id
  std::deque<Event> events_ ABSL_GUARDED_BY(mu_);
  std::string daemon_error_ ABSL_GUARDED_BY(mu_);
  int64_t updated_ms_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace airlock

#endif  // AIRLOCK_DASHBOARD_DASHBOARD_STATE_H_
