// Coding agents' own records, read from the guest while the agent runs and turned into
// timeline events: what the user asked, what the agent said, each tool call and its result.
//
// Claude Code appends one JSON object per line to ~/.claude/projects/<project>/<session>.jsonl.
// The host asks the agent for what those files grew by (kTailFiles) every couple of seconds,
// keeps the unfinished last line of each, and parses complete lines. OpenCode keeps a SQLite
// database instead, read by rows (src/daemon/opencode_store.h). Everything in them is
// hostile: lines are capped (longer ones are skipped, and the timeline says so), nesting is
// bounded before any JSON is parsed, texts are cut at kAgentTextBytes, a timestamp outside the
// command's run is replaced by the time it was read, and symbolic links are never followed.
#ifndef AIRLOCK_DAEMON_AGENT_TRANSCRIPTS_H_
#define AIRLOCK_DAEMON_AGENT_TRANSCRIPTS_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/daemon/state_store.h"
#include "src/vm/guest_channel.h"

namespace airlock {

// An agent whose own record airlockd can read: where it keeps it under its user's home.
struct AgentKind {
  enum class Record { kJsonLines, kOpenCodeStore };
  std::string name;  // as ExecStart.agent says it
  Record record = Record::kJsonLines;
  std::string dir;     // relative to the home of the user the agent runs as
  std::string suffix;  // kJsonLines: of its transcript files; kOpenCodeStore: the database
  uint32_t depth = 0;  // subdirectories below dir
};

// nullptr for an agent airlockd does not know.
const AgentKind* FindAgent(std::string_view name);
// The names FindAgent knows, for error messages.
std::string KnownAgents();

// A line longer than this is skipped whole.
inline constexpr size_t kMaxTranscriptLine = 1 << 20;
// Events kept from one file in one reading (every two seconds): a file that floods does not
// crowd out the others; its lines beyond are counted, not kept.
inline constexpr size_t kMaxAgentEventsPerFile = 500;

// The events one line of a Claude Code transcript stands for (none for lines that say nothing
// to a person: summaries, metadata, malformed JSON). Timestamps outside [earliest_ms, now_ms]
// become now_ms.
std::vector<AgentEvent> ParseClaudeLine(std::string_view line, int64_t exec_id, int64_t earliest_ms,
                                        int64_t now_ms);

// One agent's record in one guest, followed incrementally. Not thread-safe.
class AgentFollower {
 public:
  virtual ~AgentFollower() = default;
  // Reads what is new in the guest: the events it adds (none when the agent has written
  // nothing yet, or the VM is going). last: the command has ended, nothing will be finished
  // later.
  virtual std::vector<AgentEvent> Poll(GuestChannel& channel, int64_t now_ms, bool last) = 0;
};

// The follower of kind's record for a command (exec_id) that started at started_ms.
std::unique_ptr<AgentFollower> MakeAgentFollower(const AgentKind& kind, std::string user,
                                                 int64_t exec_id, int64_t started_ms);

// Claude Code's transcript files in one guest: which bytes of each file were seen, and the
// unfinished line at the end of each.
class TranscriptFollower : public AgentFollower {
 public:
  TranscriptFollower(const AgentKind& kind, std::string user, int64_t exec_id, int64_t started_ms);
  TailRequest NextRequest() const;
  // The events of the lines the answer completes.
  std::vector<AgentEvent> Take(const std::vector<TailRecord>& records, int64_t now_ms);
  std::vector<AgentEvent> Poll(GuestChannel& channel, int64_t now_ms, bool last) override;

 private:
  struct FileState {
    uint64_t offset = 0;
    std::string partial;    // an unfinished line
    bool skipping = false;  // inside a line over kMaxTranscriptLine
  };
  void Line(std::string_view line, int64_t now_ms, std::vector<AgentEvent>* out, size_t* kept);

  AgentKind kind_;
  std::string user_;
  int64_t exec_id_;
  int64_t started_ms_;
  std::map<std::string, FileState> files_;
  uint64_t lines_over_ = 0;
};

// Follows an agent's record while its command runs: a thread polls every interval and stores
// what it found as the session's agent events; Stop polls a last time and joins.
class TranscriptCollector {
 public:
  TranscriptCollector(StateStore* store, SessionRecord session,
                      std::shared_ptr<GuestChannel> channel, const AgentKind& kind,
                      std::string user, int64_t exec_id,
                      absl::Duration interval = absl::Seconds(2));
  ~TranscriptCollector();  // Stop()
  void Stop();

 private:
  void Poll(bool last);

  StateStore* store_;
  SessionRecord session_;
  std::shared_ptr<GuestChannel> channel_;
  std::unique_ptr<AgentFollower> follower_;
  absl::Duration interval_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_AGENT_TRANSCRIPTS_H_
