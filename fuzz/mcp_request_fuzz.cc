// Fuzz target: lines a hostile MCP client sends to `airlock mcp`. Every line must get a well-formed
// JSON-RPC answer (or none, for notifications and responses), never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/mcp/json_rpc.h"
#include "src/mcp/mcp_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using airlock::mcp::Tool;
  Tool echo{"echo", "Echo", "", {{"type", "object"}}, {{"type", "object"}}};
  echo.run = [](airlock::mcp::ToolCall& call) {
    call.Progress(1, "x");
    return airlock::mcp::ToolResult{call.arguments(), "ok", false};
  };
  airlock::mcp::McpServer server(
      {echo},
      [](const std::string& line) {
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_object() || j["jsonrpc"] != "2.0") __builtin_trap();
      },
      "fuzz");
  std::string input(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  while (start <= input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string::npos) end = input.size();
    server.HandleLine(std::string_view(input).substr(start, end - start));
    start = end + 1;
  }
  server.Wait();
  (void)airlock::mcp::EscapeInvalidUtf8(input);
  return 0;
}
