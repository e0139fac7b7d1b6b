#include "src/daemon/session_events.h"

#include <algorithm>

namespace airlock {

std::optional<SessionEvent> SessionEventHub::Subscription::Next(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  while (queue_.empty()) {
    if (absl::Now() >= deadline) return std::nullopt;
    cv_.WaitWithDeadline(&mu_, deadline);
  }
  SessionEvent e = std::move(queue_.front());
  queue_.pop_front();
  e.lost = lost_;
  lost_ = 0;
  return e;
}

void SessionEventHub::Subscription::Push(const SessionEvent& e) {
  {
    absl::MutexLock lock(&mu_);
    if (queue_.size() >= kQueueEvents) {
      queue_.pop_front();
      ++lost_;
    }
    queue_.push_back(e);
  }
  cv_.Signal();
}

std::shared_ptr<SessionEventHub::Subscription> SessionEventHub::Subscribe(
    const std::string& tenant, const std::string& session_id) {
  auto s = std::make_shared<Subscription>(tenant, session_id);
  absl::MutexLock lock(&mu_);
  subscriptions_.erase(
      std::remove_if(subscriptions_.begin(), subscriptions_.end(),
                     [](const std::weak_ptr<Subscription>& w) { return w.expired(); }),
      subscriptions_.end());
  subscriptions_.push_back(s);
  return s;
}

void SessionEventHub::Publish(const SessionEvent& event) {
  std::vector<std::shared_ptr<Subscription>> targets;
  {
    absl::MutexLock lock(&mu_);
    for (const std::weak_ptr<Subscription>& w : subscriptions_) {
      if (std::shared_ptr<Subscription> s = w.lock(); s && s->Wants(event)) targets.push_back(s);
    }
  }
  for (const std::shared_ptr<Subscription>& s : targets) s->Push(event);
}

}  // namespace airlock
