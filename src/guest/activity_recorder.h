// The session's activity record, kept by PID 1 rather than by anything the agent runs.
//
// Three kernel sources, read by the agent's poll loop:
// - the process events connector (netlink): every fork, exec and exit. A process is attributed
//   to the command (ExecStartMessage.exec_id) whose process it descends from: the agent notes
//   each command's pid as it forks it, and every fork passes the parent's command on.
// - a fanotify group on the root overlay (and the workspace's): each file closed after reading
//   or writing, with the process that closed it; only paths under /workspace, /root and /home
//   are kept.
// - a fanotify group reporting directory entries (FAN_REPORT_DFID_NAME) on the session disk,
//   where both overlays keep their upper layers: files and directories made, removed and
//   renamed, by whom. Overlayfs's own moves through its work directory are not a user's,
//   except a whiteout put in place, which is a removal of a file of the image.
// Records wait in a bounded backlog until the host takes them; what does not fit, or what the
// kernel's queues dropped, is counted and said in a kLost record. Nothing a guest program
// names is trusted: paths and arguments are cut at the protocol's caps and carried as bytes.
#ifndef AIRLOCK_GUEST_ACTIVITY_RECORDER_H_
#define AIRLOCK_GUEST_ACTIVITY_RECORDER_H_

#include <poll.h>
#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/channel_messages.h"

namespace airlock::guest {

// Records waiting for the host beyond this are dropped and counted.
inline constexpr size_t kMaxActivityBacklog = 4 << 20;
// A record waits at most this long before it is due for the host, and records are due at once
// when this many bytes wait.
inline constexpr uint64_t kActivityBatchMicros = 1000 * 1000;
inline constexpr size_t kActivityBatchBytes = 64 << 10;
// Processes followed at once (their command, parent and name); more are not attributed.
inline constexpr size_t kMaxTrackedProcesses = 32768;
// An ended process is remembered this long, for its file events read after its exit.
inline constexpr uint64_t kEndedProcessMicros = 5 * 1000 * 1000;
// Reads of one kernel source per wake-up of the agent: a guest that floods events does not keep
// PID 1 from its channel (the kernel's queue overflows instead, and that is counted).
inline constexpr int kMaxReadsPerSource = 16;
// How long file events wait in the kernel's queue after a reading of them.
inline constexpr uint64_t kFileReadPauseMicros = 20000;

// Whether a guest path is one the record keeps file events of.
bool IsRecordedPath(std::string_view path);
// A path of the session disk (relative to its root, "/upper/etc/x") as the guest sees it
// ("/etc/x"); "" for what is not a layer's content (overlayfs's work directories).
std::string GuestPathOfLayer(std::string_view disk_path);

class ActivityRecorder {
 public:
  ActivityRecorder() = default;
  ~ActivityRecorder();
  ActivityRecorder(const ActivityRecorder&) = delete;
  ActivityRecorder& operator=(const ActivityRecorder&) = delete;

  // Starts recording, or, when started, watches filesystems mounted since (the workspace).
  // session_disk_root: a descriptor of the session disk's root (not owned). Returns "" or what
  // failed, with errno set.
  std::string Start(int session_disk_root);
  bool started() const { return proc_fd_ >= 0; }

  // The descriptors to poll for input (none before Start). File events are read in batches:
  // for kFileReadPauseMicros after a reading their descriptors are left out (the kernel queues
  // what comes meanwhile), so that a program writing many files does not wake PID 1, and lose
  // its CPU, once per file. Process events are read at once (a short-lived program's argv is
  // read from /proc while it lives). Returns the milliseconds until the file descriptors are
  // polled again, or -1 when they are polled now.
  int AddPollFds(std::vector<pollfd>* fds, uint64_t now_us) const;
  // Reads whatever the kernel has ready on them.
  void ReadReady();

  // The agent forked command exec_id's process.
  void NoteCommand(pid_t pid, uint64_t exec_id);
  // The agent forked a helper of its own (a reader of an agent's store): what it does is not
  // recorded.
  void NoteAgentOwn(pid_t pid);

  // Milliseconds until records are due for the host (0: now; -1: none wait).
  int MillisUntilDue(uint64_t now_us) const;
  // Whole records, at most max_bytes, oldest first.
  std::string Take(size_t max_bytes);
  // The size of the oldest record waiting (0: none): a window smaller than this sends nothing.
  size_t FrontBytes() const { return backlog_.empty() ? 0 : backlog_.front().size(); }

  // Keeps a record (bounded by the backlog); public for tests.
  void Add(ActivityRecord record);

 private:
  struct Process {
    uint64_t exec_id = 0;
    uint32_t parent = 0;
    std::string name;
    bool recorded = false;   // its start is in the record (so its exit will be)
    bool own = false;        // the agent's helper: nothing it does is recorded
    uint64_t exited_us = 0;  // CLOCK_MONOTONIC of its exit; 0: running
  };
  // Whether pid may be followed (room, after forgetting the ended if need be).
  bool Track(uint32_t pid);
  void ForgetEnded();
  void ReadProcessEvents();
  void ReadFileEvents();
  void ReadEntryEvents();
  void Lost(const std::string& why, uint64_t count);
  void FlushLost();
  std::string NameOf(uint32_t pid);
  uint64_t ExecOf(uint32_t pid) const;
  bool IsOwn(uint32_t pid) const;
  void StartOf(uint32_t pid);

  int proc_fd_ = -1;            // netlink, the process events connector
  int files_fd_ = -1;           // fanotify, closes (with a descriptor per event)
  int entries_fd_ = -1;         // fanotify, directory entries (by file handle)
  int disk_fd_ = -1;            // the session disk's root, open for reading
  uint64_t files_read_us_ = 0;  // CLOCK_MONOTONIC of the last reading of file events
  std::string disk_prefix_;     // what readlink says for it
  std::map<uint32_t, Process> processes_;
  std::deque<std::string> backlog_;  // encoded records
  size_t backlog_bytes_ = 0;
  uint64_t oldest_us_ = 0;                // CLOCK_MONOTONIC of backlog_.front()
  std::map<std::string, uint64_t> lost_;  // why -> count, not yet said
};

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_ACTIVITY_RECORDER_H_
