#include "src/daemon/agent_json.h"

#include <algorithm>

#include "src/common/utf8.h"
#include "src/daemon/timeline.h"

namespace airlock {
namespace {

// How deeply the JSON text nests, counting brackets outside strings; stops counting past cap.
int Nesting(std::string_view text, int cap) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > cap) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

nlohmann::json ParseAgentJson(std::string_view text) {
  if (Nesting(text, kMaxAgentJsonNesting) > kMaxAgentJsonNesting) {
    return nlohmann::json::value_t::discarded;
  }
  return nlohmann::json::parse(EscapeInvalidUtf8(text, nullptr, "\\\\x"), nullptr,
                               /*allow_exceptions=*/false);
}

std::string CutAgentText(std::string text) {
  if (text.size() > kAgentTextBytes) {
    text.resize(kAgentTextBytes);
    text += "\n[cut: the rest of this text is not kept]";
  }
  return text;
}

const nlohmann::json* JsonMember(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string JsonString(const nlohmann::json* j, std::string fallback) {
  return j != nullptr && j->is_string() ? j->get<std::string>() : fallback;
}

}  // namespace airlock
