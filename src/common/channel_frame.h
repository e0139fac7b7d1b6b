// The host <-> guest channel's wire format: frames, their parser, and the payload codec.
//
// The payloads of the frames, typed, are in channel_messages.h.
//
// This file is shared by the host (src/vm/) and the guest agent (src/guest/), so it depends
// on nothing but the C++ standard library. Every byte it parses may come from a hostile peer:
// lengths are checked against fixed caps before they size anything, and a parser that saw one
// bad frame stays failed.
//
// Wire format (little-endian), documented in ARCHITECTURE.md:
//   u8  version   kProtocolVersion
//   u8  type      FrameType
//   u16 reserved  must be 0
//   u32 stream    0 for the connection itself; odd: a stream the host opened; even: one the
//                 guest opened (egress: DNS questions and connections)
//   u32 length    payload bytes that follow, at most kMaxPayload
#ifndef AIRLOCK_COMMON_CHANNEL_FRAME_H_
#define AIRLOCK_COMMON_CHANNEL_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace airlock {

inline constexpr uint8_t kProtocolVersion = 13;
inline constexpr size_t kFrameHeaderSize = 12;
inline constexpr uint32_t kMaxPayload = 64 * 1024;
// Bytes of data frames a receiver accepts on a new stream before it grants more (kWindow).
inline constexpr uint32_t kInitialWindow = 256 * 1024;
// The same for connections (kConnect streams): a grant takes a round trip through both agents'
// loops, and a bigger window keeps downloads from waiting on it.
inline constexpr uint32_t kConnectionWindow = 1024 * 1024;
// Caps on the lists inside payloads; a payload is already capped at kMaxPayload bytes.
inline constexpr uint32_t kMaxListItems = 4096;
// The first bytes of every kHello payload, so that a host joining a stream midway finds it.
inline constexpr char kHelloMagic[16] = {'\x8a', 'A', 'I', 'R', 'L', 'O',  'C',  'K',
                                         'h',    'e', 'l', 'l', 'o', '\r', '\n', '\x1a'};

enum class FrameType : uint8_t {
  // Guest -> host on stream 0 when the agent starts serving (at boot, and again whenever the
  // host end of the port was gone and is back): the 16 bytes kHelloMagic, u32 protocol, string
  // agent version. A host that connects to a running VM (airlockd restarted) sends nothing and
  // skips every byte before the magic until this frame comes: the agent has dropped whatever
  // was half-sent or half-received on the old connection before sending it.
  kHello = 1,
  // Host -> guest on stream 0: i64 unix seconds, u32 nanoseconds, string entropy, u32 limit on
  // the processes of commands (0: none), string hostname (empty: keep), u32 flags (kSync*),
  // u32 count of volumes (at most kVolumeSlots), each u32 slot, u32 flags (kVolume*), string
  // mount point. The guest sets its clock, mixes the entropy into its RNG and reseeds it,
  // applies the limit to the cgroup its commands run in, sets the hostname, mounts the
  // workspace if asked and each volume that is not mounted yet, thaws the volumes kPause froze,
  // and answers kReady. The host sends it after boot and after every
  // restore of a snapshot (or a fork), before any command runs.
  kSync = 2,
  // Guest -> host on stream 0: the guest is ready to run commands (after kSync): u32 the
  // highest stream id it has seen (0: none), u32 the highest stream id it opened itself (0:
  // none), string what the guest could not set up that kSync asked for (empty: nothing; the
  // workspace). A host restored from a snapshot opens streams above the first, and takes late
  // frames of streams at or below either for ones it closed.
  kReady = 3,
  // Host -> guest, opens a stream: strings argv, strings env, string cwd, u32 flags, string
  // user (empty: root; else NAME or UID, optionally :GROUP or :GID, looked up in the guest's
  // /etc/passwd and /etc/group), u32 rows, u32 cols (the terminal's size with kExecFlagTty,
  // else 0), u64 exec id (the host's number for the command, which the activity record names
  // its processes by; 0: none). The guest sets HOME from the user's entry if env has none.
  kExecStart = 4,
  // Host -> guest: bytes for the stream's input (stdin, or a file's content).
  kInput = 5,
  // Host -> guest: the stream's input has ended. Empty payload.
  kInputEnd = 6,
  // Guest -> host: bytes the stream's process wrote to stdout (or a file's content).
  kStdout = 7,
  // Guest -> host: bytes the stream's process wrote to stderr.
  kStderr = 8,
  // Guest -> host, closes a stream: u32 ExitKind, i32 code, string message.
  kExit = 9,
  // Host -> guest: i32 signal number for the stream's process group. On a kFileWrite or
  // kFileRead stream, any signal cancels it: the guest answers kExit (ECANCELED) and a
  // write leaves the file as it was.
  kSignal = 10,
  // Either way: u32 more bytes of data frames the sender of this frame will accept.
  kWindow = 11,
  // Host -> guest, opens a stream: string path, u32 mode. Content follows as kInput; at
  // kInputEnd the file takes its name (a new file beside it, renamed over it) and kExit says
  // how that went.
  kFileWrite = 12,
  // Host -> guest, opens a stream: string path. Content comes back as kStdout.
  kFileRead = 13,
  // Host -> guest, opens a stream; the guest answers kMetrics and the stream is done.
  kMetricsRequest = 14,
  // Guest -> host: u64 fields of GuestMetrics, in declaration order.
  kMetrics = 15,
  // Either way on stream 0: string message; the sender saw a protocol violation.
  kProtocolError = 16,
  // Host -> guest on stream 0, empty: a snapshot is about to be taken. The guest freezes its
  // read-write volumes (FIFREEZE: what they hold on disk is a clean filesystem from then on,
  // until kSync thaws them), stops sending anything (output stays in its pipes) and answers
  // kPaused; it sends nothing more until the
  // next kSync. So when the host has read kPaused, both directions are at a frame boundary.
  kPause = 17,
  // Guest -> host on stream 0, empty: the answer to kPause.
  kPaused = 18,

