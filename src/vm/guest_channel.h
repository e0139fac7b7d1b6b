// The host end of the channel to one guest agent (see src/common/channel_frame.h).
//
// Everything the guest sends is hostile: frames are parsed once into private copies, data is
// accepted only within the flow-control window the host granted, stream ids must be ones the
// host opened, and the first violation fails the channel for good (the owner then destroys the
// VM). A reader thread owns the socket's read side; any thread may call the public methods.
// A hung guest can never block the host for long: writes time out.
#ifndef AIRLOCK_VM_GUEST_CHANNEL_H_
#define AIRLOCK_VM_GUEST_CHANNEL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/common/channel_messages.h"
#include "src/common/unique_fd.h"

namespace airlock {

struct ExecRequest {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // KEY=VALUE
  std::string cwd;               // empty: the guest's /
  bool stdin = false;            // the host will send input (else the process reads /dev/null)
  std::string user;              // empty: root; NAME|UID[:GROUP|GID] in the guest
  // On a terminal of this size (kExecFlagTty): output all comes as kStdout.
  bool tty = false;
  uint32_t rows = 24, cols = 80;
  // Runs on by itself (kExecFlagDetach): the exit comes at once, with its pid and log.
  bool detach = false;
  // The command's number in the session's log, which the activity record names its processes by.
  uint64_t exec_id = 0;
};

// One event of a running command.
struct ExecEvent {
  enum class Type { kStdout, kStderr, kExit };
  Type type = Type::kStdout;
  std::string data;                        // kStdout / kStderr
  ExitKind exit_kind = ExitKind::kExited;  // kExit
  int code = 0;
  std::string message;
};

// A kTailFiles request: files named *suffix under ~user/dir, to depth, at most max_bytes of
// content; offsets: how much of each (by name relative to dir) the host has already.
struct TailRequest {
  std::string user;
  std::string dir;
  std::string suffix;
  uint32_t depth = 0;
  uint32_t max_bytes = 1 << 20;
  std::map<std::string, uint64_t> offsets;
};

// What the host tells the agent in every kSync: who the guest is and what it may use.
struct GuestSync {
  uint32_t pids_max = 0;  // processes of commands; 0: no limit
  std::string hostname;   // empty: keep the guest's
  // The guest was restored from a snapshot: it already said hello to a host long ago, so do
  // not wait for one.
  bool restored = false;
  // Mount the workspace disk at /workspace unless it is mounted already.
  bool mount_workspace = false;
  // Mount these volumes (each slot not mounted yet).
  std::vector<VolumeMount> volumes;
};

class GuestChannel;

// The host side of the streams a guest opens (kDnsQuery, kConnect: the network layer serves
// them; the channel knows each kind only by the frames it may carry). Its methods run
// on the channel's reader thread with no lock of the channel held, in the order the frames
// came; they must not block (hand the work to a thread of their own). The channel has already
// checked each frame: ids, windows, payload sizes, and that data belongs to an open stream.
class GuestStreamHandler {
 public:
  virtual ~GuestStreamHandler() = default;
  // A new stream of a kind it serves, with its (unparsed) payload.
  virtual void OnOpen(uint32_t id, FrameType type, std::string payload) = 0;
  // Connection bytes within the window the host granted; GrantGuestData once consumed.
  virtual void OnData(uint32_t id, std::string data) = 0;
  // The guest half-closed the connection.
  virtual void OnDataEnd(uint32_t id) = 0;
  // The stream is gone: the guest reset it (code, message), or the channel ended it (a pause
  // or the channel's failure: code 0). Nothing more comes for it; sends to it are dropped.
  virtual void OnReset(uint32_t id, uint32_t code, std::string message) = 0;
  // The guest granted more window: SendGuestData may send again.
  virtual void OnWindow(uint32_t id) = 0;
};

// A command running in the guest. Thread-safe; Next() is meant for one consumer thread.
class ExecStream {
 public:
  ~ExecStream();
  // The next event, waiting until deadline (DeadlineExceeded) or a channel failure.
  [[nodiscard]] absl::StatusOr<ExecEvent> Next(absl::Time deadline);
  // Sends stdin bytes, waiting for the guest's window as needed.
  [[nodiscard]] absl::Status WriteStdin(std::string_view data);
  [[nodiscard]] absl::Status CloseStdin();
  [[nodiscard]] absl::Status Signal(int signal);
  // Only for a command on a terminal: its new size.
  [[nodiscard]] absl::Status Resize(uint32_t rows, uint32_t cols);
  // The host gives up on the command (a timeout, a client that went away): a WriteStdin waiting
  // for a window the guest never grants returns at once, and later ones fail.
  void Abandon();

