#include "src/gateway/e2b_envd.h"

#include <algorithm>
#include <csignal>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/common/sha256.h"
#include "src/gateway/e2b_control.h"

namespace airlock::gateway::e2b {
namespace {

using json = nlohmann::json;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(std::string(what));
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

absl::StatusOr<json> ParseMessage(absl::string_view body) {
  if (body.size() > kMaxRpcBytes) return Invalid("the message is too large");
  if (body.find_first_not_of(" \t\r\n") == absl::string_view::npos) return json::object();
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Invalid("the message must be a JSON object");
  return j;
}

// A field of a message: absent and null are alike (proto3's JSON).
const json* Field(const json& j, const char* json_name, const char* proto_name = nullptr) {
  for (const char* name : {json_name, proto_name}) {
    if (name == nullptr) continue;
    auto it = j.find(name);
    if (it != j.end() && !it->is_null()) return &*it;
  }
  return nullptr;
}

absl::StatusOr<std::string> StringField(const json& j, const char* name) {
  const json* f = Field(j, name);
  if (f == nullptr) return std::string();
  if (!f->is_string() || f->get_ref<const std::string&>().size() > kMaxRpcBytes) {
    return Invalid(absl::StrCat(name, " must be a string"));
  }
  return f->get<std::string>();
}

// A uint32 as protobuf's JSON writes it: a number, or a decimal string.
absl::StatusOr<uint32_t> Uint32Field(const json& j, const char* name) {
  const json* f = Field(j, name);
  if (f == nullptr) return 0u;
  uint64_t v = 0;
  if (f->is_number_unsigned()) {
    v = f->get<uint64_t>();
  } else if (f->is_number_integer()) {
    if (f->get<int64_t>() < 0) return Invalid(absl::StrCat(name, " must not be negative"));
    v = f->get<uint64_t>();
  } else if (!f->is_string() || !absl::SimpleAtoi(f->get_ref<const std::string&>(), &v)) {
    return Invalid(absl::StrCat(name, " must be a whole number"));
  }
  if (v > UINT32_MAX) return Invalid(absl::StrCat(name, " is too large"));
  return static_cast<uint32_t>(v);
}

const json* ObjectField(const json& j, const char* name, absl::Status* error) {
  const json* f = Field(j, name);
  if (f != nullptr && !f->is_object()) {
    *error = Invalid(absl::StrCat(name, " must be an object"));
    return nullptr;
  }
  return f;
}

// bytes: standard or URL-safe base64, padded or not.
absl::StatusOr<std::string> BytesField(const json& j, const char* name) {
  absl::StatusOr<std::string> text = StringField(j, name);
  if (!text.ok()) return text.status();
  std::string out;
  if (absl::Base64Unescape(*text, &out) || absl::WebSafeBase64Unescape(*text, &out)) return out;
  return Invalid(absl::StrCat(name, " must be base64"));
}

absl::StatusOr<Selector> ReadSelector(const json& message) {
  absl::Status error;
  const json* s = ObjectField(message, "process", &error);
  if (!error.ok()) return error;
  if (s == nullptr) return Invalid("process (a pid or a tag) is missing");
  Selector out;
  if (Field(*s, "pid") != nullptr) {
    absl::StatusOr<uint32_t> pid = Uint32Field(*s, "pid");
    if (!pid.ok()) return pid.status();
    out.pid = *pid;
  } else {
    absl::StatusOr<std::string> tag = StringField(*s, "tag");
    if (!tag.ok()) return tag.status();
    if (tag->empty()) return Invalid("process must name a pid or a tag");
    out.tag = *std::move(tag);
  }
  return out;
}

// A PTY's size: {"size": {"cols", "rows"}}, each 1 to 10000.
absl::StatusOr<std::pair<uint32_t, uint32_t>> ReadPtySize(const json& pty) {
  absl::Status error;
  const json* size = ObjectField(pty, "size", &error);
  if (!error.ok()) return error;
  if (size == nullptr) return Invalid("pty.size is missing");
  absl::StatusOr<uint32_t> cols = Uint32Field(*size, "cols");
  absl::StatusOr<uint32_t> rows = Uint32Field(*size, "rows");
  if (!cols.ok()) return cols.status();
  if (!rows.ok()) return rows.status();
  if (*cols < 1 || *cols > 10000 || *rows < 1 || *rows > 10000) {
    return Invalid("pty.size: cols and rows must each be from 1 to 10000");
  }
  return std::make_pair(*rows, *cols);
}

json ConfigJson(const ProcessConfig& c) {
  json j = {{"cmd", c.cmd}, {"args", c.args}};
  if (!c.envs.empty()) j["envs"] = c.envs;
  if (c.cwd) j["cwd"] = *c.cwd;
  return j;
}

std::string Event(const char* kind, json body) {
  return Dump(json{{"event", json{{kind, std::move(body)}}}});
}

}  // namespace

EnvdOp EnvdOpOf(absl::string_view method, absl::string_view target, std::string* rpc) {
  absl::string_view path = target.substr(0, target.find('?'));
  rpc->clear();
  if (path == "/health") return method == "GET" ? EnvdOp::kHealth : EnvdOp::kUnknown;
  if (path == "/files") {
    if (method == "GET") return EnvdOp::kFilesRead;
    if (method == "POST") return EnvdOp::kFilesWrite;
    return EnvdOp::kUnknown;
  }
  for (absl::string_view service : {"/process.Process/", "/filesystem.Filesystem/"}) {
    if (!absl::StartsWith(path, service) || method != "POST") continue;
    absl::string_view name = path.substr(service.size());
    *rpc = std::string(path.substr(1));
    if (service == "/process.Process/") {
      if (name == "Start") return EnvdOp::kStart;
      if (name == "Connect") return EnvdOp::kConnect;
      if (name == "List") return EnvdOp::kList;
      if (name == "SendInput") return EnvdOp::kSendInput;
      if (name == "SendSignal") return EnvdOp::kSendSignal;
      if (name == "CloseStdin") return EnvdOp::kCloseStdin;
      if (name == "Update") return EnvdOp::kUpdate;
      if (name == "StreamInput") return EnvdOp::kStreamInput;
    } else {
      if (name == "Stat") return EnvdOp::kStat;
      if (name == "MakeDir") return EnvdOp::kMakeDir;
      if (name == "Move") return EnvdOp::kMove;
      if (name == "ListDir") return EnvdOp::kListDir;
      if (name == "Remove") return EnvdOp::kRemove;
      if (name == "WatchDir") return EnvdOp::kWatchDir;
      if (name == "CreateWatcher") return EnvdOp::kCreateWatcher;
      if (name == "GetWatcherEvents") return EnvdOp::kGetWatcherEvents;
      if (name == "RemoveWatcher") return EnvdOp::kRemoveWatcher;
    }
    return EnvdOp::kUnimplemented;
  }
  return EnvdOp::kUnknown;
}

bool IsStreaming(EnvdOp op) {
  return op == EnvdOp::kStart || op == EnvdOp::kConnect || op == EnvdOp::kWatchDir ||
         op == EnvdOp::kStreamInput;
}

namespace {
// The message length in an envelope's 5-byte head (flags, then big-endian length).
uint32_t EnvelopeLength(absl::string_view head) {
  uint32_t n = 0;
  for (int i = 1; i <= 4; ++i) n = (n << 8) | static_cast<uint8_t>(head[i]);
  return n;
}
}  // namespace

absl::StatusOr<std::string> OpenEnvelope(absl::string_view body) {
  if (body.size() < 5) return Invalid("a streaming request is one Connect envelope");
  if (body[0] != 0) {
    return Invalid("the request's envelope is compressed or not a message; send it plain");
  }
  uint32_t length = EnvelopeLength(body);
  if (length != body.size() - 5) {
    return Invalid("a streaming request is exactly one Connect envelope");
  }
  return std::string(body.substr(5));
}

absl::StatusOr<std::optional<std::string>> EnvelopeReader::Next() {
  if (buffer_.size() < 5) return std::nullopt;
  if (buffer_[0] != 0) {
    return Invalid("a StreamInput envelope is compressed, or ends the stream; send messages plain");
  }
  uint32_t length = EnvelopeLength(buffer_);
  if (length > kMaxRpcBytes) return Invalid("a StreamInput message is too large");
  if (buffer_.size() < 5 + static_cast<size_t>(length)) return std::nullopt;
  std::string message = buffer_.substr(5, length);
  buffer_.erase(0, 5 + static_cast<size_t>(length));
  return message;
}

std::string Envelope(absl::string_view message, bool end) {
  std::string out;
  out.reserve(5 + message.size());
  out.push_back(end ? 2 : 0);
  uint32_t n = static_cast<uint32_t>(message.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(n >> shift));
  out.append(message.data(), message.size());
  return out;
}

const char* ConnectCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return "ok";
    case absl::StatusCode::kCancelled:
      return "canceled";
    case absl::StatusCode::kInvalidArgument:
      return "invalid_argument";
    case absl::StatusCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case absl::StatusCode::kNotFound:
      return "not_found";
    case absl::StatusCode::kAlreadyExists:
      return "already_exists";
    case absl::StatusCode::kPermissionDenied:
      return "permission_denied";
    case absl::StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case absl::StatusCode::kFailedPrecondition:
      return "failed_precondition";
    case absl::StatusCode::kAborted:
      return "aborted";
    case absl::StatusCode::kOutOfRange:
      return "out_of_range";
    case absl::StatusCode::kUnimplemented:
      return "unimplemented";
    case absl::StatusCode::kUnavailable:
      return "unavailable";
    case absl::StatusCode::kDataLoss:
      return "data_loss";
    case absl::StatusCode::kUnauthenticated:
      return "unauthenticated";
    case absl::StatusCode::kUnknown:
      return "unknown";
    default:
      return "internal";
  }
}

int ConnectHttpStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    default:
      return 500;
  }
}

std::string ConnectErrorJson(const absl::Status& status) {
  return Dump(json{{"code", ConnectCode(status.code())}, {"message", status.message()}});
}

std::string EndOfStreamJson(const absl::Status& status) {
  if (status.ok()) return "{}";
  return Dump(
      json{{"error", json{{"code", ConnectCode(status.code())}, {"message", status.message()}}}});
}

absl::StatusOr<StartRequest> ParseStartRequest(absl::string_view body) {
  absl::StatusOr<json> j = ParseMessage(body);
  if (!j.ok()) return j.status();
  StartRequest out;
  absl::Status error;
  const json* p = ObjectField(*j, "process", &error);
  if (!error.ok()) return error;
  if (p == nullptr) return Invalid("process (what to run) is missing");
  absl::StatusOr<std::string> cmd = StringField(*p, "cmd");
  if (!cmd.ok()) return cmd.status();
  if (cmd->empty()) return Invalid("process.cmd is empty: name the program to run");
  out.process.cmd = *std::move(cmd);
  if (const json* args = Field(*p, "args"); args != nullptr) {
    if (!args->is_array() || args->size() > kMaxArgs) {
      return Invalid(absl::StrCat("process.args must be a list of at most ", kMaxArgs, " strings"));
    }
    for (const json& a : *args) {
      if (!a.is_string()) return Invalid("process.args must be strings");
      out.process.args.push_back(a.get<std::string>());
    }
  }
  if (const json* envs = Field(*p, "envs"); envs != nullptr) {
    if (!envs->is_object() || envs->size() > kMaxArgs) {
      return Invalid("process.envs must be an object of string values");
    }
    for (const auto& [key, value] : envs->items()) {
      if (!value.is_string() || key.empty() || key.find('=') != std::string::npos ||
          key.find('\0') != std::string::npos) {
        return Invalid("process.envs must map names (without '=') to strings");
      }
      out.process.envs[key] = value.get<std::string>();
    }
  }
  if (Field(*p, "cwd") != nullptr) {
    absl::StatusOr<std::string> cwd = StringField(*p, "cwd");
    if (!cwd.ok()) return cwd.status();
    out.process.cwd = *std::move(cwd);
  }
  const json* pty = ObjectField(*j, "pty", &error);
  if (!error.ok()) return error;
  if (pty != nullptr) {
    out.pty = true;
    if (Field(*pty, "size") != nullptr) {
      absl::StatusOr<std::pair<uint32_t, uint32_t>> size = ReadPtySize(*pty);
      if (!size.ok()) return size.status();
      std::tie(out.pty_rows, out.pty_cols) = *size;
    }
  }
  if (Field(*j, "tag") != nullptr) {
    absl::StatusOr<std::string> tag = StringField(*j, "tag");
    if (!tag.ok()) return tag.status();
    out.tag = *std::move(tag);
  }
  if (const json* in = Field(*j, "stdin"); in != nullptr) {
    if (!in->is_boolean()) return Invalid("stdin must be true or false");
    out.stdin = in->get<bool>();
  }
  return out;
}

