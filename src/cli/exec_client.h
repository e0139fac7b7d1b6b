// Runs one command through airlockd's Exec call. RunExec is the one implementation: the CLI
// streams our stdin to the guest and its stdout/stderr to ours (StreamExec), the MCP server
// captures them into capped buffers (src/mcp/airlock_tools.cc).
#ifndef AIRLOCK_CLI_EXEC_CLIENT_H_
#define AIRLOCK_CLI_EXEC_CLIENT_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "proto/airlock/v1/airlock.pb.h"
#include "src/cli/daemon_client.h"
#include "src/common/exit_codes.h"

namespace airlock {

// Where a command's output goes and where its input comes from.
class ExecIo {
 public:
  virtual ~ExecIo() = default;
  virtual void Stdout(const std::string& data) = 0;
  virtual void Stderr(const std::string& data) = 0;
  // Runs on a thread of its own when the ExecStart asks for stdin or a terminal: passes input
  // to input.write (which returns false once the command no longer takes any) and a terminal's
  // new sizes to input.resize, and returns at the input's end. Must also return when stop_fd
  // becomes readable (the command ended).
  struct Input {
    std::function<bool(const std::string&)> write;
    std::function<bool(uint32_t rows, uint32_t cols)> resize;
  };
  virtual void FeedStdin(const Input& input, int stop_fd) {}
};

// For `exec -t` and `run -t`: the command runs on a terminal in the guest the size of ours,
// with our TERM (unless start's env sets one). Fails with what to do if start takes stdin and
// ours is not a terminal.
[[nodiscard]] absl::Status UseTerminal(v1::ExecStart* start);

struct ExecOutcome {
  std::optional<v1::ExitStatus> exit;  // how the command ended, if it did
  grpc::Status status;                 // the call's status (why there is no exit)
};

// Runs start to its end. Cancelling context (from another thread) kills the command.
ExecOutcome RunExec(DaemonClient& client, const v1::ExecStart& start, ExecIo& io,
                    grpc::ClientContext& context);

// For the CLI: returns the exit code to exit with: the command's, or 125 (message on stderr) if
// Airlock failed, or 128+N if signal N interrupted us (the command is then killed).
int StreamExec(DaemonClient& client, const v1::ExecStart& start);

}  // namespace airlock

#endif  // AIRLOCK_CLI_EXEC_CLIENT_H_
