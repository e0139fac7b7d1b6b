// What happens to sessions, as it happens, for `Sessions.Watch`: the state store publishes each
// change once it is committed, and every watcher gets its own bounded queue. A watcher that
// falls behind loses the oldest events, never blocks a publisher, and is told how many it lost.
#ifndef AIRLOCK_DAEMON_SESSION_EVENTS_H_
#define AIRLOCK_DAEMON_SESSION_EVENTS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/daemon/records.h"

namespace airlock {

struct SessionEvent {
  enum class Kind { kState = 1, kExecStart = 2, kExecExit = 3, kDenied = 4, kRemoved = 5 };
  Kind kind = Kind::kState;
  std::string tenant;
  std::string session_id;
  int64_t unix_ms = 0;
  SessionState state = SessionState::kCreating;  // kState: the new state
  std::string reason;                            // kState: why; kDenied: why, what would allow it
  int64_t exec_id = 0;                           // kExecStart, kExecExit
  std::vector<std::string> argv;                 // kExecStart
  int exit_code = 0;                             // kExecExit
  std::string message;                           // kExecExit: why Airlock ended it, if it did
  std::string destination;                       // kDenied: "name:port" or "address:port"
  uint64_t lost = 0;  // set on delivery: events this watcher lost just before this one
  // In a fleet, for a session another host has: that host (the event comes from the fleet's
  // index, SessionManager::WatchFleet). Empty: this host's own session.
  std::string host;
};

// Thread-safe. Publishing costs a lock and a copy per matching watcher; nothing blocks on a
// slow watcher.
class SessionEventHub {
 public:
  static constexpr size_t kQueueEvents = 1024;
  // Stands for every tenant (never a tenant's name: those are "uid:…", "cert:…", "oidc:…").
  static constexpr const char* kEveryTenant = "*";

  // One watcher's queue; it stops receiving when the last reference goes.
  class Subscription {
   public:
    Subscription(std::string tenant, std::string session_id)
        : tenant_(std::move(tenant)), session_id_(std::move(session_id)) {}
    // The next event, or nullopt once `deadline` passes.
    std::optional<SessionEvent> Next(absl::Time deadline);

   private:
    friend class SessionEventHub;
    bool Wants(const SessionEvent& e) const {
      return (tenant_ == kEveryTenant || e.tenant == tenant_) &&
             (session_id_.empty() || e.session_id == session_id_);
    }
    void Push(const SessionEvent& e);

    const std::string tenant_;
    const std::string session_id_;  // empty: every session of the tenant
    absl::Mutex mu_;
    absl::CondVar cv_;
    std::deque<SessionEvent> queue_ ABSL_GUARDED_BY(mu_);
    uint64_t lost_ ABSL_GUARDED_BY(mu_) = 0;
  };

  // Events of the tenant's sessions (or of one of them) from now on.
  std::shared_ptr<Subscription> Subscribe(const std::string& tenant, const std::string& session_id);
  void Publish(const SessionEvent& event);

 private:
  absl::Mutex mu_;
  std::vector<std::weak_ptr<Subscription>> subscriptions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_SESSION_EVENTS_H_
