// Owns the live sessions of airlockd: boots their VMs, keeps the state store in step with what
// really happens to them (a VM that dies marks its session failed with the reason, a TTL that
// passes destroys it), and tears everything down on removal.
//
// Every entry point takes the caller's Principal and only ever touches sessions of that
// principal's tenant (others are NOT_FOUND). Thread-safe.
#ifndef AIRLOCK_DAEMON_SESSION_MANAGER_H_
#define AIRLOCK_DAEMON_SESSION_MANAGER_H_

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "src/common/host_paths.h"
#include "src/daemon/state_store.h"
#include "src/vm/vm_driver.h"

namespace airlock {

// A running session. Its VM lives as long as the LiveSession; callers hold a shared_ptr for the
// duration of one operation so removal waits for nobody but never frees a VM in use.
struct LiveSession {
  SessionRecord record;
  std::unique_ptr<Vm> vm;  // its writable disk is unnamed: it goes with the VM
};

class SessionManager {
 public:
  SessionManager(StateStore* store, HostPaths paths, VmDriver* driver);
  ~SessionManager();

  // Marks sessions whose VM did not survive a daemon restart as failed, and starts the watcher.
  [[nodiscard]] absl::Status Recover();

  [[nodiscard]] absl::StatusOr<SessionRecord> Create(const Principal& who, const std::string& image,
                                                     const SessionLimits& limits);
  // The live session, or FAILED_PRECONDITION naming its state (NOT_FOUND if not the caller's).
  [[nodiscard]] absl::StatusOr<std::shared_ptr<LiveSession>> Live(const Principal& who,
                                                                  const std::string& id);
  // Destroys the VM and the session's files; the record (and its logs) stay, state stopped.
  [[nodiscard]] absl::Status Remove(const Principal& who, const std::string& id,
                                    const std::string& reason = "removed");
  // Live sessions of the caller's tenant.
  std::vector<std::shared_ptr<LiveSession>> LiveSessions(const Principal& who);

  // Applies limits from a request: zero fields take defaults; out-of-range values are errors.
  [[nodiscard]] static absl::StatusOr<SessionLimits> ResolveLimits(const SessionLimits& requested);

 private:
  void WatchLoop();
  // Ends a live session that died or expired: state, reason, files.
  void Retire(const std::string& id, SessionState state, const std::string& reason);

  StateStore* store_;
  HostPaths paths_;
  VmDriver* driver_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<LiveSession>> live_;
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stopping_ = false;
  std::thread watcher_;
};

// The system principal that acts for airlockd itself (TTL expiry, recovery, VM death).
inline const Principal kDaemonPrincipal{0, 0};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_SESSION_MANAGER_H_