  // Egress (see src/guest/agent_net.h and src/net/). The guest opens these streams, with even
  // ids that only grow; at most kMaxGuestStreams are open at once.
  //
  // Guest -> host, opens a stream: string name (lower-case, no trailing dot), u32 DNS qtype.
  // The host answers kDnsAnswer and the stream is done.
  kDnsQuery = 19,
  // Host -> guest, ends a kDnsQuery stream: u32 DnsVerdict, u32 count + u32 each: the ports
  // the name may be reached on, string message (why it was denied).
  kDnsAnswer = 20,
  // Guest -> host, opens a stream: a TCP connection a guest program made. string name (the
  // name whose synthetic address it connected to; empty for an address rule), string address
  // (4 or 16 bytes: the address it connected to), u32 port. Data follows both ways as kData
  // within kWindow grants (kInitialWindow to start with).
  kConnect = 21,
  // Either way on a kConnect stream: bytes of the connection.
  kData = 22,
  // Either way on a kConnect stream, empty: the sender sends no more data (a half close). The
  // stream is done when both sides sent it.
  kDataEnd = 23,
  // Either way on a kConnect stream: u32 errno (ECONNREFUSED, ENETUNREACH, ETIMEDOUT,
  // ECONNRESET, EACCES...), string message. The connection is aborted; the stream is done for
  // both sides at once and later frames of it are ignored.
  kReset = 24,
  // Host -> guest on stream 0: u32 count, then per address rule: string base (4 bytes), u32
  // prefix length, u32 count + u32 each: its ports. The session's egress policy
  // changed (or the guest was restored): the guest installs these address rules and asks
  // again about every name it has answered for, closing what is no longer allowed.
  kNetPolicy = 25,
  // Host -> guest on an exec stream with kExecFlagTty: u32 rows, u32 cols. The guest sets the
  // terminal's size (its kernel sends SIGWINCH to the foreground process group).
  kResize = 26,
  // Host -> guest, opens a stream: what an agent appended to its own files since the host last
  // looked (its transcripts). string user (as kExecStart; whose home), string dir (relative to
  // that home, no "." or ".." component), string suffix (of the files' names), u32 depth (of
  // subdirectories, at most kMaxTailDepth), u32 max_bytes (of content in all, at most
  // kMaxTailBytes), u32 count (at most kMaxTailFiles) + per file already read: string name
  // (relative to dir), u64 offset. The guest answers with kStdout carrying TailRecords (one per
  // regular file found, by name, at most kMaxTailFiles; no symbolic link is followed on the
  // way), then kExit: kExited, or kFailed with an errno (ENOENT: no such directory yet).
  kTailFiles = 27,
  // Host -> guest, opens a stream: u32 port (1..65535). The agent connects to that TCP port on
  // the guest's loopback (127.0.0.1, then ::1), so the host can reach a server running in the
  // guest (airlock port-forward). It is a connection like kConnect's, the other way: kData,
  // kDataEnd and kWindow both ways, the host's data held by the agent until the connection is
  // made; a port nobody listens on is answered kReset (ECONNREFUSED) at once. Connection frames
  // the host sent before it read the guest's end of such a stream are ignored.
  kOpenPort = 28,
  // Host -> guest, opens a stream: one operation on the guest's files (FsRequestMessage: u32
  // FsOp, string user, string path, string target, u32 depth), done as root; directories it
  // makes belong to user (as kExecStart's; empty: root). The guest answers kStdout carrying
  // FsEntry records (kStat, kMakeDir, kMove: the entry of path, or of target for a move; kList:
  // the directory's entries down to depth, at most kMaxFsEntries; kRemove: none), then kExit:
  // kExited, or kFailed with an errno (ENOENT; EEXIST: kMakeDir of a directory that exists;
  // ENOTDIR: kList of something else; E2BIG: a listing over the caps).
  kFsRequest = 29,
  // Host -> guest, opens a stream: watch a directory (WatchDirMessage: string user, string
  // path, u32 flags kWatch*). The guest answers kStdout, each payload whole WatchRecords: first
  // one of kind kStarted once the kernel watches it (inotify), then one per change as the
  // kernel reports it. Any kSignal ends it (kExit kFailed, ECANCELED); so do the directory's
  // removal (kExited) and lost events (kFailed, EOVERFLOW: the host fell behind).
  kWatchDir = 30,
  // Host -> guest, opens a stream, empty: the session's activity record (src/guest/
  // activity_recorder.h). The guest starts recording (once; it goes on when the stream ends)
  // and answers kStdout, each payload whole ActivityRecords, sent at most a second after the
  // first of them happened, and all of them before any command's kExit. A second
  // kWatchActivity ends the first (kExit kExited); any kSignal ends it (kExit kFailed,
  // ECANCELED); kPause forgets it (no frame: records wait for the next reader); a guest that
  // cannot record answers kExit kFailed with the errno.
  kWatchActivity = 31,
  // Host -> guest, opens a stream: rows of a coding agent's own store, a SQLite database the
  // guest writes (AgentStoreMessage: u32 AgentStore, string user, string path relative to
  // that user's home, i64 after_ms, string after_id, u32 max_rows, u32 max_bytes). A child of
  // PID 1 reads the database (read-only, with caps on time, memory and work: the file is the
  // guest's to make) and the stream is that child's, as a command's: kStdout carries the
  // answer, u32 errno (0: read; ENOENT: no store yet; EBUSY: locked; EPROTO: not a store of
  // that agent), string what failed, then StoreRows changed after (after_ms, after_id) in that
  // order, at most max_rows and max_bytes of data; kExit ends it (kSignaled: the reader was
  // stopped, e.g. past its time). A kSignal stops the reader.
  kReadAgentStore = 32,
};
inline constexpr uint8_t kMaxFrameType = 32;

