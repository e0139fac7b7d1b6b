#include "src/mcp/mcp_server.h"

#include <chrono>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "src/mcp/json_rpc.h"

namespace airlock::mcp {
namespace {

constexpr const char* kProtocols[] = {"2025-11-25", "2025-06-18"};

constexpr char kInstructions[] =
    "Airlock runs code in disposable microVMs with their own kernel, hard CPU/memory/process "
    "limits and no network. Use run_code for a one-off program; use a session (session_create, "
    "then session_exec, file_write, file_read) when state must last between commands; pause, "
    "resume and fork sessions to keep or branch their state. Output comes back capped per "
    "stream, with flags saying when it was truncated.";

}  // namespace

void ToolCall::SetCanceller(std::function<void()> cancel) {
  absl::MutexLock lock(&mu_);
  cancel_ = std::move(cancel);
  if (cancelled_ && cancel_) cancel_();
}

void ToolCall::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (cancel_) cancel_();
}

McpServer::McpServer(std::vector<Tool> tools, Writer write, std::string version)
    : tools_(std::move(tools)), write_(std::move(write)), version_(std::move(version)) {}

McpServer::~McpServer() {
  Wait();
  for (auto& [thread, done] : threads_) thread.join();
}

void McpServer::Send(const std::string& line) {
  absl::MutexLock lock(&write_mu_);
  write_(line);
}

void McpServer::Wait() {
  absl::MutexLock lock(&mu_);
  while (running_ != 0) idle_.Wait(&mu_);
}

void McpServer::CancelAllAndWait() {
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, call] : calls_) call->Cancel();
  }
  Wait();
}

nlohmann::json McpServer::ToolList() const {
  nlohmann::json list = nlohmann::json::array();
  for (const Tool& t : tools_) {
    list.push_back({{"name", t.name},
                    {"title", t.title},
                    {"description", t.description},
                    {"inputSchema", t.input_schema},
                    {"outputSchema", t.output_schema},
                    {"annotations",
                     {{"title", t.title},
                      {"readOnlyHint", t.read_only},
                      {"destructiveHint", t.destructive},
                      {"idempotentHint", t.idempotent},
                      {"openWorldHint", t.open_world}}}});
  }
  return list;
}

void McpServer::HandleLine(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.empty()) return;
  std::variant<RpcMessage, RpcError> parsed = ParseRpc(line);
  if (const RpcError* error = std::get_if<RpcError>(&parsed)) {
    Send(RpcErrorReply(*error));
    return;
  }
  const RpcMessage& m = std::get<RpcMessage>(parsed);
  if (m.kind == RpcMessage::Kind::kResponse) return;  // we send no requests
  if (m.kind == RpcMessage::Kind::kNotification) {
    if (m.method == "notifications/cancelled") {
      auto it = m.params.find("requestId");
      if (it == m.params.end()) return;
      absl::MutexLock lock(&mu_);
      auto call = calls_.find(it->dump());
      if (call != calls_.end()) call->second->Cancel();
    }
    return;  // notifications/initialized and others need nothing
  }
  if (m.method == "initialize") {
    std::string asked;
    if (auto it = m.params.find("protocolVersion"); it != m.params.end() && it->is_string()) {
      asked = it->get<std::string>();
    }
    std::string version = kLatestProtocol;
    for (const char* p : kProtocols) {
      if (asked == p) version = p;
    }
    Send(RpcResult(m.id, {{"protocolVersion", version},
                          {"capabilities", {{"tools", {{"listChanged", false}}}}},
                          {"serverInfo", {{"name", "airlock"}, {"version", version_}}},
                          {"instructions", kInstructions}}));
  } else if (m.method == "ping") {
    Send(RpcResult(m.id, nlohmann::json::object()));
  } else if (m.method == "tools/list") {
    Send(RpcResult(m.id, {{"tools", ToolList()}}));
  } else if (m.method == "tools/call") {
    StartCall(m.id, m.params);
  } else {
    Send(RpcErrorReply({kMethodNotFound, "unknown method " + m.method.substr(0, 100), m.id}));
  }
}

void McpServer::StartCall(const nlohmann::json& id, const nlohmann::json& params) {
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    Send(RpcErrorReply({kInvalidParams, "tools/call needs the tool's name", id}));
    return;
  }
  const Tool* tool = nullptr;
  for (const Tool& t : tools_) {
    if (t.name == name->get<std::string>()) tool = &t;
  }
  if (tool == nullptr) {
    Send(RpcErrorReply(
        {kInvalidParams, "unknown tool " + name->get<std::string>().substr(0, 100), id}));
    return;
  }
  nlohmann::json arguments = nlohmann::json::object();
  if (auto it = params.find("arguments"); it != params.end()) {
    if (!it->is_object()) {
      Send(RpcErrorReply({kInvalidParams, "arguments must be an object", id}));
      return;
    }
    arguments = *it;
  }
  auto call = std::make_shared<ToolCall>(std::move(arguments));
  if (auto meta = params.find("_meta"); meta != params.end() && meta->is_object()) {
    auto token = meta->find("progressToken");
    if (token != meta->end() && (token->is_string() || token->is_number_integer())) {
      call->progress_ = [this, token = *token](double done, const std::string& message) {
        Send(RpcNotification("notifications/progress",
                             {{"progressToken", token}, {"progress", done}, {"message", message}}));
      };
    }
  }
  std::string key = id.dump();
  auto done = std::make_shared<std::atomic<bool>>(false);
  absl::MutexLock lock(&mu_);
  if (calls_.count(key)) {
    Send(RpcErrorReply({kInvalidRequest, "a call with this id is already running", id}));
    return;
  }
  calls_[key] = call;
  ++running_;
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (*it->second) {
      it->first.join();
      it = threads_.erase(it);
    } else {
      ++it;
    }
  }
  std::thread thread([this, id, key, call, tool, done] {
    auto started = std::chrono::steady_clock::now();
    ToolResult result;
    try {
      result = tool->run(*call);
    } catch (const std::exception& e) {
      result = ToolError(std::string("internal error: ") + e.what());
    }
    if (log_) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - started)
                    .count();
      log_(tool->name + ": " +
           (call->cancelled() ? "cancelled"
            : result.is_error ? "error: " + result.text.substr(0, 200)
                              : "ok") +
           " (" + std::to_string(ms) + " ms)");
    }
    if (!call->cancelled()) {  // a cancelled request gets no answer
      nlohmann::json reply = {{"content", {{{"type", "text"}, {"text", result.text}}}},
                              {"isError", result.is_error}};
      if (!result.is_error) reply["structuredContent"] = result.structured;
      Send(RpcResult(id, reply));
    }
    absl::MutexLock lock(&mu_);
    calls_.erase(key);
    if (--running_ == 0) idle_.SignalAll();
    *done = true;
  });
  threads_.emplace_back(std::move(thread), done);
}

}  // namespace airlock::mcp
