// The guest agent's server: answers the host over the channel port.
//
// Single-threaded poll loop owned by PID 1. It runs commands (argv, env, cwd, stdin, separate
// stdout/stderr or a terminal of their own, exit status or signal, signals on request), writes and
// reads files, samples metrics, reaps every child (orphans included), and obeys the channel's flow
// control in both directions so that neither side buffers more than a window per stream.
#ifndef AIRLOCK_GUEST_AGENT_SERVER_H_
#define AIRLOCK_GUEST_AGENT_SERVER_H_

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "src/common/channel_messages.h"
#include "src/guest/activity_recorder.h"
#include "src/guest/agent_net.h"

namespace airlock::guest {

class AgentServer {
 public:
  // channel_fd: the non-blocking port; sigchld_fd: a signalfd for SIGCHLD (blocked); recorder:
  // the session's activity record, which outlives each server (not owned; may be null).
  AgentServer(int channel_fd, int sigchld_fd, ActivityRecorder* recorder);
  ~AgentServer();

  // Serves until the channel fails; returns why. PID 1 then reopens the port and serves again.
  std::string Serve();

 private:
  struct Stream;

  void Send(FrameType type, uint32_t stream, std::string_view payload);
  template <typename Message>
  void SendMessage(uint32_t stream, const Message& m) {
    Send(Message::kType, stream, EncodePayload(m));
  }
  // Writes bytes of frames to the port now if nothing waits before them, and queues what the
  // port did not take.
  void SendBytes(std::string_view bytes);
  // Waits until the host end of the port is connected, and drops what is left of an old
  // connection's input.
  void WaitForHost();
  bool HandleFrame(const Frame& frame, std::string* error);
  void StartExec(uint32_t id, const std::string& payload);
  void StartFileWrite(uint32_t id, const std::string& payload);
  void FinishFileWrite(uint32_t id, Stream& s);
  void StartFileRead(uint32_t id, const std::string& payload);
  void StartMetrics(uint32_t id, const std::string& payload);
  void StartPortConnection(uint32_t id, const std::string& payload);
  void StartTailFiles(uint32_t id, const std::string& payload);
  void StartReadAgentStore(uint32_t id, const std::string& payload);
  void StartFsRequest(uint32_t id, const std::string& payload);
  void StartWatchDir(uint32_t id, const std::string& payload);
  void StartWatchActivity(uint32_t id, const std::string& payload);
  void PumpActivity(uint32_t id, Stream& s);
  // Sends every record the recorder has, as far as the stream's window goes (before a
  // command's exit).
  void FlushActivity();
  void ReadWatch(uint32_t id, Stream& s);
  void PumpWatch(uint32_t id, Stream& s);
  using Opener = void (AgentServer::*)(uint32_t id, const std::string& payload);
  static const std::map<FrameType, Opener>& Openers();
  bool HandleInput(Stream& s, const Frame& frame, std::string* error);
  void FinishStream(uint32_t id, ExitKind kind, int code, const std::string& message);
  void Reap();
  void PumpOutput(uint32_t id, Stream& s, int which, bool exited);
  bool SpliceOutput(uint32_t id, Stream& s, int which);
  void ContinueSplice();
  void EndSplice(std::string_view header);
  static bool InTtyGrace(const Stream& s);
  void PumpStdin(Stream& s);
  void PumpFileRead(uint32_t id, Stream& s);
  void PumpBuffer(uint32_t id, Stream& s);
  void GrantInput(uint32_t id, Stream& s, bool force);
  bool FlushOut(std::string* error);

  int channel_fd_;
  int sigchld_fd_;
  ActivityRecorder* recorder_;
  FrameParser parser_;
  // Between kPause and the next kSync the agent sends nothing (a snapshot is being taken).
  bool paused_ = false;
  uint32_t max_stream_seen_ = 0;
  // Frames waiting for the port, oldest first; out_sent_ bytes of the front one are written.
  std::deque<std::string> out_;
  size_t out_sent_ = 0;
  size_t out_bytes_ = 0;  // in out_, not yet written
  // Command output goes from its pipe to the port by splice(2) when nothing is queued: the
  // guest kernel hands the pipe's pages to the device, and neither the agent nor the kernel
  // copies the bytes (under TCG every guest copy is emulated, and copies were most of the
  // agent's time). The payload passes through staging_, then the frame's header is written and
  // the payload spliced on; a payload the port took only part of is finished (ContinueSplice)
  // before anything else is written.
  int staging_[2] = {-1, -1};
  size_t splice_left_ = 0;     // payload bytes of the frame on the port still in staging_
  bool splice_usable_ = true;  // false once the port refused a splice: read and write instead
  std::unique_ptr<char[]> read_buf_;  // kFrameHeaderSize + kMaxPayload: output read, not spliced
  std::map<uint32_t, std::unique_ptr<Stream>> streams_;
  GuestNet net_;  // DNS and connections: the streams the guest opens
};

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_AGENT_SERVER_H_
