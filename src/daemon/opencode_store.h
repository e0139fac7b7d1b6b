// OpenCode's own record, as timeline events. OpenCode keeps its sessions in a SQLite database
// (~/.local/share/opencode/opencode.db); each part of a message is a row whose JSON it updates
// in place: a prompt's text, the agent's text (finished when it has time.end), a tool call
// (state pending, running, then completed with its output or error), and parts that say
// nothing to a person (steps, snapshots, patches) or are kept out of the timeline as Claude
// Code's are (reasoning). The guest reads rows changed since the last reading
// (kReadAgentStore); this turns them into the same kinds of events as Claude Code's
// transcripts, each once: agent.prompt, agent.message, agent.tool_call, agent.tool_result.
#ifndef AIRLOCK_DAEMON_OPENCODE_STORE_H_
#define AIRLOCK_DAEMON_OPENCODE_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "src/daemon/agent_transcripts.h"

namespace airlock {

// Rows asked for in one reading, and their data in all.
inline constexpr uint32_t kOpenCodeRowsPerReading = 512;
inline constexpr uint32_t kOpenCodeBytesPerReading = 2 << 20;
// Parts whose state is remembered (what was said of each); beyond, a part's events may come
// twice, and the timeline says so once.
inline constexpr size_t kMaxOpenCodeParts = 20000;

class OpenCodeFollower : public AgentFollower {
 public:
  // Parts changed before started_ms (less a few seconds of clock) belong to earlier commands.
  OpenCodeFollower(const AgentKind& kind, std::string user, int64_t exec_id, int64_t started_ms);

  AgentStoreMessage NextRequest() const;
  // The events the rows add. last: the command has ended: a text not finished yet is said as
  // it is, and a call never run as called.
  std::vector<AgentEvent> Take(const std::vector<StoreRow>& rows, int64_t now_ms, bool last);
  std::vector<AgentEvent> Poll(GuestChannel& channel, int64_t now_ms, bool last) override;
  AgentPosition Position() const override;
  void StartAt(const AgentPosition& position) override;

 private:
  // What was said of a part, and what waits to be said at the end.
  struct PartState {
    bool prompt = false, message = false, call = false, result = false;
    std::string pending_text;  // an assistant's text not finished yet
  };
  void Row(const StoreRow& row, int64_t now_ms, std::vector<AgentEvent>* out);
  AgentEvent Event(const char* kind, int64_t unix_ms, std::string text, std::string tool_id = "",
                   std::string tool = "") const;

  AgentKind kind_;
  std::string user_;
  int64_t exec_id_;
  int64_t started_ms_;
  int64_t after_ms_;
  std::string after_id_;
  std::map<std::string, PartState> parts_;
  bool said_full_ = false;
  uint64_t unread_ = 0;  // rows over the size cap, not said yet
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_OPENCODE_STORE_H_