absl::StatusOr<Selector> ParseSelectorRequest(absl::string_view body) {
  absl::StatusOr<json> j = ParseMessage(body);
  if (!j.ok()) return j.status();
  return ReadSelector(*j);
}

absl::StatusOr<SendInputRequest> ParseSendInputRequest(absl::string_view body) {
  absl::StatusOr<json> j = ParseMessage(body);
  if (!j.ok()) return j.status();
  SendInputRequest out;
  absl::StatusOr<Selector> selector = ReadSelector(*j);
  if (!selector.ok()) return selector.status();
  out.process = *std::move(selector);
  absl::Status error;
  const json* input = ObjectField(*j, "input", &error);
  if (!error.ok()) return error;
  if (input == nullptr) return out;  // nothing to send
  out.pty = Field(*input, "pty") != nullptr;
  absl::StatusOr<std::string> data = BytesField(*input, out.pty ? "pty" : "stdin");
  if (!data.ok()) return data.status();
  out.data = *std::move(data);
  return out;
}

absl::StatusOr<StreamInputEvent> ParseStreamInputEvent(absl::string_view body) {
  absl::StatusOr<json> j = ParseMessage(body);
  if (!j.ok()) return j.status();
  StreamInputEvent out;
  absl::Status error;
  const json* start = ObjectField(*j, "start", &error);
  const json* data = ObjectField(*j, "data", &error);
  const json* keepalive = ObjectField(*j, "keepalive", &error);
  if (!error.ok()) return error;
  if ((start != nullptr) + (data != nullptr) + (keepalive != nullptr) != 1) {
    return Invalid("a StreamInput message is one of start, data and keepalive");
  }
  if (keepalive != nullptr) return out;
  if (start != nullptr) {
    absl::StatusOr<Selector> selector = ReadSelector(*start);
    if (!selector.ok()) return selector.status();
    out.kind = StreamInputEvent::Kind::kStart;
    out.process = *std::move(selector);
    return out;
  }
  out.kind = StreamInputEvent::Kind::kData;
  const json* input = ObjectField(*data, "input", &error);
  if (!error.ok()) return error;
  if (input == nullptr) return out;  // nothing to send
  absl::StatusOr<std::string> bytes =
      BytesField(*input, Field(*input, "pty") != nullptr ? "pty" : "stdin");
  if (!bytes.ok()) return bytes.status();
  out.data = *std::move(bytes);
  return out;
}