// How many guest-opened streams (DNS questions and connections) may be open at once. The host
// refuses more (kReset / a failed kDnsAnswer); the guest queues DNS questions beyond its own cap.
inline constexpr uint32_t kMaxGuestStreams = 1024;

// kDnsAnswer verdicts.
enum class DnsVerdict : uint32_t {
  kAllowed = 0,     // the name may be reached on the listed ports
  kDenied = 1,      // no rule allows it (or its addresses are internal): NXDOMAIN
  kNoSuchName = 2,  // allowed, but it does not resolve: NXDOMAIN
  kFailed = 3,      // the host could not answer now (resolver down, too many questions): SERVFAIL
};
// Cap on the ports of one kDnsAnswer or address rule.
inline constexpr uint32_t kMaxRulePorts = 64;

// How a stream ended (kExit).
enum class ExitKind : uint32_t {
  kExited = 0,       // code is the exit status
  kSignaled = 1,     // code is the signal number
  kSpawnFailed = 2,  // code is the errno of the failed exec/chdir; message says which
  kFailed = 3,       // a file or metrics operation failed: code is an errno
};

// Flags of kSync.
// The session has a workspace: its disk (serial airlock-ws) goes read-only under an overlay at
// /workspace whose upper layer is on the session disk (src/guest/guest_workspace.h).
inline constexpr uint32_t kSyncMountWorkspace = 1;

