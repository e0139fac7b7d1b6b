// The payloads of the host <-> guest channel's frames (channel_frame.h): one struct per frame
// type that carries one, and one encoder and one decoder for each, shared by the host
// (src/vm/, src/net/), the guest agent (src/guest/) and the fake guest (src/testing/).
//
// DecodePayload is the only place a payload's bytes are read: it refuses (returns false) a
// payload that is cut short, has bytes left over, or has a field outside the protocol's caps
// and ranges stated on each struct, so a caller sees only messages the protocol allows. What a
// field means to one side (an absolute path, a clean directory) is that side's to check.
// EncodePayload writes what DecodePayload reads: a payload decoded and encoded again is the
// same bytes. Free-text fields (messages, reasons) and lists of ports are cut to their caps
// when encoded; every other field is the caller's to keep within its caps.
//
// Depends on nothing but channel_frame.h and the C++ standard library (the agent links it).
#ifndef AIRLOCK_COMMON_CHANNEL_MESSAGES_H_
#define AIRLOCK_COMMON_CHANNEL_MESSAGES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/common/channel_frame.h"

namespace airlock {

// Caps of the free-text fields.
inline constexpr size_t kMaxReasonBytes = 1024;       // kReady's problem, kReset, kDnsAnswer
inline constexpr size_t kMaxExitMessageBytes = 4096;  // kExit
// kSync's fields.
inline constexpr size_t kMaxSyncEntropy = 512;
inline constexpr size_t kMaxHostnameBytes = 64;
// A DNS name (kDnsQuery, kConnect), without its trailing dot.
inline constexpr size_t kMaxDnsNameBytes = 253;
// Signal numbers (kSignal, kExit of a signaled process).
inline constexpr int32_t kMaxSignal = 64;

// A volume the guest mounts (kSync): slot below kVolumeSlots, each slot once; the mount point
// absolute and clean (IsVolumeMountPoint).
struct VolumeMount {
  uint32_t slot = 0;
  uint32_t flags = 0;  // kVolume*
  std::string path;
  bool operator==(const VolumeMount&) const = default;
};
// Where a volume may be mounted: an absolute, clean path of at most 255 printable bytes; not
// "/", nothing in /proc, /sys, /dev, /run or /workspace (the agent's and the kernel's), and not
// one of the system's top-level directories itself (/etc, /usr, /var, /home...; a directory in
// them, such as /var/cache/apt or /root/.cache, is fine).
bool IsVolumeMountPoint(std::string_view path);

// kSync: nanoseconds < 10^9, entropy at most kMaxSyncEntropy, hostname at most
// kMaxHostnameBytes, volumes as VolumeMount says.
struct SyncMessage {
  static constexpr FrameType kType = FrameType::kSync;
  int64_t seconds = 0;  // unix time
  uint32_t nanoseconds = 0;
  std::string entropy;
  uint32_t pids_max = 0;  // 0: no limit
  std::string hostname;   // empty: keep
  uint32_t flags = 0;     // kSync*
  std::vector<VolumeMount> volumes;
  bool operator==(const SyncMessage&) const = default;
};

// kReady: both stream ids below 2^31, the guest's even; problem at most kMaxReasonBytes.
struct ReadyMessage {
  static constexpr FrameType kType = FrameType::kReady;
  uint32_t highest_stream = 0;        // the highest stream id the guest has seen
  uint32_t highest_guest_stream = 0;  // the highest it opened itself
  std::string problem;                // what the guest could not set up; empty: nothing
  bool operator==(const ReadyMessage&) const = default;
};

// kExecStart: argv not empty, at most kMaxListItems strings in argv and env together; with
// kExecFlagTty, rows and cols within 1..kMaxTerminalSide.
struct ExecStartMessage {
  static constexpr FrameType kType = FrameType::kExecStart;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // KEY=VALUE
  std::string cwd;
  uint32_t flags = 0;  // kExecFlag*
  std::string user;    // empty: root
  uint32_t rows = 0, cols = 0;
  uint64_t exec_id = 0;  // the host's; the activity record attributes the command's processes
  bool operator==(const ExecStartMessage&) const = default;
};

// kExit: code an exit status (0..255) for kExited, a signal (1..kMaxSignal) for kSignaled, an
// errno (0..4095) otherwise; message at most kMaxExitMessageBytes.
struct ExitMessage {
  static constexpr FrameType kType = FrameType::kExit;
  ExitKind kind = ExitKind::kExited;
  int32_t code = 0;
  std::string message;
  bool operator==(const ExitMessage&) const = default;
};

// kSignal: 1..kMaxSignal.
struct SignalMessage {
  static constexpr FrameType kType = FrameType::kSignal;
  int32_t signal = 0;
  bool operator==(const SignalMessage&) const = default;
};

// kWindow.
struct WindowMessage {
  static constexpr FrameType kType = FrameType::kWindow;
  uint32_t bytes = 0;  // more the sender will accept
  bool operator==(const WindowMessage&) const = default;
};

// kResize: rows and cols within 1..kMaxTerminalSide.
struct ResizeMessage {
  static constexpr FrameType kType = FrameType::kResize;
  uint32_t rows = 0, cols = 0;
  bool operator==(const ResizeMessage&) const = default;
};

// kFileWrite.
// A file's metadata (E2B's): user.e2b.KEY extended attributes, at most kMaxFileMetadata of
// them, each key 1 to kMaxMetadataKeyBytes of HTTP token characters (letters, digits and
// !#$%&'*+-.^_`|~) and each value at most kMaxMetadataValueBytes of printable ASCII.
using FileMetadata = std::vector<std::pair<std::string, std::string>>;
inline constexpr size_t kMaxFileMetadata = 32;
inline constexpr size_t kMaxMetadataKeyBytes = 128;
inline constexpr size_t kMaxMetadataValueBytes = 1024;
inline constexpr char kMetadataXattrPrefix[] = "user.e2b.";
bool ValidMetadataKey(std::string_view key);
bool ValidMetadataValue(std::string_view value);

// kFileWrite: metadata within the caps above, set on the file as it is written.
struct FileWriteMessage {
  static constexpr FrameType kType = FrameType::kFileWrite;
  std::string path;
  uint32_t mode = 0;
  FileMetadata metadata;
  bool operator==(const FileWriteMessage&) const = default;
};

// kFileRead.
struct FileReadMessage {
  static constexpr FrameType kType = FrameType::kFileRead;
  std::string path;
  bool operator==(const FileReadMessage&) const = default;
};

// kTailFiles's limits.
inline constexpr uint32_t kMaxTailDepth = 4;
inline constexpr uint32_t kMaxTailBytes = 4 << 20;
inline constexpr uint32_t kMaxTailFiles = 256;
inline constexpr size_t kMaxTailSuffixBytes = 64;

// kTailFiles: depth at most kMaxTailDepth, max_bytes at most kMaxTailBytes, suffix at most
// kMaxTailSuffixBytes, at most kMaxTailFiles files already read.
struct TailFilesMessage {
  static constexpr FrameType kType = FrameType::kTailFiles;
  std::string user;
  std::string dir;
  std::string suffix;
  uint32_t depth = 0;
  uint32_t max_bytes = 0;
  std::vector<std::pair<std::string, uint64_t>> offsets;  // name (relative to dir), offset
  bool operator==(const TailFilesMessage&) const = default;
};

// kReadAgentStore: the stores the guest knows how to read.
enum class AgentStore : uint32_t {
  kOpenCode = 1,  // OpenCode's SQLite database: its `part` table, with each part's message role
};
// kReadAgentStore's limits: rows per answer, their data in all, one row's data (a larger row
// comes without its data, its size said), and an id.
inline constexpr uint32_t kMaxStoreRows = 1024;
inline constexpr uint32_t kMaxStoreBytes = 4 << 20;
inline constexpr uint32_t kMaxStoreRowBytes = 1 << 20;
inline constexpr size_t kMaxStoreIdBytes = 256;

// kReadAgentStore: path a clean relative path (of the database, under user's home), max_rows
// at most kMaxStoreRows, max_bytes at least kMaxStoreRowBytes and at most kMaxStoreBytes.
struct AgentStoreMessage {
  static constexpr FrameType kType = FrameType::kReadAgentStore;
  uint32_t store = 0;  // AgentStore
  std::string user;
  std::string path;
  int64_t after_ms = 0;  // rows changed after (after_ms, after_id), in that order
  std::string after_id;
  uint32_t max_rows = 0;
  uint32_t max_bytes = 0;
  bool operator==(const AgentStoreMessage&) const = default;
};

// kFsRequest's operations.
enum class FsOp : uint32_t {
  kStat = 1,
  kList = 2,
  kMakeDir = 3,
  kMove = 4,
  kRemove = 5,
  kSetAttributes = 6,  // chown/chmod path (not following a symbolic link) as `attributes` say
};
// Which of FsRequestMessage's uid, gid and mode a kSetAttributes sets.
inline constexpr uint32_t kSetUid = 1, kSetGid = 2, kSetMode = 4;
// kFsRequest's limits: how deep a listing goes, and how much it answers.
inline constexpr uint32_t kMaxFsDepth = 64;
inline constexpr uint32_t kMaxFsEntries = 16384;
inline constexpr uint32_t kMaxFsAnswerBytes = 8 << 20;
// Caps on the fields of an FsEntry.
inline constexpr size_t kMaxFsPathBytes = 4096;
inline constexpr size_t kMaxFsNameBytes = 255;
inline constexpr size_t kMaxFsOwnerBytes = 64;

// kFsRequest: a known op, depth at most kMaxFsDepth, attributes only kSet* bits, mode at most
// 07777.
struct FsRequestMessage {
  static constexpr FrameType kType = FrameType::kFsRequest;
  FsOp op = FsOp::kStat;
  std::string user;    // owner of the directories it makes; empty: root
  std::string path;    // absolute
  std::string target;  // kMove: where path goes (absolute)
  uint32_t depth = 0;  // kList: 1 = the directory's own entries
  // kSetAttributes (and kMakeDir: the new directory's, after it is made): kSet* bits, and the
  // values they set; mode is permission bits only (at most 07777).
  uint32_t attributes = 0;
  uint32_t uid = 0, gid = 0, mode = 0;
  bool operator==(const FsRequestMessage&) const = default;
};

// kWatchDir: flags only kWatch* bits.
struct WatchDirMessage {
  static constexpr FrameType kType = FrameType::kWatchDir;
  std::string user;
  std::string path;  // absolute
  uint32_t flags = 0;
  bool operator==(const WatchDirMessage&) const = default;
};

// kProtocolError.
struct ProtocolErrorMessage {
  static constexpr FrameType kType = FrameType::kProtocolError;
  std::string message;  // at most kMaxReasonBytes
  bool operator==(const ProtocolErrorMessage&) const = default;
};

// kDnsQuery: name not empty, at most kMaxDnsNameBytes.
struct DnsQueryMessage {
  static constexpr FrameType kType = FrameType::kDnsQuery;
  std::string name;
  uint32_t qtype = 0;
  bool operator==(const DnsQueryMessage&) const = default;
};

// kDnsAnswer: a known verdict, at most kMaxRulePorts ports each within 1..65535, message at most
// kMaxReasonBytes.
struct DnsAnswerMessage {
  static constexpr FrameType kType = FrameType::kDnsAnswer;
  DnsVerdict verdict = DnsVerdict::kFailed;
  std::vector<uint16_t> ports;
  std::string message;  // why it was denied
  bool operator==(const DnsAnswerMessage&) const = default;
};

// kConnect: address 4 or 16 bytes, port within 1..65535, name at most kMaxDnsNameBytes.
struct ConnectMessage {
  static constexpr FrameType kType = FrameType::kConnect;
  std::string name;     // the name whose synthetic address was dialed; empty: an address rule
  std::string address;  // network byte order
  uint32_t port = 0;
  bool operator==(const ConnectMessage&) const = default;
};

// kOpenPort: port within 1..65535.
struct OpenPortMessage {
  static constexpr FrameType kType = FrameType::kOpenPort;
  uint32_t port = 0;
  bool operator==(const OpenPortMessage&) const = default;
};

// kReset: message at most kMaxReasonBytes.
struct ResetMessage {
  static constexpr FrameType kType = FrameType::kReset;
  uint32_t code = 0;  // an errno
  std::string message;
  bool operator==(const ResetMessage&) const = default;
};

// One address rule of kNetPolicy: base 4 bytes (network byte order), prefix at most 32, at most
// kMaxRulePorts ports each within 1..65535.
struct AddressRuleMessage {
  std::string base;
  uint32_t prefix = 0;
  std::vector<uint16_t> ports;
  bool operator==(const AddressRuleMessage&) const = default;
};

// kNetPolicy: at most kMaxListItems rules.
struct NetPolicyMessage {
  static constexpr FrameType kType = FrameType::kNetPolicy;
  std::vector<AddressRuleMessage> rules;
  bool operator==(const NetPolicyMessage&) const = default;
};

// kMetrics: guest resource usage, sampled by the agent.
struct GuestMetrics {
  static constexpr FrameType kType = FrameType::kMetrics;
  uint64_t cpu_busy_ticks = 0;    // /proc/stat user+nice+system+irq+softirq+steal
  uint64_t cpu_total_ticks = 0;   // the above plus idle and iowait
  uint64_t ticks_per_second = 0;  // sysconf(_SC_CLK_TCK)
  uint64_t vcpus = 0;
  uint64_t memory_total_bytes = 0;
  uint64_t memory_available_bytes = 0;
  uint64_t processes = 0;
  uint64_t disk_total_bytes = 0;  // the writable layer
  uint64_t disk_used_bytes = 0;
  uint64_t uptime_ms = 0;
  bool operator==(const GuestMetrics&) const = default;
};

std::string EncodePayload(const SyncMessage& m);
std::string EncodePayload(const ReadyMessage& m);
std::string EncodePayload(const ExecStartMessage& m);
std::string EncodePayload(const ExitMessage& m);
std::string EncodePayload(const SignalMessage& m);
std::string EncodePayload(const WindowMessage& m);
std::string EncodePayload(const ResizeMessage& m);
std::string EncodePayload(const FileWriteMessage& m);
std::string EncodePayload(const FileReadMessage& m);
std::string EncodePayload(const TailFilesMessage& m);
std::string EncodePayload(const AgentStoreMessage& m);
std::string EncodePayload(const FsRequestMessage& m);
std::string EncodePayload(const WatchDirMessage& m);
std::string EncodePayload(const ProtocolErrorMessage& m);
std::string EncodePayload(const DnsQueryMessage& m);
std::string EncodePayload(const DnsAnswerMessage& m);
std::string EncodePayload(const ConnectMessage& m);
std::string EncodePayload(const OpenPortMessage& m);
std::string EncodePayload(const ResetMessage& m);
std::string EncodePayload(const NetPolicyMessage& m);
std::string EncodePayload(const GuestMetrics& m);

[[nodiscard]] bool DecodePayload(std::string_view payload, SyncMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, ReadyMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, ExecStartMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, ExitMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, SignalMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, WindowMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, ResizeMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, FileWriteMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, FileReadMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, TailFilesMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, AgentStoreMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, FsRequestMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, WatchDirMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, ProtocolErrorMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, DnsQueryMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, DnsAnswerMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, ConnectMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, OpenPortMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, ResetMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, NetPolicyMessage* m);
[[nodiscard]] bool DecodePayload(std::string_view payload, GuestMetrics* m);

// A whole frame carrying m, on `stream`.
template <typename Message>
std::string EncodeMessageFrame(uint32_t stream, const Message& m) {
  return EncodeFrame(Message::kType, stream, EncodePayload(m));
}

// One file's news in a kTailFiles answer: its name (relative to the directory), its size now,
// and its bytes from offset (the host's, or 0 if the file is new to it or shrank) on.
struct TailRecord {
  std::string name;
  uint64_t size = 0;
  uint64_t offset = 0;
  std::string bytes;
};
// string name, u64 size, u64 offset, string bytes.
std::string EncodeTailRecord(const TailRecord& r);
// A whole kTailFiles answer (the concatenated kStdout payloads): false, with why, on anything
// malformed: a record cut short, more than kMaxTailFiles, names empty, absolute, with a "."
// or ".." component, a NUL, or over 4096 bytes, bytes beyond size or offset, or more than
// max_bytes of content in all.
bool DecodeTailRecords(std::string_view answer, uint32_t max_bytes, std::vector<TailRecord>* out,
                       std::string* error);

// What a file is (an FsEntry's type).
enum class FsType : uint32_t { kOther = 0, kFile = 1, kDirectory = 2, kSymlink = 3 };

// One entry of a kFsRequest answer or a watch record, as lstat(2) saw it: symbolic links are
// not followed.
struct FsEntry {
  std::string name;  // its last component ("/" for the root), at most kMaxFsNameBytes
  std::string path;  // absolute, at most kMaxFsPathBytes
  FsType type = FsType::kOther;
  uint64_t size = 0;
  uint32_t mode = 0;  // st_mode: the type's bits and the permission bits
  std::string owner;  // user and group names (numbers when the guest has no name for them)
  std::string group;
  int64_t mtime_seconds = 0;
  uint32_t mtime_nanos = 0;    // below 10^9
  std::string symlink_target;  // what a symbolic link holds, at most kMaxFsPathBytes
  uint32_t uid = 0, gid = 0;
  int64_t atime_seconds = 0, ctime_seconds = 0;
  uint32_t atime_nanos = 0, ctime_nanos = 0;  // below 10^9
  FileMetadata metadata;  // its user.e2b.* attributes, within FileWriteMessage's caps
  bool operator==(const FsEntry&) const = default;
};
// string name, string path, u32 type, u64 size, u32 mode, string owner, string group, i64
// mtime seconds, u32 nanoseconds, string symlink target, u32 uid, u32 gid, i64 atime seconds,
// u32 nanoseconds, i64 ctime seconds, u32 nanoseconds, u32 count and that many (string key,
// string value) of metadata.
std::string EncodeFsEntry(const FsEntry& e);
// A whole kFsRequest answer: false, with why, on a record cut short or a field outside its
// caps (names with a '/' or a NUL, paths not absolute), or more than kMaxFsEntries.
bool DecodeFsEntries(std::string_view answer, std::vector<FsEntry>* out, std::string* error);

// What a kWatchDir record says happened (the numbers are E2B's EventType's).
enum class WatchEventKind : uint32_t {
  kStarted = 0,  // the first record: the directory is watched
  kCreate = 1,
  kWrite = 2,
  kRemove = 3,
  kRename = 4,  // moved away (what comes in is kCreate)
  kChmod = 5,   // attributes changed
};
struct WatchRecord {
  WatchEventKind kind = WatchEventKind::kStarted;
  std::string name;  // relative to the watched directory ("sub/file" when recursive)
  bool has_entry = false;
  FsEntry entry;  // with kWatchIncludeEntry, when the file was still there to see
  bool operator==(const WatchRecord&) const = default;
};
// u32 kind, string name, u32 has_entry (0 or 1), then the entry's fields if it has one.
std::string EncodeWatchRecord(const WatchRecord& r);
// One kStdout payload of a kWatchDir stream (whole records): false, with why, on a record cut
// short, an unknown kind, a name that is absolute, unclean or over kMaxFsPathBytes, or a bad
// entry.
bool DecodeWatchRecords(std::string_view payload, std::vector<WatchRecord>* out,
                        std::string* error);

// What a kWatchActivity record says happened in the guest.
enum class ActivityKind : uint32_t {
  kProcessStart = 0,  // a program was executed: pid, parent, argv
  kProcessExit = 1,   // a process whose start was recorded ended: code
  kRead = 2,          // a file opened for reading only was closed
  kWrite = 3,         // a file opened for writing was closed
  kCreate = 4,        // a file or directory was made
  kRemove = 5,        // a file or directory was removed
  kRename = 6,        // path was renamed to target
  kLost = 7,          // code events the recorder could not keep; path says why
};
inline constexpr uint32_t kMaxActivityKind = 7;
// Caps of one record: argv items, their bytes in all, and a process's name (the kernel's comm).
inline constexpr size_t kMaxActivityArgs = 64;
inline constexpr size_t kMaxActivityArgvBytes = 4096;
inline constexpr size_t kMaxActivityProcessBytes = 16;
struct ActivityRecord {
  ActivityKind kind = ActivityKind::kProcessStart;
  int64_t unix_ms = 0;  // the guest's clock
  uint64_t exec_id =
      0;  // the command (ExecStartMessage.exec_id) whose process tree did it; 0: none
  uint32_t pid = 0;
  uint32_t parent = 0;  // kProcessStart: the parent's pid
  // kProcessExit: the exit status (0..255), or minus the signal that ended it; kLost: a count.
  int32_t code = 0;
  std::string process;  // the process's name (at most kMaxActivityProcessBytes)
  // Absolute, at most kMaxFsPathBytes: the file, or the program for kProcessStart (empty if it
  // ended before it was read); kProcessExit: empty; kLost: why.
  std::string path;
  std::string target;             // kRename: the new path
  std::vector<std::string> argv;  // kProcessStart, cut at the caps
  bool operator==(const ActivityRecord&) const = default;
};
// u32 kind, i64 unix_ms, u64 exec_id, u32 pid, u32 parent, i32 code, string process, string
// path, string target, strings argv.
std::string EncodeActivityRecord(const ActivityRecord& r);
// One kStdout payload of a kWatchActivity stream (whole records): false, with why, on a record
// cut short, an unknown kind, a path its kind does not allow or over kMaxFsPathBytes, a target
// on a kind other than kRename, or argv or a name over the caps.
bool DecodeActivityRecords(std::string_view payload, std::vector<ActivityRecord>* out,
                           std::string* error);

// One row of an agent's store (kReadAgentStore): OpenCode's part, with its message's role.
struct StoreRow {
  std::string id;
  std::string message_id;
  std::string session_id;
  std::string role;        // of the row's message ("user", "assistant"); empty if unknown
  int64_t updated_ms = 0;  // the store's time_updated
  uint64_t data_size = 0;  // of the row's data in the store
  std::string data;        // all of it (JSON, as the store has it), or none when over the cap
  bool operator==(const StoreRow&) const = default;
};
// A kReadAgentStore answer: u32 errno, string what failed, then rows, each string id, string
// message_id, string session_id, string role, i64 updated_ms, u64 data_size, string data.
std::string EncodeStoreAnswer(int error, std::string_view what, const std::vector<StoreRow>& rows);
// False, with why, on an answer cut short, more rows or data than asked for, an id empty or
// over kMaxStoreIdBytes, an errno over 4095, data that is neither all nor none of data_size,
// or rows out of order or not after the request's cursor. *error_number and *what: the guest's
// failure (0: none).
bool DecodeStoreAnswer(std::string_view answer, const AgentStoreMessage& request, int* error_number,
                       std::string* what, std::vector<StoreRow>* out, std::string* error);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_CHANNEL_MESSAGES_H_