absl::StatusOr<SendSignalRequest> ParseSendSignalRequest(absl::string_view body) {
  absl::StatusOr<json> j = ParseMessage(body);
  if (!j.ok()) return j.status();
  SendSignalRequest out;
  absl::StatusOr<Selector> selector = ReadSelector(*j);
  if (!selector.ok()) return selector.status();
  out.process = *std::move(selector);
  const json* signal = Field(*j, "signal");
  if (signal != nullptr && signal->is_string()) {
    const std::string& name = signal->get_ref<const std::string&>();
    if (name == "SIGNAL_SIGKILL") out.signal = SIGKILL;
    if (name == "SIGNAL_SIGTERM") out.signal = SIGTERM;
  } else if (signal != nullptr && signal->is_number_integer()) {
    int64_t n = signal->get<int64_t>();
    if (n == SIGKILL || n == SIGTERM) out.signal = static_cast<int>(n);
  }
  if (out.signal == 0) {
    return absl::UnimplementedError("signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
  }
  return out;
}

absl::StatusOr<UpdateRequest> ParseUpdateRequest(absl::string_view body) {
  absl::StatusOr<json> j = ParseMessage(body);
  if (!j.ok()) return j.status();
  UpdateRequest out;
  absl::StatusOr<Selector> selector = ReadSelector(*j);
  if (!selector.ok()) return selector.status();
  out.process = *std::move(selector);
  absl::Status error;
  const json* pty = ObjectField(*j, "pty", &error);
  if (!error.ok()) return error;
  if (pty != nullptr) {
    absl::StatusOr<std::pair<uint32_t, uint32_t>> size = ReadPtySize(*pty);
    if (!size.ok()) return size.status();
    out.pty_rows_cols = *size;
  }
  return out;
}

std::string StartEventJson(uint32_t pid) { return Event("start", json{{"pid", pid}}); }

std::string DataEventJson(Output output, absl::string_view bytes) {
  const char* name = output == Output::kStdout   ? "stdout"
                     : output == Output::kStderr ? "stderr"
                                                 : "pty";
  return Event("data", json{{name, absl::Base64Escape(bytes)}});
}

std::string EndEventJson(int exit_code, bool exited, absl::string_view status,
                         absl::string_view error) {
  json end = {{"exitCode", exit_code}, {"exited", exited}, {"status", status}};
  if (!error.empty()) end["error"] = error;
  return Event("end", std::move(end));
}

std::string KeepAliveEventJson() { return Event("keepalive", json::object()); }

std::string ListResponseJson(const std::vector<ProcessInfo>& processes) {
  json list = json::array();
  for (const ProcessInfo& p : processes) {
    json item = {{"config", ConfigJson(p.config)}, {"pid", p.pid}};
    if (p.tag) item["tag"] = *p.tag;
    list.push_back(std::move(item));
  }
  return Dump(json{{"processes", std::move(list)}});
}

namespace {

absl::StatusOr<std::string> RequiredString(const json& j, const char* name) {
  absl::StatusOr<std::string> value = StringField(j, name);
  if (value.ok() && value->empty()) return Invalid(absl::StrCat(name, " is missing"));
  return value;
}

absl::StatusOr<bool> BoolField(const json& j, const char* name) {
  const json* f = Field(j, name);
  if (f == nullptr) return false;
  if (!f->is_boolean()) return Invalid(absl::StrCat(name, " must be true or false"));
  return f->get<bool>();
}

// Go's FileMode.String() of an entry's type and permission bits.
std::string Permissions(const FsEntry& e) {
  std::string out;
  switch (e.mode & 0170000) {
    case 0040000:
      out = "d";
      break;
    case 0120000:
      out = "L";
      break;
    case 0060000:
      out = "D";
      break;
    case 0020000:
      out = "Dc";
      break;
    case 0010000:
      out = "p";
      break;
    case 0140000:
      out = "S";
      break;
    default:
      out = "-";
  }
  const char* letters = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) out += (e.mode & (0400 >> i)) ? letters[i] : '-';
  return out;
}

json MetadataJson(const FileMetadata& metadata) {
  json object = json::object();
  for (const auto& [key, value] : metadata) object[key] = value;
  return object;
}

json EntryJson(const FsEntry& e) {
  const char* type = e.type == FsType::kFile        ? "FILE_TYPE_FILE"
                     : e.type == FsType::kDirectory ? "FILE_TYPE_DIRECTORY"
                     : e.type == FsType::kSymlink   ? "FILE_TYPE_SYMLINK"
                                                    : "FILE_TYPE_UNSPECIFIED";
  json j = {{"name", e.name},
            {"type", type},
            {"path", e.path},
            {"size", std::to_string(e.size)},  // int64: a string in protobuf's JSON
            {"mode", e.mode & 0777},
            {"permissions", Permissions(e)},
            {"owner", e.owner},
            {"group", e.group},
            {"modifiedTime", TimestampJson(e.mtime_seconds, e.mtime_nanos)}};
  if (e.type == FsType::kSymlink) j["symlinkTarget"] = e.symlink_target;
  if (!e.metadata.empty()) j["metadata"] = MetadataJson(e.metadata);
  return j;
}

json FilesystemEventJson(const WatchRecord& r) {
  static constexpr const char* kTypes[] = {"EVENT_TYPE_UNSPECIFIED", "EVENT_TYPE_CREATE",
                                           "EVENT_TYPE_WRITE",       "EVENT_TYPE_REMOVE",
                                           "EVENT_TYPE_RENAME",      "EVENT_TYPE_CHMOD"};
  json j = {{"name", r.name}, {"type", kTypes[static_cast<uint32_t>(r.kind) % 6]}};
  if (r.has_entry) j["entry"] = EntryJson(r.entry);
  return j;
}

}  // namespace

