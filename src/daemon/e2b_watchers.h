// The directory watchers E2B's SDKs poll (envd's CreateWatcher, GetWatcherEvents,
// RemoveWatcher: the Python SDK's watch_dir): each a watch of the session's guest (see
// SessionFiles::Watch) whose events wait here until the next poll. A watcher nobody polled for
// kIdle is dropped at the next call, as is one whose directory went away (that poll says so).
// While a watcher lasts its sandbox cannot be paused. Thread-safe.
#ifndef AIRLOCK_DAEMON_E2B_WATCHERS_H_
#define AIRLOCK_DAEMON_E2B_WATCHERS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/daemon/session_files.h"

namespace airlock {

class E2bWatchers {
 public:
  static constexpr size_t kMaxPerSandbox = 16;
  static constexpr absl::Duration kIdle = absl::Minutes(10);
  // How long the guest may take to start watching.
  static constexpr absl::Duration kStartTimeout = absl::Seconds(30);

  explicit E2bWatchers(SessionFiles* files) : files_(files) {}

  // Starts watching (the guest's errors, like NOT_FOUND, come back here); returns the
  // watcher's id.
  [[nodiscard]] absl::StatusOr<std::string> Create(const Principal& who, const std::string& sandbox,
                                                   const WatchDirMessage& request);
  // What happened since the last poll (kStarted records left out). NOT_FOUND for an unknown
  // id; once the watch is over, the reason, and the watcher is gone.
  [[nodiscard]] absl::StatusOr<std::vector<WatchRecord>> Events(const std::string& sandbox,
                                                                const std::string& id);
  [[nodiscard]] absl::Status Remove(const std::string& sandbox, const std::string& id);
  // Drops every watcher (before airlockd pauses its sessions).
  void Stop();

  // Waits for a new watch's first record, kStarted; what came with it goes to *early.
  static absl::Status AwaitStart(SessionWatch& watch, std::vector<WatchRecord>* early);

 private:
  struct Watcher {
    std::string sandbox;
    absl::Mutex mu;
    std::unique_ptr<SessionWatch> watch ABSL_GUARDED_BY(mu);
    std::vector<WatchRecord> early ABSL_GUARDED_BY(mu);
    absl::Time last_used ABSL_GUARDED_BY(mu);
    absl::Status ended ABSL_GUARDED_BY(mu);  // why the watch is over, for the next poll
  };
  // The watcher, if it is sandbox's; drops idle ones on the way.
  std::shared_ptr<Watcher> Find(const std::string& sandbox, const std::string& id)
      ABSL_LOCKS_EXCLUDED(mu_);

  SessionFiles* files_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Watcher>> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_E2B_WATCHERS_H_