 private:
  friend class GuestChannel;
  ExecStream(std::shared_ptr<GuestChannel> channel, uint32_t id)
      : channel_(std::move(channel)), id_(id) {}
  std::shared_ptr<GuestChannel> channel_;
  uint32_t id_;
};

// A file being written in the guest, piece by piece (kFileWrite). The file takes its name only
// at Finish; destroyed before that (a client that went away, an error), the write is cancelled
// and the guest's file stays as it was.
class GuestFileWrite {
 public:
  ~GuestFileWrite();
  // Sends the next piece, waiting until deadline for the guest's window. Fails with the guest's
  // reason once the guest gave up (a directory that does not exist, a full disk).
  [[nodiscard]] absl::Status Write(std::string_view data, absl::Time deadline);
  // Ends the content and waits for the file to be in place.
  [[nodiscard]] absl::Status Finish(absl::Time deadline);

 private:
  friend class GuestChannel;
  GuestFileWrite(std::shared_ptr<GuestChannel> channel, uint32_t id, std::string path)
      : channel_(std::move(channel)), id_(id), path_(std::move(path)) {}
  // The guest's reason for ending the stream early.
  absl::Status GuestFailure(absl::Time deadline);
  std::shared_ptr<GuestChannel> channel_;
  uint32_t id_;
  std::string path_;
  bool done_ = false;
};

// A file being read from the guest, piece by piece (kFileRead). Destroyed before the end, the
// read is cancelled in the guest.
class GuestFileRead {
 public:
  ~GuestFileRead();
  // The next piece (at most kMaxPayload bytes), or an empty string at the end of the file.
  [[nodiscard]] absl::StatusOr<std::string> Next(absl::Time deadline);

 private:
  friend class GuestChannel;
  GuestFileRead(std::shared_ptr<GuestChannel> channel, uint32_t id, std::string path)
      : channel_(std::move(channel)), id_(id), path_(std::move(path)) {}
  std::shared_ptr<GuestChannel> channel_;
  uint32_t id_;
  std::string path_;
  bool done_ = false;
};

// A directory of the guest being watched (kWatchDir). Destroyed, the watch ends in the guest.
class GuestWatch {
 public:
  ~GuestWatch();
  // The next records (one or more; the first is kStarted), waiting until deadline
  // (DeadlineExceeded, after which Next may be called again). Once the watch is over:
  // OutOfRange when the directory was removed or moved, ResourceExhausted when events were lost
  // (the host fell behind, or the guest's kernel did), else the guest's failure or the
  // channel's. A malformed record fails the channel.
  [[nodiscard]] absl::StatusOr<std::vector<WatchRecord>> Next(absl::Time deadline);

 private:
  friend class GuestChannel;
  GuestWatch(std::shared_ptr<GuestChannel> channel, uint32_t id, std::string path)
      : channel_(std::move(channel)), id_(id), path_(std::move(path)) {}
  std::shared_ptr<GuestChannel> channel_;
  uint32_t id_;
  std::string path_;
  bool done_ = false;
};

// The guest's activity record being read (kWatchActivity). Destroyed, the reading ends in the
// guest (recording goes on there, and a later reader gets what waited).
class GuestActivity {
 public:
  ~GuestActivity();
  // The next records, waiting until deadline (DeadlineExceeded, after which Next may be called
  // again). Once over: Cancelled when another reader took over, else the guest's failure or the
  // channel's. A malformed record fails the channel.
  [[nodiscard]] absl::StatusOr<std::vector<ActivityRecord>> Next(absl::Time deadline);
  // From another thread: Next returns what has come, then CANCELLED at once.
  void Interrupt();