std::string TimestampJson(int64_t seconds, uint32_t nanos) {
  std::string out =
      absl::FormatTime("%Y-%m-%dT%H:%M:%S", absl::FromUnixSeconds(seconds), absl::UTCTimeZone());
  if (nanos != 0) {
    std::string fraction = std::to_string(nanos);
    out += "." + std::string(9 - fraction.size(), '0') + fraction;
  }
  return out + "Z";
}

absl::StatusOr<std::string> ParsePathRequest(absl::string_view body) {
  absl::StatusOr<json> j = ParseMessage(body);
  if (!j.ok()) return j.status();
  return RequiredString(*j, "path");
}

absl::StatusOr<MoveRequest> ParseMoveRequest(absl::string_view body) {
  absl::StatusOr<json> j = ParseMessage(body);
  if (!j.ok()) return j.status();
  absl::StatusOr<std::string> source = RequiredString(*j, "source");
  if (!source.ok()) return source.status();
  absl::StatusOr<std::string> destination = RequiredString(*j, "destination");
  if (!destination.ok()) return destination.status();
  return MoveRequest{*std::move(source), *std::move(destination)};
}

absl::StatusOr<ListDirRequest> ParseListDirRequest(absl::string_view body) {
  absl::StatusOr<json> j = ParseMessage(body);
  if (!j.ok()) return j.status();
  absl::StatusOr<std::string> path = RequiredString(*j, "path");
  if (!path.ok()) return path.status();
  absl::StatusOr<uint32_t> depth = Uint32Field(*j, "depth");
  if (!depth.ok()) return depth.status();
  if (*depth > kMaxFsDepth) {
    return Invalid(absl::StrCat("depth is at most ", kMaxFsDepth));
  }
  return ListDirRequest{*std::move(path), *depth == 0 ? 1 : *depth};
}