// Volumes (named disks of the tenant's that outlive sessions): a VM has kVolumeSlots disks for
// them, serial "airlock-vol<slot>", each a volume or an empty placeholder. (QEMU's microvm has
// eight virtio-mmio devices: five are the image, session and workspace disks, the RNG and the
// channel's serial port, and one is kept for a memory balloon.)
inline constexpr uint32_t kVolumeSlots = 2;
// Flags of a volume in kSync: mount it read-only (the host opened it so, too).
inline constexpr uint32_t kVolumeReadOnly = 1;
// The agent's binary run as a command, `/proc/1/exe volume-freeze PATH...`: freezes the
// filesystems at those paths (before the host ends a session's VM for good).
inline constexpr char kVolumeFreezeCommand[] = "volume-freeze";
// `/proc/1/exe layer-tar`: the root overlay's upper directory as an OCI layer tar on stdout
// (an image build's RUN step; src/guest/guest_layer.h).
inline constexpr char kLayerTarCommand[] = "layer-tar";

// Flags of kExecStart.
inline constexpr uint32_t kExecFlagStdin = 1;  // the host will send input; otherwise /dev/null
// The command runs on a pty of its own as its controlling terminal: its stdin, stdout and
// stderr; what it writes comes back as kStdout, kInput is typed on it, kResize sizes it.
inline constexpr uint32_t kExecFlagTty = 2;
// The command runs on by itself (neither stdin nor a terminal): its stdout and stderr go to
// /var/log/airlock/exec-STREAM.log in the guest, and kExit(kExited, 0) follows at once with
// its pid and that path in the message, while it runs on (`airlock exec -d`).
inline constexpr uint32_t kExecFlagDetach = 4;
// Flags of kWatchDir.
inline constexpr uint32_t kWatchRecursive = 1;     // subdirectories too, new ones included
inline constexpr uint32_t kWatchIncludeEntry = 2;  // each record carries its FsEntry

// A terminal's size in characters: each of rows and cols within 1..kMaxTerminalSide.
inline constexpr uint32_t kMaxTerminalSide = 10000;

// Flow control of one stream, both directions, the same for every kind of stream on either
// side of the channel: a receiver accepts `size` bytes of data frames and grants more (kWindow)
// as it consumes them; a sender sends no more than it was granted. Not thread-safe.
class StreamWindow {
 public:
  explicit StreamWindow(uint32_t size = kInitialWindow) : size_(size), send_(size) {}

  // Receiving. The peer sent n data bytes: false if that is more than it was granted.
  [[nodiscard]] bool Received(uint64_t n) {
    received_ += n;
    return received_ <= size_;
  }
  // n of the received bytes were consumed (written on, or dropped).
  void Consumed(uint64_t n) { consumed_ += n; }
  // Bytes to grant the peer now, counted as granted: what was consumed, once it is at least
  // kMaxPayload (fewer, larger grants) or when `force` (nothing more is waiting); 0: none.
  uint32_t TakeGrant(bool force) {
    if (consumed_ == 0 || (!force && consumed_ < kMaxPayload)) return 0;
    uint64_t grant = consumed_;
    received_ -= grant;
    consumed_ = 0;
    return static_cast<uint32_t>(grant);
  }
  uint64_t unconsumed() const { return received_ - consumed_; }
  bool grant_pending() const { return consumed_ > 0; }

