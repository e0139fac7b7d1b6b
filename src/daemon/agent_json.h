// What the readers of coding agents' own records (Claude Code's transcripts, OpenCode's store)
// share: JSON the guest wrote, parsed with bounded nesting, and texts cut to the timeline's cap.
#ifndef AIRLOCK_DAEMON_AGENT_JSON_H_
#define AIRLOCK_DAEMON_AGENT_JSON_H_

#include <string>
#include <string_view>

#include "nlohmann/json.hpp"

namespace airlock {

// Deeper JSON is not parsed.
inline constexpr int kMaxAgentJsonNesting = 64;

// The JSON text as a value, or a discarded value when it is not JSON or nests deeper than
// kMaxAgentJsonNesting. Invalid UTF-8 is kept, as \xNN, instead of making it unreadable.
nlohmann::json ParseAgentJson(std::string_view text);

// The text cut at kAgentTextBytes, saying so.
std::string CutAgentText(std::string text);

// j[key] when j is an object that has it; else nullptr.
const nlohmann::json* JsonMember(const nlohmann::json& j, const char* key);
// The string j is, or fallback.
std::string JsonString(const nlohmann::json* j, std::string fallback = "");

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_AGENT_JSON_H_