absl::StatusOr<WatchRequest> ParseWatchRequest(absl::string_view body) {
  absl::StatusOr<json> j = ParseMessage(body);
  if (!j.ok()) return j.status();
  WatchRequest out;
  absl::StatusOr<std::string> path = RequiredString(*j, "path");
  if (!path.ok()) return path.status();
  out.path = *std::move(path);
  absl::StatusOr<bool> recursive = BoolField(*j, "recursive");
  if (!recursive.ok()) return recursive.status();
  absl::StatusOr<bool> entry = BoolField(*j, "includeEntry");
  if (!entry.ok()) return entry.status();
  out.recursive = *recursive;
  out.include_entry = *entry;
  return out;
}

absl::StatusOr<std::string> ParseWatcherIdRequest(absl::string_view body) {
  absl::StatusOr<json> j = ParseMessage(body);
  if (!j.ok()) return j.status();
  return RequiredString(*j, "watcherId");
}

std::string EntryResponseJson(const FsEntry& entry) {
  return Dump(json{{"entry", EntryJson(entry)}});
}

std::string ListDirResponseJson(const std::vector<FsEntry>& entries) {
  json list = json::array();
  for (const FsEntry& e : entries) list.push_back(EntryJson(e));
  return Dump(json{{"entries", std::move(list)}});
}

