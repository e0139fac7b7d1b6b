#include "src/mcp/json_rpc.h"

#include <cstdio>

namespace airlock::mcp {
namespace {

bool ValidId(const nlohmann::json& id) { return id.is_string() || id.is_number_integer(); }

}  // namespace

std::variant<RpcMessage, RpcError> ParseRpc(std::string_view line) {
  if (line.size() > kMaxLineBytes) return RpcError{kInvalidRequest, "message too large", nullptr};
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded()) return RpcError{kParseError, "not JSON", nullptr};
  if (!j.is_object()) {
    return RpcError{kInvalidRequest, "expected one JSON-RPC object per line (no batches)", nullptr};
  }
  auto field = [&](const char* key) -> const nlohmann::json* {
    auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  };
  const nlohmann::json* version = field("jsonrpc");
  const nlohmann::json* id = field("id");
  const nlohmann::json* method = field("method");
  const nlohmann::json* params = field("params");
  nlohmann::json reply_id = id && ValidId(*id) ? *id : nlohmann::json(nullptr);
  if (!version || !version->is_string() || version->get<std::string>() != "2.0") {
    return RpcError{kInvalidRequest, "jsonrpc must be \"2.0\"", reply_id};
  }
  if (id && !ValidId(*id)) {
    return RpcError{kInvalidRequest, "id must be a string or an integer", nullptr};
  }
  RpcMessage m;
  if (!method) {
    if (!id || (!field("result") && !field("error"))) {
      return RpcError{kInvalidRequest, "a message needs a method (or a result for an id)",
                      reply_id};
    }
    m.kind = RpcMessage::Kind::kResponse;
    m.id = *id;
    return m;
  }
  if (!method->is_string() || method->get<std::string>().empty()) {
    return RpcError{kInvalidRequest, "method must be a non-empty string", reply_id};
  }
  if (params && !params->is_object()) {
    return RpcError{kInvalidParams, "params must be an object", reply_id};
  }
  m.kind = id ? RpcMessage::Kind::kRequest : RpcMessage::Kind::kNotification;
  m.id = id ? *id : nlohmann::json(nullptr);
  m.method = method->get<std::string>();
  m.params = params ? *params : nlohmann::json::object();
  return m;
}

namespace {

std::string Dump(const nlohmann::json& j) {
  // Strings the server builds are valid UTF-8 already; replace, never throw, if one is not.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string RpcResult(const nlohmann::json& id, const nlohmann::json& result) {
  return Dump({{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
}

std::string RpcErrorReply(const RpcError& error) {
  return Dump({{"jsonrpc", "2.0"},
               {"id", error.id},
               {"error", {{"code", error.code}, {"message", error.message}}}});
}

std::string RpcNotification(const std::string& method, const nlohmann::json& params) {
  return Dump({{"jsonrpc", "2.0"}, {"method", method}, {"params", params}});
}

}  // namespace airlock::mcp
