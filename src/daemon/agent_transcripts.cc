#include "src/daemon/agent_transcripts.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "src/common/log.h"
#include "src/daemon/agent_json.h"
#include "src/daemon/opencode_store.h"
#include "src/daemon/timeline.h"

namespace airlock {
namespace {

const std::vector<AgentKind>& Agents() {
  static const auto* agents = new std::vector<AgentKind>{
      {"claude", AgentKind::Record::kJsonLines, ".claude/projects", ".jsonl", 1},
      {"opencode", AgentKind::Record::kOpenCodeStore, ".local/share/opencode", "opencode.db"},
  };
  return *agents;
}

// A tool result's content: a string, or blocks of which the text ones are kept.
std::string ResultText(const nlohmann::json* content) {
  if (content == nullptr) return "";
  if (content->is_string()) return content->get<std::string>();
  std::string out;
  if (content->is_array()) {
    for (const nlohmann::json& block : *content) {
      std::string type = JsonString(JsonMember(block, "type"));
      if (type == "text") {
        absl::StrAppend(&out, out.empty() ? "" : "\n", JsonString(JsonMember(block, "text")));
      } else if (!type.empty()) {
        absl::StrAppend(&out, out.empty() ? "" : "\n", "[", type, "]");
      }
      if (out.size() > kAgentTextBytes) break;
    }
  }
  return out;
}

// "2026-12-01T09:30:00.123Z" in milliseconds, if it is within [earliest, now]; now when it is
// later or not a time; nullopt when it is earlier.
std::optional<int64_t> TimeOf(const nlohmann::json* stamp, int64_t earliest_ms, int64_t now_ms) {
  absl::Time t;
  std::string err;
  if (stamp == nullptr || !stamp->is_string() ||
      !absl::ParseTime(absl::RFC3339_full, stamp->get<std::string>(), &t, &err)) {
    return now_ms;
  }
  int64_t ms = absl::ToUnixMillis(t);
  if (ms < earliest_ms) return std::nullopt;
  return std::min(ms, now_ms);
}

}  // namespace

const AgentKind* FindAgent(std::string_view name) {
  for (const AgentKind& a : Agents()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string KnownAgents() {
  std::vector<std::string> names;
  for (const AgentKind& a : Agents()) names.push_back(a.name);
  return absl::StrJoin(names, ", ");
}

std::vector<AgentEvent> ParseClaudeLine(std::string_view line, int64_t exec_id, int64_t earliest_ms,
                                        int64_t now_ms) {
  std::vector<AgentEvent> out;
  if (line.size() > kMaxTranscriptLine) return out;
  nlohmann::json j = ParseAgentJson(line);
  if (!j.is_object()) return out;
  std::string type = JsonString(JsonMember(j, "type"));
  const nlohmann::json* meta = JsonMember(j, "isMeta");
  if ((type != "user" && type != "assistant") ||
      (meta != nullptr && meta->is_boolean() && meta->get<bool>())) {
    return out;
  }
  std::optional<int64_t> stamped = TimeOf(JsonMember(j, "timestamp"), earliest_ms, now_ms);
  if (!stamped) return out;  // written before this command: an earlier one took it
  int64_t when = *stamped;
  const nlohmann::json* message = JsonMember(j, "message");
  const nlohmann::json* content = message != nullptr ? JsonMember(*message, "content") : nullptr;
  auto add = [&](const char* kind, std::string text, std::string tool_id = "",
                 std::string tool = "") {
    AgentEvent e;
    e.unix_ms = when;
    e.kind = kind;
    e.agent = "claude";
    e.exec_id = exec_id;
    e.tool_id = CutAgentText(std::move(tool_id)).substr(0, 256);
    e.tool = CutAgentText(std::move(tool)).substr(0, 256);
    e.text = CutAgentText(std::move(text));
    out.push_back(std::move(e));
  };
  if (content == nullptr) return out;
  if (content->is_string()) {
    add(type == "user" ? "agent.prompt" : "agent.message", content->get<std::string>());
    return out;
  }
  if (!content->is_array()) return out;
  for (const nlohmann::json& block : *content) {
    if (out.size() >= 64) break;  // one line stands for a handful of events, not thousands
    std::string block_type = JsonString(JsonMember(block, "type"));
    if (block_type == "text") {
      add(type == "user" ? "agent.prompt" : "agent.message", JsonString(JsonMember(block, "text")));
    } else if (block_type == "tool_use") {
      const nlohmann::json* input = JsonMember(block, "input");
      add("agent.tool_call",
          input != nullptr ? input->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                           : "",
          JsonString(JsonMember(block, "id")), JsonString(JsonMember(block, "name")));
    } else if (block_type == "tool_result") {
      const nlohmann::json* error = JsonMember(block, "is_error");
      bool failed = error != nullptr && error->is_boolean() && error->get<bool>();
      add("agent.tool_result",
          absl::StrCat(failed ? "[error] " : "", ResultText(JsonMember(block, "content"))),
          JsonString(JsonMember(block, "tool_use_id")));
    }
  }
  return out;
}

std::optional<AgentPosition> AgentPositions::Get(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = positions_.find(key);
  if (it == positions_.end()) return std::nullopt;
  return it->second;
}

void AgentPositions::Put(const std::string& key, AgentPosition position) {
  absl::MutexLock lock(&mu_);
  positions_[key] = std::move(position);
}

std::unique_ptr<AgentFollower> MakeAgentFollower(const AgentKind& kind, std::string user,
                                                 int64_t exec_id, int64_t started_ms) {
  if (kind.record == AgentKind::Record::kOpenCodeStore) {
    return std::make_unique<OpenCodeFollower>(kind, std::move(user), exec_id, started_ms);
  }
  return std::make_unique<TranscriptFollower>(kind, std::move(user), exec_id, started_ms);
}

TranscriptFollower::TranscriptFollower(const AgentKind& kind, std::string user, int64_t exec_id,
                                       int64_t started_ms)
    : kind_(kind), user_(std::move(user)), exec_id_(exec_id), started_ms_(started_ms) {}

AgentPosition TranscriptFollower::Position() const {
  AgentPosition p;
  for (const auto& [name, state] : files_) {
    // Whole lines only: an unfinished one is read again, from its start, by the next follower.
    p.offsets[name] = state.skipping ? state.offset : state.offset - state.partial.size();
  }
  return p;
}

void TranscriptFollower::StartAt(const AgentPosition& position) {
  for (const auto& [name, offset] : position.offsets) {
    if (files_.size() >= kMaxTailFiles) break;
    files_[name].offset = offset;
  }
}

TailRequest TranscriptFollower::NextRequest() const {
  TailRequest r;
  r.user = user_;
  r.dir = kind_.dir;
  r.suffix = kind_.suffix;
  r.depth = kind_.depth;
  r.max_bytes = 1 << 20;
  for (const auto& [name, state] : files_) r.offsets[name] = state.offset;
  return r;
}

void TranscriptFollower::Line(std::string_view line, int64_t now_ms, std::vector<AgentEvent>* out,
                              size_t* kept) {
  if (*kept >= kMaxAgentEventsPerFile) {
    ++lines_over_;  // a flood: counted, said once below
    return;
  }
  std::vector<AgentEvent> events = ParseClaudeLine(
      line, exec_id_, std::max<int64_t>(0, started_ms_ - kTranscriptClockSlackMs), now_ms);
  *kept += events.size();
  for (AgentEvent& e : events) out->push_back(std::move(e));
}

std::vector<AgentEvent> TranscriptFollower::Take(const std::vector<TailRecord>& records,
                                                 int64_t now_ms) {
  std::vector<AgentEvent> out;
  for (const TailRecord& r : records) {
    auto it = files_.find(r.name);
    if (it == files_.end()) {
      if (files_.size() >= kMaxTailFiles) continue;
      it = files_.emplace(r.name, FileState()).first;
    }
    FileState& f = it->second;
    size_t kept = 0;                            // events of this file in this reading
    if (r.offset != f.offset) f = FileState();  // rewritten or shrunk: read anew
    f.offset = r.offset + r.bytes.size();
    std::string_view data = r.bytes;
    while (!data.empty()) {
      size_t nl = data.find('\n');
      std::string_view piece = data.substr(0, nl);
      if (f.skipping) {
        if (nl != std::string_view::npos) f.skipping = false;
      } else if (f.partial.size() + piece.size() > kMaxTranscriptLine) {
        f.partial.clear();
        f.skipping = nl == std::string_view::npos;
        AgentEvent note;
        note.unix_ms = now_ms;
        note.kind = "agent.note";
        note.agent = kind_.name;
        note.exec_id = exec_id_;
        note.text =
            absl::StrCat("a line of ", r.name, " over ", kMaxTranscriptLine, " bytes was skipped");
        out.push_back(std::move(note));
      } else if (nl == std::string_view::npos) {
        f.partial.append(piece);
      } else if (f.partial.empty()) {
        Line(piece, now_ms, &out, &kept);
      } else {
        f.partial.append(piece);
        Line(f.partial, now_ms, &out, &kept);
        f.partial.clear();
      }
      data = nl == std::string_view::npos ? std::string_view() : data.substr(nl + 1);
    }
  }
  if (lines_over_ > 0) {
    AgentEvent note;
    note.unix_ms = now_ms;
    note.kind = "agent.note";
    note.agent = kind_.name;
    note.exec_id = exec_id_;
    note.text = absl::StrCat(lines_over_, " transcript lines were not kept (more than ",
                             kMaxAgentEventsPerFile, " events of one file in one reading)");
    out.push_back(std::move(note));
    lines_over_ = 0;
  }
  return out;
}

TranscriptCollector::TranscriptCollector(StateStore* store, SessionRecord session,
                                         std::shared_ptr<GuestChannel> channel,
                                         const AgentKind& kind, std::string user, int64_t exec_id,
                                         AgentPositions* positions, absl::Duration interval)
    : store_(store),
      session_(std::move(session)),
      channel_(std::move(channel)),
      follower_(MakeAgentFollower(kind, user, exec_id, NowUnixMs())),
      positions_(positions),
      position_key_(absl::StrCat(kind.name, "/", user)),
      interval_(interval) {
  if (positions_ != nullptr) {
    if (std::optional<AgentPosition> p = positions_->Get(position_key_)) follower_->StartAt(*p);
  }
  thread_ = std::thread([this] {
    absl::MutexLock lock(&mu_);
    while (!stopping_) {
      absl::Time until = absl::Now() + interval_;
      while (!stopping_ && !cv_.WaitWithDeadline(&mu_, until)) {
      }
      if (stopping_) break;
      mu_.Unlock();
      Poll(/*last=*/false);
      mu_.Lock();
    }
  });
}

TranscriptCollector::~TranscriptCollector() { Stop(); }

void TranscriptCollector::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.SignalAll();
  thread_.join();
  Poll(/*last=*/true);  // what was written just before the command ended
  if (positions_ != nullptr) positions_->Put(position_key_, follower_->Position());
}

std::vector<AgentEvent> TranscriptFollower::Poll(GuestChannel& channel, int64_t now_ms, bool) {
  absl::StatusOr<std::vector<TailRecord>> records =
      channel.TailFiles(NextRequest(), absl::Now() + absl::Seconds(10));
  // No directory yet (the agent has written nothing), or the VM is going: nothing to add.
  if (!records.ok()) return {};
  return Take(*records, now_ms);
}

void TranscriptCollector::Poll(bool last) {
  std::vector<AgentEvent> events = follower_->Poll(*channel_, NowUnixMs(), last);
  // The command goes on either way.
  LogIfFailed(store_->commands().AppendAgentEvents(session_, events),
              absl::StrCat("session ", session_.id, ": agent events not stored"));
}

}  // namespace airlock
