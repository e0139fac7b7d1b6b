// envd, the in-sandbox API of E2B's SDKs, served by airlockd's gateway for the sandboxes the
// E2B-compatible API made (no E2B code in the guest): Connect-protocol RPCs of E2B's
// process.Process (start with cwd, environment, user and a terminal; watch, list, input as one
// message or a client stream, close stdin, signals, resize) translated onto the session's commands
// (E2bProcesses), of its filesystem.Filesystem (stat, list, make a directory, move, remove, watch a
// directory as a stream or a polled watcher) and /files (read; write as multipart or raw bytes,
// with E2B's metadata as user.e2b.* attributes) onto its files (SessionFiles, E2bWatchers), plus
// /health. Requests reach it routed by the Host "49983-ID.DOMAIN" or by the headers E2b-Sandbox-Id
// and E2b-Sandbox-Port: 49983.
//
// Admission: every request but /health carries the sandbox's envd access token (X-Access-Token,
// given to the SDK on create and connect), or, for /files, a URL signature made with it. The
// calls act as the tenant of the key that made the sandbox (audited as that key), and each
// takes a place in that tenant's `connections` quota while it lasts (a process stream may last
// long). An unknown
// or ended sandbox is answered 502, as E2B's proxy does.
//
// Paths an SDK sends relative are under the home of the user the call names (Basic
// authorization, or ?username= for /files): /root for root or none, else /home/USER; commands
// start there too unless given a cwd. Thread-safe.
#ifndef AIRLOCK_DAEMON_E2B_ENVD_H_
#define AIRLOCK_DAEMON_E2B_ENVD_H_

#include <atomic>
#include <string>

#include "src/daemon/api_key_repository.h"
#include "src/daemon/e2b_processes.h"
#include "src/daemon/e2b_watchers.h"
#include "src/daemon/exec_runner.h"
#include "src/daemon/session_files.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/gateway/e2b_envd.h"
#include "src/gateway/http_gateway.h"

namespace airlock {

// A file of the session's guest as the body of a 200 answer (application/octet-stream, and
// extra_headers: whole lines), sent as it is read. The error if it failed before any byte went
// out (NOT_FOUND, ...), for the caller to answer; OK otherwise (one that fails halfway cuts
// the connection, so the client sees the body cut short).
[[nodiscard]] absl::Status SendGuestFile(SessionFiles& files, const Principal& who,
                                         const std::string& session_id, const std::string& path,
                                         absl::string_view extra_headers,
                                         gateway::GatewayConnection& c);

class E2bEnvd {
 public:
  // An upload larger than this is refused (413): write larger files with several requests or
  // through Airlock's own API.
  static constexpr size_t kMaxUploadBytes = 64 << 20;

  // Uploads held in memory at once (each at most kMaxUploadBytes); more are answered 429.
  static constexpr int kMaxUploadsAtOnce = 8;

  E2bEnvd(SessionManager* sessions, StateStore* store, WorkspaceUploads* uploads)
      : sessions_(sessions),
        store_(store),
        runner_(sessions, store, uploads),
        processes_(&runner_),
        files_(sessions, store),
        watchers_(&files_) {}

  // Serves one request for sandbox_id's envd.
  void Serve(const std::string& sandbox_id, const gateway::GatewayRequest& request,
             gateway::GatewayConnection& connection);
  // Kills the processes it started (before airlockd pauses its sessions).
  void Stop() {
    processes_.Stop();
    watchers_.Stop();
  }

 private:
  struct Call;
  void ServeRpc(Call& call, gateway::e2b::EnvdOp op, const std::string& rpc);
  void ServeStream(Call& call, gateway::e2b::EnvdOp op, const std::string& message);
  void ServeWatch(Call& call, const std::string& message);
  // A filesystem.Filesystem call other than WatchDir: its answer's JSON.
  absl::StatusOr<std::string> FilesystemCall(Call& call, gateway::e2b::EnvdOp op,
                                             const std::string& body);
  // process.Process/StreamInput: a client stream whose input goes to the process message by
  // message.
  void StreamInput(Call& call);
  void ReadFile(Call& call);
  void WriteFiles(Call& call);

  SessionManager* sessions_;
  StateStore* store_;
  std::atomic<int> uploads_{0};
  ExecRunner runner_;
  E2bProcesses processes_;
  SessionFiles files_;
  E2bWatchers watchers_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_E2B_ENVD_H_
