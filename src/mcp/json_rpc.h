// JSON-RPC 2.0 messages as MCP carries them over stdio: one JSON object per line.
//
// The client is untrusted (a model may drive it): a line is parsed once, bounded, without
// exceptions, and anything that is not a well-formed request, notification or response becomes
// an RpcError the server answers with (fuzz/mcp_request_fuzz.cc).
#ifndef AIRLOCK_MCP_JSON_RPC_H_
#define AIRLOCK_MCP_JSON_RPC_H_

#include <string>
#include <string_view>
#include <variant>

#include "nlohmann/json.hpp"
#include "src/common/utf8.h"

namespace airlock::mcp {

inline constexpr size_t kMaxLineBytes = 8 << 20;

// JSON-RPC error codes.
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;

struct RpcMessage {
  enum class Kind { kRequest, kNotification, kResponse };
  Kind kind = Kind::kRequest;
  nlohmann::json id;      // string or integer; null for notifications
  std::string method;     // empty for responses
  nlohmann::json params;  // an object (empty if absent)
};

struct RpcError {
  int code = kInvalidRequest;
  std::string message;
  nlohmann::json id;  // the request's id if it could be read, else null
};

std::variant<RpcMessage, RpcError> ParseRpc(std::string_view line);

// Serialized messages (one line, no newline). Text is made valid UTF-8 first.
std::string RpcResult(const nlohmann::json& id, const nlohmann::json& result);
std::string RpcErrorReply(const RpcError& error);
std::string RpcNotification(const std::string& method, const nlohmann::json& params);

// The MCP server's text is made valid UTF-8 with this (src/common/utf8.h).
using ::airlock::EscapeInvalidUtf8;

}  // namespace airlock::mcp

#endif  // AIRLOCK_MCP_JSON_RPC_H_