 private:
  friend class GuestChannel;
  GuestActivity(std::shared_ptr<GuestChannel> channel, uint32_t id)
      : channel_(std::move(channel)), id_(id) {}
  std::shared_ptr<GuestChannel> channel_;
  uint32_t id_;
  bool done_ = false;
};

class GuestChannel : public std::enable_shared_from_this<GuestChannel> {
 public:
  using FailureCallback = std::function<void(const absl::Status&)>;

  // Takes the host end of the port's socket and starts reading. on_failure runs once, on the
  // reader thread, when the channel fails (including when the guest goes away). join_midway:
  // the socket is a new connection to a guest that was already serving another host (airlockd
  // restarted): every byte before the agent's next hello is skipped, and Handshake waits for it.
  static std::shared_ptr<GuestChannel> Start(UniqueFd fd, FailureCallback on_failure,
                                             bool join_midway = false);
  ~GuestChannel();
  // Stops the reader thread and closes the socket; pending calls fail.
  void Stop();

  // Waits for the agent's hello (unless restored), sends the clock, fresh entropy, the process
  // limit and the hostname, and waits until the agent is ready. Also ends a Quiesce.
  [[nodiscard]] absl::Status Handshake(absl::Time deadline, const GuestSync& sync = {});

  // Before a snapshot: fails if a command or file operation is still open, then tells the agent
  // to stop sending and waits for its answer. Afterwards nothing is in flight either way and
  // new commands are refused until the next Handshake.
  [[nodiscard]] absl::Status Quiesce(absl::Time deadline);

