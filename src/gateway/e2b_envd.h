// The E2B-compatible in-sandbox API ("envd", as E2B's SDKs reach it on port 49983) as plain
// data: which operation a request names, the Connect protocol's envelopes and JSON messages of
// E2B's process service (package `process`, JSON names as E2B's published .proto gives them),
// the `/files` query, multipart bodies and URL signatures, and the bodies the SDKs expect
// back. What each operation does is the daemon's (src/daemon/e2b_envd.cc).
//
// Every byte comes from whoever can reach the gateway (an access token is checked only after
// the route is known): bodies are capped, parsed with nlohmann::json, every field is checked
// for its type and range, and unknown fields are ignored as Connect's JSON codec does.
#ifndef AIRLOCK_GATEWAY_E2B_ENVD_H_
#define AIRLOCK_GATEWAY_E2B_ENVD_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/common/channel_messages.h"

namespace airlock::gateway::e2b {

// The port E2B's SDKs reach envd on.
inline constexpr uint16_t kEnvdPort = 49983;
// A Connect request's body (JSON, or one envelope of it) larger than this is refused.
inline constexpr size_t kMaxRpcBytes = 1 << 20;
// At most this many arguments or environment entries in a process's start.
inline constexpr size_t kMaxArgs = 4096;

enum class EnvdOp {
  kUnknown,        // not one of envd's paths: 404
  kUnimplemented,  // one of envd's RPCs this server does not serve (yet): Connect unimplemented
  kHealth,         // GET /health
  kFilesRead,      // GET /files
  kFilesWrite,     // POST /files
  kStart,          // POST /process.Process/Start (server stream)
  kConnect,        // POST /process.Process/Connect (server stream)
  kList,           // POST /process.Process/List
  kSendInput,      // POST /process.Process/SendInput
  kSendSignal,     // POST /process.Process/SendSignal
  kCloseStdin,     // POST /process.Process/CloseStdin
  kUpdate,         // POST /process.Process/Update (a PTY's size)
  kStreamInput,    // POST /process.Process/StreamInput (client stream)
  kStat,           // POST /filesystem.Filesystem/Stat
  kMakeDir,        // POST /filesystem.Filesystem/MakeDir
  kMove,           // POST /filesystem.Filesystem/Move
  kListDir,        // POST /filesystem.Filesystem/ListDir
  kRemove,         // POST /filesystem.Filesystem/Remove
  kWatchDir,       // POST /filesystem.Filesystem/WatchDir (server stream)
  kCreateWatcher,  // POST /filesystem.Filesystem/CreateWatcher (events kept for polling)
  kGetWatcherEvents,
  kRemoveWatcher,
};
// method and request-target as sent. `rpc` is set to "package.Service/Method" for RPC paths.
EnvdOp EnvdOpOf(absl::string_view method, absl::string_view target, std::string* rpc);
// Whether the operation is a Connect stream, answered as one (Content-Type
// application/connect+json): Start, Connect, WatchDir, and StreamInput (whose request is a
// stream too).
bool IsStreaming(EnvdOp op);

// --- The Connect protocol -------------------------------------------------------------------

// A streaming request's body: exactly one envelope (flags 0, a 4-byte big-endian length, that
// much JSON). INVALID_ARGUMENT otherwise.
[[nodiscard]] absl::StatusOr<std::string> OpenEnvelope(absl::string_view body);
// The envelopes of a client stream (StreamInput) as its body arrives: each a message (flags 0)
// of at most kMaxRpcBytes.
class EnvelopeReader {
 public:
  void Add(absl::string_view bytes) { buffer_.append(bytes.data(), bytes.size()); }
  // The next whole envelope's message, or nullopt until one is whole; INVALID_ARGUMENT for
  // an envelope compressed, marked the stream's end, or longer than kMaxRpcBytes.
  [[nodiscard]] absl::StatusOr<std::optional<std::string>> Next();
  // Whether part of an envelope is left (at the body's end: one cut short).
  bool partial() const { return !buffer_.empty(); }

