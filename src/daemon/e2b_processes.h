// The processes E2B's SDKs start in a sandbox (envd's process.Process API): each is an
// ordinary command of the session, run by ExecRunner (so audited, logged and in the timeline
// like `airlock exec`), on a thread of its own, apart from the HTTP request that started it: a
// client may go away and come back (Connect), send input, close stdin, signal it or resize its
// terminal by its pid while it runs. Its output goes to every client watching it at the time;
// a slow watcher holds the command back (as a slow `airlock exec` client does) once it is
// kMaxBufferedBytes behind. An ended process stays known for kEndedRetention, so that a late
// Connect still gets its end.
//
// The pid is airlockd's handle for the process (unique in this airlockd, from 1000), not the
// guest's pid of it. Thread-safe.
#ifndef AIRLOCK_DAEMON_E2B_PROCESSES_H_
#define AIRLOCK_DAEMON_E2B_PROCESSES_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/daemon/exec_runner.h"
#include "src/gateway/e2b_envd.h"

namespace airlock {

// One event of a process for its watchers.
struct E2bProcessEvent {
  bool end = false;
  gateway::e2b::Output output = gateway::e2b::Output::kStdout;  // data
  std::string data;
  int exit_code = 0;  // end: as envd reports it (-1 when a signal ended it)
  bool exited = false;
  std::string status, error;
};

class E2bProcesses {
 public:
  static constexpr size_t kMaxBufferedBytes = 4 << 20;
  static constexpr absl::Duration kEndedRetention = absl::Seconds(30);
  // At most this many processes (running or kept) per session.
  static constexpr size_t kMaxPerSession = 256;

  explicit E2bProcesses(ExecRunner* runner) : runner_(runner) {}
  // Stop()s.
  ~E2bProcesses();
  // Kills every running process and waits for their threads; later starts fail.
  void Stop();

  class Watch;
  struct StartSpec {
    gateway::e2b::StartRequest request;
    std::vector<std::string> env;  // KEY=VALUE: the sandbox's, then the request's
    std::string user;              // empty: the image's
    double timeout_seconds = 0;    // 0: none
  };
  // Starts a command in a running session (the caller has resumed it) for `who`; the watch
  // sees every event from its start.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Watch>> Start(const Principal& who,
                                                             const std::string& session_id,
                                                             StartSpec spec);
  // A watch of a process of the session that runs or ended within kEndedRetention, from now
  // on (its end at once if it ended); NOT_FOUND otherwise.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Watch>> Connect(
      const std::string& session_id, const gateway::e2b::Selector& selector);
  std::vector<gateway::e2b::ProcessInfo> List(const std::string& session_id);
  // NOT_FOUND for a process that is not running. Input to a process started without stdin, or
  // after CloseStdin, is FAILED_PRECONDITION.
  [[nodiscard]] absl::Status SendInput(const std::string& session_id,
                                       const gateway::e2b::Selector& selector, std::string data);
  [[nodiscard]] absl::Status CloseStdin(const std::string& session_id,
                                        const gateway::e2b::Selector& selector);
  [[nodiscard]] absl::Status Signal(const std::string& session_id,
                                    const gateway::e2b::Selector& selector, int signal);
  // Only for a process on a terminal (FAILED_PRECONDITION otherwise).
  [[nodiscard]] absl::Status Resize(const std::string& session_id,
                                    const gateway::e2b::Selector& selector, uint32_t rows,
                                    uint32_t cols);

 private:
  struct Process;
  class Client;
  struct Watcher {
    std::deque<E2bProcessEvent> events;
    size_t bytes = 0;
    bool gone = false;
  };

 public:
  // One client's view of a process's events. Destroying it stops the watching (the process
  // goes on).
  class Watch {
   public:
    Watch(std::shared_ptr<Process> process, std::shared_ptr<Watcher> watcher);
    ~Watch();
    uint32_t pid() const;
    // The next event; nullopt when none came by the deadline (the stream is still open).
    std::optional<E2bProcessEvent> Next(absl::Time deadline);

   private:
    std::shared_ptr<Process> process_;
    std::shared_ptr<Watcher> watcher_;
  };

 private:
  // The process the selector names (ended ones too); NOT_FOUND if none.
  absl::StatusOr<std::shared_ptr<Process>> Find(const std::string& session_id,
                                                const gateway::e2b::Selector& selector)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets processes that ended more than kEndedRetention ago.
  void Prune() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues a client message for the process's command.
  absl::Status Queue(const std::shared_ptr<Process>& process, v1::ExecRequest message);

  ExecRunner* runner_;
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t next_pid_ ABSL_GUARDED_BY(mu_) = 1000;
  std::map<std::string, std::vector<std::shared_ptr<Process>>> by_session_ ABSL_GUARDED_BY(mu_);
  // Each process's thread by pid, and the pids whose thread is about to end (joined by the
  // next Start, or Stop).
  std::map<uint32_t, std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> finished_ ABSL_GUARDED_BY(mu_);
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_E2B_PROCESSES_H_
