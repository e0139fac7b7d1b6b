#include "src/daemon/opencode_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/daemon/agent_json.h"
#include "src/daemon/timeline.h"

namespace airlock {
namespace {

// Parts changed this long before the command started are taken for its own (clocks differ).
constexpr int64_t kClockSlackMs = 5000;

// A time the part gives (milliseconds), if it is a number within [earliest, now]; else fallback.
int64_t MillisOr(const nlohmann::json* stamp, int64_t earliest_ms, int64_t now_ms,
                 int64_t fallback) {
  if (stamp == nullptr || !stamp->is_number()) return fallback;
  double ms = stamp->get<double>();
  return ms >= static_cast<double>(earliest_ms) && ms <= static_cast<double>(now_ms)
             ? static_cast<int64_t>(ms)
             : fallback;
}

}  // namespace

OpenCodeFollower::OpenCodeFollower(const AgentKind& kind, std::string user, int64_t exec_id,
                                   int64_t started_ms)
    : kind_(kind),
      user_(std::move(user)),
      exec_id_(exec_id),
      started_ms_(started_ms),
      after_ms_(started_ms - kClockSlackMs) {}

AgentPosition OpenCodeFollower::Position() const {
  return AgentPosition{.after_ms = after_ms_, .after_id = after_id_};
}

void OpenCodeFollower::StartAt(const AgentPosition& position) {
  // Only forward: what an earlier command read is its own.
  if (position.after_ms > after_ms_ ||
      (position.after_ms == after_ms_ && position.after_id > after_id_)) {
    after_ms_ = position.after_ms;
    after_id_ = position.after_id;
  }
}

AgentStoreMessage OpenCodeFollower::NextRequest() const {
  return AgentStoreMessage{.store = static_cast<uint32_t>(AgentStore::kOpenCode),
                           .user = user_,
                           .path = absl::StrCat(kind_.dir, "/", kind_.suffix),
                           .after_ms = after_ms_,
                           .after_id = after_id_,
                           .max_rows = kOpenCodeRowsPerReading,
                           .max_bytes = kOpenCodeBytesPerReading};
}

AgentEvent OpenCodeFollower::Event(const char* kind, int64_t unix_ms, std::string text,
                                   std::string tool_id, std::string tool) const {
  AgentEvent e;
  e.unix_ms = unix_ms;
  e.kind = kind;
  e.agent = kind_.name;
  e.exec_id = exec_id_;
  e.tool_id = CutAgentText(std::move(tool_id)).substr(0, 256);
  e.tool = CutAgentText(std::move(tool)).substr(0, 256);
  e.text = CutAgentText(std::move(text));
  return e;
}

void OpenCodeFollower::Row(const StoreRow& row, int64_t now_ms, std::vector<AgentEvent>* out) {
  if (row.data.empty()) {
    ++unread_;  // over the size cap: said below
    return;
  }
  nlohmann::json part = ParseAgentJson(row.data);
  if (!part.is_object()) return;
  std::string type = JsonString(JsonMember(part, "type"));
  if (type != "text" && type != "tool") return;  // nothing a person reads, or reasoning
  auto it = parts_.find(row.id);
  if (it == parts_.end()) {
    if (parts_.size() >= kMaxOpenCodeParts) {
      // Forget the parts that are done with; if none is, events may repeat (said once).
      std::erase_if(parts_, [](const auto& entry) {
        const PartState& p = entry.second;
        return p.prompt || p.message || p.result;
      });
      if (parts_.size() >= kMaxOpenCodeParts) {
        parts_.clear();
        if (!said_full_) {
          out->push_back(Event("agent.note", now_ms,
                               absl::StrCat("more than ", kMaxOpenCodeParts,
                                            " parts under way at once: some may be said twice")));
          said_full_ = true;
        }
      }
    }
    it = parts_.emplace(row.id, PartState()).first;
  }
  PartState& state = it->second;
  int64_t earliest = std::max<int64_t>(0, started_ms_ - 60000);  // no time before 1970
  int64_t changed =
      row.updated_ms >= earliest && row.updated_ms <= now_ms ? row.updated_ms : now_ms;
  if (type == "text") {
    const nlohmann::json* synthetic = JsonMember(part, "synthetic");
    if (synthetic != nullptr && synthetic->is_boolean() && synthetic->get<bool>()) return;
    std::string text = JsonString(JsonMember(part, "text"));
    if (text.empty()) return;
    if (row.role == "user") {
      if (!state.prompt) out->push_back(Event("agent.prompt", changed, std::move(text)));
      state.prompt = true;
      return;
    }
    const nlohmann::json* time = JsonMember(part, "time");
    const nlohmann::json* end = time != nullptr ? JsonMember(*time, "end") : nullptr;
    if (state.message) return;
    if (end == nullptr || !end->is_number()) {
      state.pending_text = CutAgentText(std::move(text));  // said when it ends, or at the end
      return;
    }
    out->push_back(
        Event("agent.message", MillisOr(end, earliest, now_ms, changed), std::move(text)));
    state.message = true;
    state.pending_text.clear();
    return;
  }
  // A tool call: said once it runs (its input complete), its result once it has one.
  std::string call_id = JsonString(JsonMember(part, "callID"));
  std::string tool = JsonString(JsonMember(part, "tool"));
  const nlohmann::json* s = JsonMember(part, "state");
  std::string status = s != nullptr ? JsonString(JsonMember(*s, "status")) : "";
  const nlohmann::json* time = s != nullptr ? JsonMember(*s, "time") : nullptr;
  if (!state.call && (status == "running" || status == "completed" || status == "error")) {
    const nlohmann::json* input = JsonMember(*s, "input");
    std::string text = input != nullptr
                           ? input->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                           : "";
    int64_t when =
        MillisOr(time != nullptr ? JsonMember(*time, "start") : nullptr, earliest, now_ms, changed);
    out->push_back(Event("agent.tool_call", when, std::move(text), call_id, tool));
    state.call = true;
  }
  if (!state.result && (status == "completed" || status == "error")) {
    std::string text = status == "error"
                           ? absl::StrCat("[error] ", JsonString(JsonMember(*s, "error")))
                           : JsonString(JsonMember(*s, "output"));
    int64_t when =
        MillisOr(time != nullptr ? JsonMember(*time, "end") : nullptr, earliest, now_ms, changed);
    out->push_back(Event("agent.tool_result", when, std::move(text), call_id));
    state.result = true;
  }
}

std::vector<AgentEvent> OpenCodeFollower::Take(const std::vector<StoreRow>& rows, int64_t now_ms,
                                               bool last) {
  std::vector<AgentEvent> out;
  for (const StoreRow& row : rows) {
    Row(row, now_ms, &out);
    after_ms_ = row.updated_ms;
    after_id_ = row.id;
  }
  if (unread_ > 0) {
    out.push_back(Event("agent.note", now_ms,
                        absl::StrCat(unread_, " parts of OpenCode's store over ", kMaxStoreRowBytes,
                                     " bytes were not read")));
    unread_ = 0;
  }
  if (last) {
    for (auto& [id, state] : parts_) {
      if (state.message || state.pending_text.empty()) continue;
      out.push_back(Event("agent.message", now_ms, std::move(state.pending_text)));
      state.message = true;
    }
  }
  return out;
}

std::vector<AgentEvent> OpenCodeFollower::Poll(GuestChannel& channel, int64_t now_ms, bool last) {
  std::vector<AgentEvent> out;
  // A reading takes at most a page of rows; a command's end reads what is left, within reason.
  for (int page = 0; page < (last ? 8 : 1); ++page) {
    absl::StatusOr<std::vector<StoreRow>> rows =
        channel.ReadAgentStore(NextRequest(), absl::Now() + absl::Seconds(15));
    // No store yet (the agent has written nothing), a store locked or unreadable now, or the
    // VM going: nothing to add this time.
    bool more = rows.ok() && rows->size() == kOpenCodeRowsPerReading;
    bool final_page = last && (!more || page == 7);
    std::vector<AgentEvent> events =
        Take(rows.ok() ? *rows : std::vector<StoreRow>(), now_ms, final_page);
    for (AgentEvent& e : events) out.push_back(std::move(e));
    if (!more) break;
  }
  return out;
}

}  // namespace airlock