std::string WatchStartEventJson() { return Dump(json{{"start", json::object()}}); }

std::string WatchEventJson(const WatchRecord& record) {
  return Dump(json{{"filesystem", FilesystemEventJson(record)}});
}

std::string WatchKeepAliveEventJson() { return Dump(json{{"keepalive", json::object()}}); }

std::string CreateWatcherResponseJson(absl::string_view watcher_id) {
  return Dump(json{{"watcherId", watcher_id}});
}

std::string WatcherEventsResponseJson(const std::vector<WatchRecord>& records) {
  json list = json::array();
  for (const WatchRecord& r : records) list.push_back(FilesystemEventJson(r));
  return Dump(json{{"events", std::move(list)}});
}

absl::StatusOr<FilesQuery> ParseFilesQuery(absl::string_view target) {
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> params = QueryParameters(target);
  if (!params.ok()) return params.status();
  FilesQuery q;
  for (auto& [name, value] : *params) {
    if (value.size() > kMaxFieldBytes) return Invalid(absl::StrCat(name, " is too long"));
    if (name == "path") {
      q.path = std::move(value);
    } else if (name == "username") {
      q.username = std::move(value);
    } else if (name == "signature") {
      q.signature = std::move(value);
    } else if (name == "signature_expiration") {
      int64_t at = 0;
      if (!absl::SimpleAtoi(value, &at)) {
        return Invalid("signature_expiration must be a Unix time in seconds");
      }
      q.signature_expiration = at;
    }
  }
  return q;
}

std::string FileSignature(absl::string_view path, absl::string_view operation,
                          absl::string_view user, absl::string_view token,
                          std::optional<int64_t> expiration) {
  Sha256 sha;
  sha.Update(absl::StrCat(path, ":", operation, ":", user, ":", token));
  if (expiration) sha.Update(absl::StrCat(":", *expiration));
  std::string encoded = absl::Base64Escape(sha.FinishRaw());
  while (!encoded.empty() && encoded.back() == '=') encoded.pop_back();
  return absl::StrCat("v1_", encoded);
}

absl::StatusOr<std::vector<FilePart>> ParseMultipartFiles(absl::string_view content_type,
                                                          absl::string_view body) {
  // multipart/form-data; boundary=XYZ (the boundary may be quoted).
  size_t at = absl::AsciiStrToLower(content_type).find("boundary=");
  if (!absl::StartsWithIgnoreCase(content_type, "multipart/form-data") ||
      at == absl::string_view::npos) {
    return Invalid("the upload must be multipart/form-data with a boundary");
  }
  absl::string_view boundary = content_type.substr(at + 9);
  boundary = boundary.substr(0, boundary.find(';'));
  boundary = absl::StripAsciiWhitespace(boundary);
  if (boundary.size() >= 2 && boundary.front() == '"' && boundary.back() == '"') {
    boundary = boundary.substr(1, boundary.size() - 2);
  }
  if (boundary.empty() || boundary.size() > 70) return Invalid("the multipart boundary is bad");
  const std::string delimiter = absl::StrCat("--", boundary);
  size_t pos = body.find(delimiter);
  if (pos == absl::string_view::npos) return Invalid("the multipart body has no parts");
  std::vector<FilePart> parts;
  for (;;) {
    pos += delimiter.size();
    if (body.substr(pos, 2) == "--") break;  // the closing delimiter
    if (body.substr(pos, 2) != "\r\n") return Invalid("the multipart body is malformed");
    pos += 2;
    size_t head_end = body.find("\r\n\r\n", pos);
    if (head_end == absl::string_view::npos) return Invalid("a multipart part has no end of head");
    absl::string_view head = body.substr(pos, head_end - pos);
    size_t next = body.find(absl::StrCat("\r\n", delimiter), head_end + 4);
    if (next == absl::string_view::npos) return Invalid("the multipart body ends early");
    absl::string_view content = body.substr(head_end + 4, next - head_end - 4);
    std::optional<std::string> name, filename;
    for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
      if (!absl::StartsWithIgnoreCase(line, "content-disposition:")) continue;
      for (absl::string_view param : absl::StrSplit(line.substr(20), ';')) {
        param = absl::StripAsciiWhitespace(param);
        size_t eq = param.find('=');
        if (eq == absl::string_view::npos) continue;
        absl::string_view key = param.substr(0, eq), value = param.substr(eq + 1);
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
          value = value.substr(1, value.size() - 2);
        }
        // Browsers' and undici's escapes in quoted names: %22 ", %0A and %0D.
        std::string decoded = absl::StrReplaceAll(
            value, {{"%22", "\""}, {"%0A", "\n"}, {"%0D", "\r"}, {"%0a", "\n"}, {"%0d", "\r"}});
        if (absl::EqualsIgnoreCase(key, "name")) name = decoded;
        if (absl::EqualsIgnoreCase(key, "filename")) filename = decoded;
      }
    }
    if (name == "file") {
      if (parts.size() >= kMaxEntries) return Invalid("too many files in one upload");
      parts.push_back({filename.value_or(""), std::string(content)});
    }
    pos = next + 2;
  }
  if (parts.empty()) return Invalid("the upload has no part named file");
  return parts;
}