  [[nodiscard]] absl::StatusOr<std::unique_ptr<ExecStream>> StartExec(const ExecRequest& request);
  // A file of the guest, streamed (see GuestFileWrite and GuestFileRead): an absolute path,
  // created or replaced with mode (permission bits), metadata (user.e2b.* attributes, within
  // FileWriteMessage's caps) and its missing directories.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<GuestFileWrite>> StartFileWrite(
      const std::string& path, uint32_t mode, const FileMetadata& metadata = {});
  [[nodiscard]] absl::StatusOr<std::unique_ptr<GuestFileRead>> StartFileRead(
      const std::string& path);
  // The same, whole.
  [[nodiscard]] absl::Status WriteFile(const std::string& path, uint32_t mode,
                                       std::string_view content, absl::Time deadline);
  [[nodiscard]] absl::StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes,
                                                     absl::Time deadline);
  // What files under a user's home grew by since the host last looked (kTailFiles). A
  // malformed answer fails the channel.
  [[nodiscard]] absl::StatusOr<std::vector<TailRecord>> TailFiles(const TailRequest& request,
                                                                  absl::Time deadline);
  // Rows of a coding agent's own store changed after the request's cursor (kReadAgentStore):
  // UNAVAILABLE with the guest's reason when it could not read them (NOT_FOUND: no store yet).
  // A malformed answer fails the channel.
  [[nodiscard]] absl::StatusOr<std::vector<StoreRow>> ReadAgentStore(
      const AgentStoreMessage& request, absl::Time deadline);
  [[nodiscard]] absl::StatusOr<GuestMetrics> Metrics(absl::Time deadline);
  // One operation on the guest's files (kFsRequest): the entries it answers. The guest's
  // errno becomes the status (NOT_FOUND, ALREADY_EXISTS, ...); a malformed answer fails the
  // channel.
  [[nodiscard]] absl::StatusOr<std::vector<FsEntry>> FsRequest(const FsRequestMessage& request,
                                                               absl::Time deadline);
  // Watches a directory of the guest (kWatchDir); see GuestWatch.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<GuestWatch>> StartWatch(
      const WatchDirMessage& request);
  // Reads the guest's activity record (kWatchActivity); see GuestActivity.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<GuestActivity>> StartActivity();

  // Who serves the streams of one kind the guest opens (`opens`: kDnsQuery or kConnect); nullptr
  // stops serving new ones. A kind nobody serves is refused stream by stream (a DNS question
  // answered "failed", a connection reset), never by failing the channel. The channel keeps
  // each stream's flow control and checks its frames; the handler sees only valid ones.
  void RegisterGuestStreamKind(FrameType opens, std::shared_ptr<GuestStreamHandler> handler);
  // Answers a question stream (a kind answered by one message, e.g. kDnsQuery by
  // DnsAnswerMessage), which ends it; nothing is sent if the stream is gone (a pause). Answering
  // a stream of another kind with it is InvalidArgument.
  template <typename Answer>
  [[nodiscard]] absl::Status AnswerGuestStream(uint32_t id, const Answer& answer) {
    return AnswerGuestStream(id, Answer::kType, EncodePayload(answer));
  }
  // Sends connection bytes within the guest's window, in frames of at most kMaxPayload;
  // returns how many it sent (0 when the window is closed: wait for OnWindow).
  [[nodiscard]] absl::StatusOr<size_t> SendGuestData(uint32_t id, std::string_view data);
  // The host consumed `bytes` of the stream's data: the guest may send that much more.
  [[nodiscard]] absl::Status GrantGuestData(uint32_t id, uint32_t bytes);
  [[nodiscard]] absl::Status EndGuestData(uint32_t id);
  // Connects to TCP port `port` on the guest's loopback (kOpenPort): a connection served by
  // handler like one the guest opened (data both ways within windows, ends, resets); a port
  // nobody listens on is reset soon after with ECONNREFUSED and the guest's reason. Returns the
  // stream's id. Unavailable while a snapshot is taken; ResourceExhausted beyond
  // kMaxPortStreams at once. A pause resets it (code 0), like the guest's connections.
  [[nodiscard]] absl::StatusOr<uint32_t> ConnectGuestPort(
      uint16_t port, std::shared_ptr<GuestStreamHandler> handler);
  static constexpr uint32_t kMaxPortStreams = 256;
  // Aborts a connection; the stream is done (OnReset does not follow).
  [[nodiscard]] absl::Status ResetGuestStream(uint32_t id, const ResetMessage& reset);
  // Sends the guest a message on the control stream that expects no answer (e.g. the
  // session's NetPolicyMessage); InvalidArgument if it does not fit in one frame.
  template <typename Message>
  [[nodiscard]] absl::Status Notify(const Message& m) {
    return Notify(Message::kType, EncodePayload(m));
  }

  // The failure, or OK while the channel works.
  absl::Status status() const;
  // Fails the channel with this reason (idempotent; the first reason wins).
  void Fail(const absl::Status& reason) ABSL_LOCKS_EXCLUDED(mu_);

  // How long a write may wait for the guest to read before the channel fails.
  static constexpr absl::Duration kWriteTimeout = absl::Seconds(10);

 private:
  friend class ExecStream;
  friend class GuestFileWrite;
  friend class GuestFileRead;
  friend class GuestWatch;
  friend class GuestActivity;
  void AbandonStream(uint32_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends one kSync and waits for its kReady.
  absl::Status SyncOnce(absl::Time deadline, const GuestSync& sync) ABSL_LOCKS_EXCLUDED(mu_);
  // Tells the guest to give up on a file stream, and forgets it.
  void CancelFileStream(uint32_t id);
  // The status a file stream's kExit stands for.
  static absl::Status FileExitStatus(const ExecEvent& exit, const std::string& what);
  struct Stream {
    std::deque<ExecEvent> events;
    StreamWindow window;     // input the guest will accept, output it sent
    bool done = false;       // kExit (or kMetrics) arrived
    bool abandoned = false;  // the host stopped waiting on it (ExecStream::Abandon)
    // Reads that go on for the VM's life (the activity record): a snapshot does not wait for
    // them, it closes them (their reader sees the stream closed, and opens a new one after).
    bool background = false;
    bool interrupted = false;  // InterruptStream: a reader gets what came, then Cancelled
    // A background stream at a snapshot: the guest forgets it at kPause, after sending what it
    // had; its reader gets that (once kPaused came), then Cancelled; it is never cancelled.
    bool quiesced = false;
    std::string metrics;
  };

  // A stream the guest opened.
  struct GuestStream {
    FrameType kind = FrameType::kConnect;
    std::shared_ptr<GuestStreamHandler> handler;  // of its kind, registered when it opened
    StreamWindow window{kConnectionWindow};       // kData both ways
    bool guest_ended = false;                     // kDataEnd received
    bool host_ended = false;                      // kDataEnd sent
  };

  GuestChannel(UniqueFd fd, FailureCallback on_failure, bool join_midway);
  void ReadLoop();
  // *after runs once the channel's lock is released (calls into the guest stream handler).
  absl::Status HandleFrame(Frame& frame, std::function<void()>* after) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status HandleGuestStreamFrame(Frame& frame, std::function<void()>* after)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets every guest stream and tells the handler (a pause, or the channel's end).
  void DropGuestStreams(const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status AnswerGuestStream(uint32_t id, FrameType type, std::string_view payload)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether id is a connection to a guest port the host opened and has not ended.
  bool IsPortStream(uint32_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // Erases a handler-served stream, counting the host's connections to guest ports.
  void ForgetGuestStream(std::map<uint32_t, GuestStream>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Notify(FrameType type, std::string_view payload);
  absl::Status Send(FrameType type, uint32_t stream, std::string_view payload);
  template <typename Message>
  absl::Status SendMessage(uint32_t stream, const Message& m) {
    return Send(Message::kType, stream, EncodePayload(m));
  }
  absl::StatusOr<uint32_t> OpenStream(bool background = false) ABSL_LOCKS_EXCLUDED(mu_);
  void CloseStream(uint32_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the guest still has the stream open as far as the host knows (not ended, not
  // forgotten at a snapshot): only then is there anything to cancel.
  bool GuestHoldsStream(uint32_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // Wakes whoever waits on a stream: it gets what has come, then CANCELLED.
  void InterruptStream(uint32_t id) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<ExecEvent> NextEvent(uint32_t id, absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // The next records of a stream of whole records (kWatchDir, kWatchActivity): decoded by
  // `decode` (a bad one fails the channel), or, at its end (*done set), what `ended` makes of
  // the exit.
  template <typename Record>
  absl::StatusOr<std::vector<Record>> NextRecords(
      uint32_t id, absl::Time deadline, bool* done,
      bool (*decode)(std::string_view, std::vector<Record>*, std::string*),
      const std::function<absl::Status(const ExecEvent&)>& ended, const char* what)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Opens a stream with one frame and gathers its kStdout until its kExit (at most max_bytes).
  absl::StatusOr<std::string> Collect(FrameType type, const std::string& payload, size_t max_bytes,
                                      const std::string& what, absl::Time deadline);
  absl::Status SendInput(uint32_t id, std::string_view data, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  UniqueFd fd_;
  FailureCallback on_failure_;
  std::thread reader_;
  bool join_midway_;      // reader thread only: still looking for the hello
  std::string skipped_;   // reader thread only: a tail that may begin the hello
  absl::Mutex write_mu_;  // serializes whole frames on the socket

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool hello_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  std::string ready_problem_ ABSL_GUARDED_BY(mu_);  // what the guest could not set up (kReady)
  // Between Quiesce and the next Handshake: no new streams.
  bool quiescing_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;  // the agent answered kPause
  uint32_t next_stream_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint32_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
  std::map<FrameType, std::shared_ptr<GuestStreamHandler>> guest_kinds_ ABSL_GUARDED_BY(mu_);
  uint32_t highest_guest_stream_ ABSL_GUARDED_BY(mu_) = 0;  // ids of guest streams only grow
  // Handler-served streams: the guest's (even ids) and the host's to guest ports (odd ids).
  std::map<uint32_t, GuestStream> guest_streams_ ABSL_GUARDED_BY(mu_);
  uint32_t port_streams_ ABSL_GUARDED_BY(mu_) = 0;  // of guest_streams_, the host's
};

}  // namespace airlock

#endif  // AIRLOCK_VM_GUEST_CHANNEL_H_
