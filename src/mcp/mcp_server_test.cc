#include "src/mcp/mcp_server.h"

#include <gtest/gtest.h>

#include <thread>

#include "absl/synchronization/mutex.h"
#include "src/mcp/json_rpc.h"

namespace airlock::mcp {
namespace {

using json = nlohmann::json;

// A server with two tools, recording what it writes.
class Harness {
 public:
  Harness() {
    Tool echo{"echo",
              "Echo",
              "says what it got",
              {{"type", "object"}, {"properties", {{"text", {{"type", "string"}}}}}},
              {{"type", "object"}, {"properties", {{"text", {{"type", "string"}}}}}}};
    echo.read_only = true;
    echo.run = [](ToolCall& call) {
      auto it = call.arguments().find("text");
      if (it == call.arguments().end() || !it->is_string()) return ToolError("text is required");
      call.Progress(1, "halfway");
      return ToolResult{{{"text", *it}}, it->get<std::string>(), false};
    };
    Tool wait{"wait", "Wait", "waits until cancelled", {{"type", "object"}}, {{"type", "object"}}};
    wait.run = [this](ToolCall& call) {
      absl::Mutex mu;
      absl::CondVar cv;
      bool stop = false;
      call.SetCanceller([&] {
        absl::MutexLock lock(&mu);
        stop = true;
        cv.SignalAll();
      });
      waiting_ = true;
      {
        absl::MutexLock lock(&mu);
        while (!stop) cv.Wait(&mu);
      }
      call.SetCanceller(nullptr);
      return ToolResult{json::object(), "stopped", false};
    };
    server_ = std::make_unique<McpServer>(
        std::vector<Tool>{echo, wait},
        [this](const std::string& line) {
          absl::MutexLock lock(&mu_);
          lines_.push_back(line);
        },
        "test");
  }
  // Sends a line and returns the messages written in reply once the server is idle.
  std::vector<json> Send(const std::string& line) {
    server_->HandleLine(line);
    server_->Wait();
    absl::MutexLock lock(&mu_);
    std::vector<json> out;
    for (const std::string& l : lines_) {
      EXPECT_EQ(l.find('\n'), std::string::npos);
      out.push_back(json::parse(l));
    }
    lines_.clear();
    return out;
  }
  McpServer& server() { return *server_; }
  std::atomic<bool> waiting_{false};

 private:
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<McpServer> server_;
};

TEST(McpServerTest, InitializeNegotiatesAProtocolVersion) {
  Harness h;
  auto r = h.Send(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(r[0]["result"]["serverInfo"]["name"], "airlock");
  EXPECT_TRUE(r[0]["result"]["capabilities"].contains("tools"));
  r = h.Send(
      R"({"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"1999-01-01"}})");
  EXPECT_EQ(r[0]["result"]["protocolVersion"], kLatestProtocol);
  EXPECT_TRUE(h.Send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})").empty());
  r = h.Send(R"({"jsonrpc":"2.0","id":"p","method":"ping"})");
  EXPECT_EQ(r[0]["id"], "p");
  EXPECT_TRUE(r[0]["result"].is_object());
}

