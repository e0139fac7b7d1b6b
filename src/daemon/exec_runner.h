// One command in a session, from its start to its exit: the service layer under the Exec call
// (the gRPC handler only adapts its stream to ExecClient). It gives a command without a session
// a one-shot session of its own (`airlock run`), merges the environment (the session's base,
// the image's, the secrets' placeholders, the request's), applies the timeout, batches the
// output into the state store, collects an agent's transcripts, maps the exit to what the user
// sees, and records the command in the audit and the timeline.
#ifndef AIRLOCK_DAEMON_EXEC_RUNNER_H_
#define AIRLOCK_DAEMON_EXEC_RUNNER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/airlock/v1/airlock.pb.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/daemon/workspace_uploads.h"

namespace airlock {

// Checks the first message of an Exec call (client input).
[[nodiscard]] absl::Status ValidateExecStart(const v1::ExecStart& start);

// A terminal size a client may ask for.
bool ValidTerminalSize(const v1::TerminalSize& size);

// KEY=VALUE lists, later ones overriding earlier ones key by key, in first-seen order.
std::vector<std::string> MergeEnv(const std::vector<std::vector<std::string>>& layers);

// The client end of one command as ExecRunner sees it: the gRPC stream, or a test's.
class ExecClient {
 public:
  virtual ~ExecClient() = default;
  // The client's next message after the start (stdin, its end, a signal, a resize); false once
  // it half-closed or went away. Called from a thread of the runner's own.
  virtual bool Read(v1::ExecRequest* message) = 0;
  // False: the client is gone.
  virtual bool Write(const v1::ExecResponse& response) = 0;
  virtual bool Cancelled() = 0;
  // Ends the call from this side (for a client that does not half-close after the exit).
  virtual void Cancel() = 0;
};

// Thread-safe: each Run is one command; runs go on at once.
class ExecRunner {
 public:
  ExecRunner(SessionManager* sessions, StateStore* store, WorkspaceUploads* uploads)
      : sessions_(sessions), store_(store), uploads_(uploads) {}

  // Runs `start` (ValidateExecStart passed) for `who`. A failure before the command started
  // is the status; after it, failures reach the client as the command's end (exit 125 and
  // why) and the status is OK, or CANCELLED when the client went away (the command killed).
  [[nodiscard]] absl::Status Run(const Principal& who, const v1::ExecStart& start,
                                 ExecClient& client);

 private:
  SessionManager* sessions_;
  StateStore* store_;
  WorkspaceUploads* uploads_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_EXEC_RUNNER_H_
