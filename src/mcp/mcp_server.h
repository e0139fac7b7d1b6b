// The Model Context Protocol server behind `airlock mcp`: lifecycle (initialize, ping),
// tools/list and tools/call, progress notifications and cancellation, over one JSON-RPC
// message per line. Transport-free: lines come in through HandleLine and go out through a
// writer, so tests drive it directly. Tool calls run on threads of their own so that a long
// call can be cancelled while the server keeps reading. Thread-safe.
#ifndef AIRLOCK_MCP_MCP_SERVER_H_
#define AIRLOCK_MCP_MCP_SERVER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace airlock::mcp {

inline constexpr char kLatestProtocol[] = "2025-11-25";

// One tools/call in progress.
class ToolCall {
 public:
  explicit ToolCall(nlohmann::json arguments) : arguments_(std::move(arguments)) {}
  const nlohmann::json& arguments() const { return arguments_; }
  // Reports progress of a long call (sent only if the client gave a progressToken).
  void Progress(double done, const std::string& message) const {
    if (progress_) progress_(done, message);
  }
  bool cancelled() const { return cancelled_; }
  // What aborts the work in flight (e.g. cancelling its gRPC call); runs at once if the call
  // was cancelled already.
  void SetCanceller(std::function<void()> cancel);

 private:
  friend class McpServer;
  void Cancel();
  nlohmann::json arguments_;
  std::function<void(double, const std::string&)> progress_;
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  std::function<void()> cancel_ ABSL_GUARDED_BY(mu_);
};

struct ToolResult {
  nlohmann::json structured = nlohmann::json::object();  // matches the tool's outputSchema
  std::string text;                                      // a summary for the model
  bool is_error = false;  // the message is in text; no structured content then
};

inline ToolResult ToolError(std::string message) { return {nullptr, std::move(message), true}; }

struct Tool {
  std::string name;
  std::string title;
  std::string description;
  nlohmann::json input_schema;
  nlohmann::json output_schema;
  bool read_only = false;
  bool destructive = false;
  bool idempotent = false;
  bool open_world = false;
  std::function<ToolResult(ToolCall&)> run;
};

class McpServer {
 public:
  using Writer = std::function<void(const std::string& line)>;
  McpServer(std::vector<Tool> tools, Writer write, std::string version);
  ~McpServer();

  // Handles one line from the client; tool calls are started and run on.
  void HandleLine(std::string_view line);
  // Waits until no tool call is running.
  void Wait();
  // At the end of input: cancels the calls in flight (their commands are stopped) and waits
  // for them to wind up.
  void CancelAllAndWait();
  // Where one line per finished call goes (the tool, how it ended, how long it took).
  void set_log(std::function<void(const std::string&)> log) { log_ = std::move(log); }

  nlohmann::json ToolList() const;

 private:
  void Send(const std::string& line);
  void StartCall(const nlohmann::json& id, const nlohmann::json& params);

  std::vector<Tool> tools_;
  Writer write_;
  std::function<void(const std::string&)> log_;
  std::string version_;
  absl::Mutex write_mu_;
  absl::Mutex mu_;
  absl::CondVar idle_;
  std::map<std::string, std::shared_ptr<ToolCall>> calls_ ABSL_GUARDED_BY(mu_);  // by id (dumped)
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  // Call threads, joined once done (and all of them on destruction).
  std::vector<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> threads_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace airlock::mcp

#endif  // AIRLOCK_MCP_MCP_SERVER_H_