TEST(McpServerTest, ToolsListCarriesSchemasAndAnnotations) {
  Harness h;
  auto r = h.Send(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  const json& tools = r[0]["result"]["tools"];
  ASSERT_EQ(tools.size(), 2u);
  EXPECT_EQ(tools[0]["name"], "echo");
  EXPECT_EQ(tools[0]["inputSchema"]["type"], "object");
  EXPECT_EQ(tools[0]["outputSchema"]["type"], "object");
  EXPECT_EQ(tools[0]["annotations"]["readOnlyHint"], true);
  EXPECT_EQ(tools[0]["annotations"]["destructiveHint"], false);
  EXPECT_TRUE(tools[0]["annotations"].contains("idempotentHint"));
  EXPECT_TRUE(tools[0]["annotations"].contains("openWorldHint"));
}

TEST(McpServerTest, ToolCallsReturnStructuredContentProgressAndErrors) {
  Harness h;
  auto r = h.Send(
      R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":"t1"}}})");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["method"], "notifications/progress");
  EXPECT_EQ(r[0]["params"]["progressToken"], "t1");
  EXPECT_EQ(r[1]["id"], 7);
  EXPECT_EQ(r[1]["result"]["structuredContent"]["text"], "hi");
  EXPECT_EQ(r[1]["result"]["content"][0]["text"], "hi");
  EXPECT_EQ(r[1]["result"]["isError"], false);
  // A bad argument is the tool's error, for the model to read.
  r = h.Send(
      R"({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{}}})");
  EXPECT_EQ(r[0]["result"]["isError"], true);
  EXPECT_FALSE(r[0]["result"].contains("structuredContent"));
  EXPECT_EQ(r[0]["result"]["content"][0]["text"], "text is required");
  // An unknown tool or method, or a malformed message, is a JSON-RPC error.
  r = h.Send(R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"nope"}})");
  EXPECT_EQ(r[0]["error"]["code"], kInvalidParams);
  r = h.Send(R"({"jsonrpc":"2.0","id":10,"method":"nope"})");
  EXPECT_EQ(r[0]["error"]["code"], kMethodNotFound);
  r = h.Send("{not json");
  EXPECT_EQ(r[0]["error"]["code"], kParseError);
  EXPECT_TRUE(r[0]["id"].is_null());
  r = h.Send(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])");
  EXPECT_EQ(r[0]["error"]["code"], kInvalidRequest);
  r = h.Send(R"({"jsonrpc":"1.0","id":11,"method":"ping"})");
  EXPECT_EQ(r[0]["error"]["code"], kInvalidRequest);
  EXPECT_EQ(r[0]["id"], 11);
  r = h.Send(R"({"jsonrpc":"2.0","id":{"x":1},"method":"ping"})");
  EXPECT_EQ(r[0]["error"]["code"], kInvalidRequest);
}

TEST(McpServerTest, CancellationStopsACallAndItGetsNoAnswer) {
  Harness h;
  h.server().HandleLine(
      R"({"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"wait"}})");
  while (!h.waiting_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // The server keeps answering while the call runs.
  auto r = h.Send(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long"}})");
  EXPECT_TRUE(r.empty());
  r = h.Send(R"({"jsonrpc":"2.0","id":2,"method":"ping"})");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["id"], 2);
}

TEST(McpServerTest, TheEndOfInputCancelsCallsInFlight) {
  Harness h;
  std::vector<std::string> log;
  h.server().set_log([&](const std::string& line) { log.push_back(line); });
  h.server().HandleLine(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait"}})");
  while (!h.waiting_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  h.server().CancelAllAndWait();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].rfind("wait: cancelled", 0), 0u) << log[0];
}

TEST(JsonRpcTest, InvalidUtf8IsEscapedNotDropped) {
  bool escaped = false;
  EXPECT_EQ(EscapeInvalidUtf8("ok \xc3\xa9 \xff\xfe end", &escaped), "ok \xc3\xa9 \\xff\\xfe end");
  EXPECT_TRUE(escaped);
  escaped = false;
  EXPECT_EQ(EscapeInvalidUtf8("\xe2\x82", &escaped), "\\xe2\\x82");  // cut short
  EXPECT_EQ(EscapeInvalidUtf8("\xed\xa0\x80"), "\\xed\\xa0\\x80");   // a surrogate
  EXPECT_EQ(EscapeInvalidUtf8("\xc0\xaf"), "\\xc0\\xaf");            // overlong
  escaped = false;
  EXPECT_EQ(EscapeInvalidUtf8("plain\n", &escaped), "plain\n");
  EXPECT_FALSE(escaped);
}

}  // namespace
}  // namespace airlock::mcp
