#include "src/daemon/e2b_watchers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "src/common/hex.h"

namespace airlock {

absl::Status E2bWatchers::AwaitStart(SessionWatch& watch, std::vector<WatchRecord>* early) {
  absl::StatusOr<std::vector<WatchRecord>> first = watch.Next(absl::Now() + kStartTimeout);
  if (!first.ok()) {
    if (absl::IsDeadlineExceeded(first.status())) {
      return absl::DeadlineExceededError("the guest did not start watching in time");
    }
    return first.status();
  }
  if (first->empty() || first->front().kind != WatchEventKind::kStarted) {
    return absl::InternalError("the guest's watch did not start with its start record");
  }
  early->assign(first->begin() + 1, first->end());
  return absl::OkStatus();
}

absl::StatusOr<std::string> E2bWatchers::Create(const Principal& who, const std::string& sandbox,
                                                const WatchDirMessage& request) {
  {
    absl::MutexLock lock(&mu_);
    size_t mine = 0;
    for (const auto& [id, w] : watchers_) mine += w->sandbox == sandbox;
    if (mine >= kMaxPerSandbox) {
      return absl::ResourceExhaustedError(absl::StrCat("a sandbox has at most ", kMaxPerSandbox,
                                                       " watchers: remove one you are done with"));
    }
  }
  absl::StatusOr<std::unique_ptr<SessionWatch>> watch = files_->Watch(who, sandbox, request);
  if (!watch.ok()) return watch.status();
  auto watcher = std::make_shared<Watcher>();
  watcher->sandbox = sandbox;
  {
    absl::MutexLock lock(&watcher->mu);
    if (absl::Status s = AwaitStart(**watch, &watcher->early); !s.ok()) return s;
    watcher->watch = *std::move(watch);
    watcher->last_used = absl::Now();
  }
  std::string id = RandomHex(12);
  absl::MutexLock lock(&mu_);
  watchers_[id] = std::move(watcher);
  return id;
}

std::shared_ptr<E2bWatchers::Watcher> E2bWatchers::Find(const std::string& sandbox,
                                                        const std::string& id) {
  std::vector<std::shared_ptr<Watcher>> idle;  // destroyed after the lock, ending their watches
  absl::MutexLock lock(&mu_);
  absl::Time now = absl::Now();
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    Watcher& w = *it->second;
    bool stale = false;
    if (w.mu.TryLock()) {
      stale = now - w.last_used > kIdle;
      w.mu.Unlock();
    }
    if (stale && it->first != id) {
      idle.push_back(std::move(it->second));
      it = watchers_.erase(it);
    } else {
      ++it;
    }
  }
  auto it = watchers_.find(id);
  if (it == watchers_.end() || it->second->sandbox != sandbox) return nullptr;
  return it->second;
}

absl::StatusOr<std::vector<WatchRecord>> E2bWatchers::Events(const std::string& sandbox,
                                                             const std::string& id) {
  std::shared_ptr<Watcher> w = Find(sandbox, id);
  if (w == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("watcher ", id.substr(0, 64), " is not this sandbox's (or was removed)"));
  }
  std::vector<WatchRecord> events;
  absl::Status over;
  {
    absl::MutexLock lock(&w->mu);
    w->last_used = absl::Now();
    events = std::move(w->early);
    w->early.clear();
    while (w->watch != nullptr) {
      absl::StatusOr<std::vector<WatchRecord>> more = w->watch->Next(absl::Now());
      if (absl::IsDeadlineExceeded(more.status())) break;
      if (!more.ok()) {
        w->ended = more.status();
        w->watch.reset();
        break;
      }
      for (WatchRecord& r : *more) {
        if (r.kind != WatchEventKind::kStarted) events.push_back(std::move(r));
      }
    }
    // What happened before the watch ended comes first; this poll or the next says it ended.
    if (w->watch == nullptr && events.empty()) over = w->ended;
  }
  if (!over.ok()) {
    Remove(sandbox, id).IgnoreError();
    return over;
  }
  return events;
}

absl::Status E2bWatchers::Remove(const std::string& sandbox, const std::string& id) {
  std::shared_ptr<Watcher> gone;
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end() || it->second->sandbox != sandbox) {
    return absl::NotFoundError(
        absl::StrCat("watcher ", id.substr(0, 64), " is not this sandbox's"));
  }
  gone = std::move(it->second);
  watchers_.erase(it);
  return absl::OkStatus();
}

void E2bWatchers::Stop() {
  std::map<std::string, std::shared_ptr<Watcher>> all;
  absl::MutexLock lock(&mu_);
  all.swap(watchers_);
}

}  // namespace airlock