std::string WrittenFilesJson(const std::vector<std::string>& paths, const FileMetadata& metadata) {
  json list = json::array();
  for (const std::string& p : paths) {
    json file = {{"path", p}, {"name", p.substr(p.rfind('/') + 1)}, {"type", "file"}};
    if (!metadata.empty()) file["metadata"] = MetadataJson(metadata);
    list.push_back(std::move(file));
  }
  return Dump(list);
}

absl::StatusOr<FileMetadata> MetadataFromHeaders(
    const std::vector<std::pair<std::string, std::string>>& headers) {
  static constexpr absl::string_view kPrefix = "x-metadata-";
  FileMetadata out;
  for (const auto& [name, value] : headers) {
    if (!absl::StartsWithIgnoreCase(name, kPrefix)) continue;
    std::string key = absl::AsciiStrToLower(absl::string_view(name).substr(kPrefix.size()));
    if (!ValidMetadataKey(key) || !ValidMetadataValue(value)) {
      return Invalid(absl::StrCat("metadata keys are 1 to ", kMaxMetadataKeyBytes,
                                  " letters, digits or !#$%&'*+-.^_`|~, and values at most ",
                                  kMaxMetadataValueBytes, " printable ASCII characters"));
    }
    if (out.size() == kMaxFileMetadata) {
      return Invalid(absl::StrCat("a file has at most ", kMaxFileMetadata, " metadata entries"));
    }
    out.emplace_back(std::move(key), value);
  }
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i].first == out[i - 1].first) return Invalid("a metadata key is given twice");
  }
  return out;
}

absl::StatusOr<std::string> ResolvePath(absl::string_view path, absl::string_view home) {
  if (path.empty()) return Invalid("the path is empty");
  if (path.find('\0') != absl::string_view::npos) return Invalid("the path has a NUL byte");
  if (path.front() == '/') return std::string(path);
  if (path == "~") return std::string(home);
  absl::ConsumePrefix(&path, "~/");
  return absl::StrCat(home, "/", path);
}

std::optional<std::string> BasicAuthUser(absl::string_view authorization) {
  if (!absl::ConsumePrefix(&authorization, "Basic ")) return std::nullopt;
  std::string decoded;
  if (!absl::Base64Unescape(absl::StripAsciiWhitespace(authorization), &decoded)) {
    return std::nullopt;
  }
  size_t colon = decoded.find(':');
  if (colon == std::string::npos || colon == 0 || decoded.find('\0') != std::string::npos) {
    return std::nullopt;
  }
  return decoded.substr(0, colon);
}

}  // namespace airlock::gateway::e2b
