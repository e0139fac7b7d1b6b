// Coding agents' own records, read from the guest while the agent runs and turned into
// timeline events: what the user asked, what the agent said, each tool call and its result.
//
// Claude Code appends one JSON object per line to ~/.claude/projects/<project>/<session>.jsonl.
// The host asks the agent for what those files grew by (kTailFiles) every couple of seconds,
// keeps the unfinished last line of each, and parses complete lines. OpenCode keeps a SQLite
// database instead, read by rows (src/daemon/opencode_store.h). Everything in them is
// hostile: lines are capped (longer ones are skipped, and the timeline says so), nesting is
// bounded before any JSON is parsed, texts are cut at kAgentTextBytes, a timestamp after the
// reading is replaced by the time it was read, a line stamped before the command started is an
// earlier command's (left out), and symbolic links are never followed.
#ifndef AIRLOCK_DAEMON_AGENT_TRANSCRIPTS_H_
#define AIRLOCK_DAEMON_AGENT_TRANSCRIPTS_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
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

// A transcript line stamped earlier than this before its command started was written by an
// earlier command (transcripts are read from their start for each command), whose reading took
// it; the slack is for the guest's clock.
inline constexpr int64_t kTranscriptClockSlackMs = 5000;

// The events one line of a Claude Code transcript stands for (none for lines that say nothing
// to a person: summaries, metadata, malformed JSON, and lines stamped before earliest_ms). A
// timestamp after now_ms, or none, becomes now_ms.
std::vector<AgentEvent> ParseClaudeLine(std::string_view line, int64_t exec_id, int64_t earliest_ms,
                                        int64_t now_ms);

// Where a follower has read an agent's record up to.
struct AgentPosition {
  std::map<std::string, uint64_t> offsets;  // transcript files: bytes of whole lines read
  int64_t after_ms = 0;                     // a store: its cursor
  std::string after_id;
};

// Where each agent's record was read up to in one session (by agent and user), so that the next
// command that runs the agent goes on from there instead of storing the earlier runs again. In
// memory only: after airlockd restarts, a transcript line stamped before its command started is
// taken for an earlier command's. Thread-safe.
class AgentPositions {
 public:
  std::optional<AgentPosition> Get(const std::string& key);
  void Put(const std::string& key, AgentPosition position);

 private:
  absl::Mutex mu_;
  std::map<std::string, AgentPosition> positions_ ABSL_GUARDED_BY(mu_);
};

// One agent's record in one guest, followed incrementally. Not thread-safe.
class AgentFollower {
 public:
  virtual ~AgentFollower() = default;
  // Where it has read up to, and where to begin (before the first Poll).
  virtual AgentPosition Position() const = 0;
  virtual void StartAt(const AgentPosition& position) = 0;
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
  AgentPosition Position() const override;
  void StartAt(const AgentPosition& position) override;

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
  // positions (may be null; outlives this): where the session's earlier commands left this
  // agent's record, and where this one leaves it when it stops.
  TranscriptCollector(StateStore* store, SessionRecord session,
                      std::shared_ptr<GuestChannel> channel, const AgentKind& kind,
                      std::string user, int64_t exec_id, AgentPositions* positions = nullptr,
                      absl::Duration interval = absl::Seconds(2));
  ~TranscriptCollector();  // Stop()
  void Stop();

 private:
  void Poll(bool last);

  StateStore* store_;
  SessionRecord session_;
  std::shared_ptr<GuestChannel> channel_;
  std::unique_ptr<AgentFollower> follower_;
  AgentPositions* positions_;
  std::string position_key_;
  absl::Duration interval_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_AGENT_TRANSCRIPTS_H_