 private:
  std::string buffer_;
};

// One envelope of a streaming answer: a message (end = false) or the end of the stream (flags
// 2, whose JSON is {} or {"error": {...}}).
std::string Envelope(absl::string_view json, bool end = false);
// The end-of-stream message: {} for OK, else {"error":{"code","message"}}.
std::string EndOfStreamJson(const absl::Status& status);
// A unary call's error: the HTTP status Connect gives the code, and its JSON body.
int ConnectHttpStatus(const absl::Status& status);
std::string ConnectErrorJson(const absl::Status& status);
// Connect's name of a status code ("not_found", ...).
const char* ConnectCode(absl::StatusCode code);

// --- process.Process -------------------------------------------------------------------------

struct ProcessConfig {
  std::string cmd;
  std::vector<std::string> args;
  std::map<std::string, std::string> envs;
  std::optional<std::string> cwd;
};
struct StartRequest {
  ProcessConfig process;
  bool pty = false;  // on a terminal of pty_rows x pty_cols
  uint32_t pty_rows = 24, pty_cols = 80;
  std::optional<std::string> tag;
  bool stdin = true;  // absent: true, as envd
};
[[nodiscard]] absl::StatusOr<StartRequest> ParseStartRequest(absl::string_view json);

// A ProcessSelector: by pid or by tag.
struct Selector {
  std::optional<uint32_t> pid;
  std::string tag;
};
// {"process": SELECTOR} (Connect, CloseStdin).
[[nodiscard]] absl::StatusOr<Selector> ParseSelectorRequest(absl::string_view json);
struct SendInputRequest {
  Selector process;
  std::string data;
  bool pty = false;  // input.pty rather than input.stdin
};
[[nodiscard]] absl::StatusOr<SendInputRequest> ParseSendInputRequest(absl::string_view json);
// One message of a StreamInput stream: {"start": {"process": SELECTOR}} (the first),
// {"data": {"input": {"stdin"|"pty": BASE64}}} or {"keepalive": {}}.
struct StreamInputEvent {
  enum class Kind { kStart, kData, kKeepAlive } kind = Kind::kKeepAlive;
  Selector process;  // kStart's
  std::string data;  // kData's
};
[[nodiscard]] absl::StatusOr<StreamInputEvent> ParseStreamInputEvent(absl::string_view json);
struct SendSignalRequest {
  Selector process;
  int signal = 0;  // 9 or 15
};
[[nodiscard]] absl::StatusOr<SendSignalRequest> ParseSendSignalRequest(absl::string_view json);
struct UpdateRequest {
  Selector process;
  std::optional<std::pair<uint32_t, uint32_t>> pty_rows_cols;
};
[[nodiscard]] absl::StatusOr<UpdateRequest> ParseUpdateRequest(absl::string_view json);

// The events of a process stream ({"event": {...}}), each the JSON of one envelope.
std::string StartEventJson(uint32_t pid);
enum class Output { kStdout, kStderr, kPty };
std::string DataEventJson(Output output, absl::string_view bytes);
// exited: it ended by itself with exit_code; otherwise a signal ended it (exit_code -1).
std::string EndEventJson(int exit_code, bool exited, absl::string_view status,
                         absl::string_view error);
std::string KeepAliveEventJson();

struct ProcessInfo {
  ProcessConfig config;
  uint32_t pid = 0;
  std::optional<std::string> tag;
};
std::string ListResponseJson(const std::vector<ProcessInfo>& processes);

// --- filesystem.Filesystem ------------------------------------------------------------------

// {"path"} (Stat, MakeDir, Remove): the path, not empty.
[[nodiscard]] absl::StatusOr<std::string> ParsePathRequest(absl::string_view json);
struct MoveRequest {
  std::string source, destination;
};
[[nodiscard]] absl::StatusOr<MoveRequest> ParseMoveRequest(absl::string_view json);
struct ListDirRequest {
  std::string path;
  uint32_t depth = 1;  // 0 (unset) is 1; at most kMaxFsDepth
};
[[nodiscard]] absl::StatusOr<ListDirRequest> ParseListDirRequest(absl::string_view json);
// WatchDir and CreateWatcher (allowNetworkMounts is accepted and has no effect: a guest has no
// network mounts of E2B's kind).
struct WatchRequest {
  std::string path;
  bool recursive = false;
  bool include_entry = false;
};
[[nodiscard]] absl::StatusOr<WatchRequest> ParseWatchRequest(absl::string_view json);
// {"watcherId"} (GetWatcherEvents, RemoveWatcher): the id, not empty.
[[nodiscard]] absl::StatusOr<std::string> ParseWatcherIdRequest(absl::string_view json);

// {"entry": ENTRY} (Stat, MakeDir, Move) and {"entries": [...]} (ListDir), each entry an
// EntryInfo: its permission bits as mode, and as Go writes them ("-rw-r--r--", "drwxr-xr-x",
// "Lrwxrwxrwx") as permissions.
std::string EntryResponseJson(const FsEntry& entry);
// protobuf's JSON of a Timestamp (and E2B's date-times): RFC 3339 in UTC, with 0 or 9 digits
// of fraction.
std::string TimestampJson(int64_t seconds, uint32_t nanos);
std::string ListDirResponseJson(const std::vector<FsEntry>& entries);
// The events of a WatchDir stream ({"start": {}}, {"filesystem": EVENT}, {"keepalive": {}}).
std::string WatchStartEventJson();
std::string WatchEventJson(const WatchRecord& record);
std::string WatchKeepAliveEventJson();
std::string CreateWatcherResponseJson(absl::string_view watcher_id);
std::string WatcherEventsResponseJson(const std::vector<WatchRecord>& records);

// --- /files ------------------------------------------------------------------------------------

struct FilesQuery {
  std::optional<std::string> path;
  std::optional<std::string> username;
  std::string signature;
  std::optional<int64_t> signature_expiration;
};
[[nodiscard]] absl::StatusOr<FilesQuery> ParseFilesQuery(absl::string_view target);

// E2B's URL signature of a file operation ("read" or "write"): "v1_" and the unpadded base64
// of SHA-256("PATH:OPERATION:USER:TOKEN[:EXPIRATION]").
std::string FileSignature(absl::string_view path, absl::string_view operation,
                          absl::string_view user, absl::string_view token,
                          std::optional<int64_t> expiration);

// The parts of a multipart/form-data body named "file": each its filename (a path) and
// content. content_type: the request's Content-Type (carries the boundary).
struct FilePart {
  std::string filename;
  std::string content;
};
[[nodiscard]] absl::StatusOr<std::vector<FilePart>> ParseMultipartFiles(
    absl::string_view content_type, absl::string_view body);

// The answer to an upload: [{"path","name","type":"file","metadata"}] for each path written
// (metadata left out when there is none).
std::string WrittenFilesJson(const std::vector<std::string>& paths,
                             const FileMetadata& metadata = {});
// The metadata of an upload, from its X-Metadata-KEY headers (keys lowercase, as HTTP carries
// them; sorted): INVALID_ARGUMENT for a key or value outside FileWriteMessage's caps, more
// than kMaxFileMetadata, or a key twice.
[[nodiscard]] absl::StatusOr<FileMetadata> MetadataFromHeaders(
    const std::vector<std::pair<std::string, std::string>>& headers);

// An absolute path for one an SDK sent: relative ones are under home. INVALID_ARGUMENT for an
// empty one or one with a NUL.
[[nodiscard]] absl::StatusOr<std::string> ResolvePath(absl::string_view path,
                                                      absl::string_view home);

// The user named by "Authorization: Basic base64(USER:)"; nullopt if there is none or it is
// not that form.
std::optional<std::string> BasicAuthUser(absl::string_view authorization);

}  // namespace airlock::gateway::e2b

#endif  // AIRLOCK_GATEWAY_E2B_ENVD_H_