  // Sending. How many data bytes may be sent now.
  uint64_t sendable() const { return send_; }
  void Sent(uint64_t n) { send_ -= n; }
  // The peer granted more: false if that grows the window beyond its size.
  [[nodiscard]] bool Granted(uint64_t more) {
    send_ += more;
    return send_ <= size_;
  }

 private:
  uint64_t size_;
  uint64_t send_;
  uint64_t received_ = 0;  // received and not yet granted back
  uint64_t consumed_ = 0;  // of which consumed
};

struct Frame {
  FrameType type = FrameType::kHello;
  uint32_t stream = 0;
  std::string payload;
};

// Returns the header + payload bytes of one frame. payload must be at most kMaxPayload.
std::string EncodeFrame(FrameType type, uint32_t stream, std::string_view payload);
// Writes just the header for a payload of `length` bytes (at most kMaxPayload) to out, so that a
// sender can read data straight into the space after it.
void EncodeFrameHeader(FrameType type, uint32_t stream, uint32_t length,
                       char (&out)[kFrameHeaderSize]);

// The kHello payload, and its parser (false: not a hello of any protocol this code knows how to
// read; *version may still be another protocol's, which the caller refuses by name).
std::string EncodeHello(std::string_view agent_version);
bool DecodeHello(std::string_view payload, uint32_t* version, std::string* agent_version);
// Where the first kHello frame starts in bytes (from a stream joined midway): the offset of its
// header, or std::string_view::npos. A frame cut off by the end of bytes is found as soon as its
// header and magic are in.
size_t FindHelloFrame(std::string_view bytes);

// Incremental parser of a byte stream into frames. Not thread-safe.
class FrameParser {
 public:
  enum class Result { kFrame, kNeedMore, kError };

  // Takes bytes from the front of *input until one frame is complete (kFrame, *frame filled),
  // input is exhausted (kNeedMore), or the bytes are not a valid frame (kError; sticky).
  Result Next(std::span<const uint8_t>* input, Frame* frame);

  const std::string& error() const { return error_; }

 private:
  Result Fail(std::string message);

  uint8_t header_[kFrameHeaderSize] = {};
  size_t header_have_ = 0;
  bool have_header_ = false;
  FrameType type_ = FrameType::kHello;
  uint32_t stream_ = 0;
  uint32_t length_ = 0;
  std::string payload_;
  std::string error_;
};

// Builds a payload. Strings are u32 length + bytes; lists are u32 count + items.
class PayloadWriter {
 public:
  PayloadWriter& U32(uint32_t v);
  PayloadWriter& I32(int32_t v) { return U32(static_cast<uint32_t>(v)); }
  PayloadWriter& U64(uint64_t v);
  PayloadWriter& I64(int64_t v) { return U64(static_cast<uint64_t>(v)); }
  PayloadWriter& Str(std::string_view s);
  PayloadWriter& StrList(const std::vector<std::string>& list);
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

// Reads a payload. Every getter returns false once anything was short or over a cap; check
// ok() (or AtEnd(), which also requires that nothing is left over) after the last one.
class PayloadReader {
 public:
  explicit PayloadReader(std::string_view in) : in_(in) {}
  bool U32(uint32_t* v);
  bool I32(int32_t* v);
  bool U64(uint64_t* v);
  bool I64(int64_t* v);
  bool Str(std::string* s);
  bool StrList(std::vector<std::string>* list);
  bool ok() const { return ok_; }
  bool AtEnd() const { return ok_ && pos_ == in_.size(); }

 private:
  bool Take(size_t n, const char** p);
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace airlock

#endif  // AIRLOCK_COMMON_CHANNEL_FRAME_H_
