#include "src/daemon/e2b_envd.h"

#include <functional>
#include <optional>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/common/log.h"
#include "src/common/sha256.h"
#include "src/gateway/e2b_control.h"

namespace airlock {

namespace e2b = gateway::e2b;

namespace {

// How long a process stream may go without an event before a keep-alive (the client asks with
// Keepalive-Ping-Interval, in seconds).
constexpr absl::Duration kDefaultKeepAlive = absl::Seconds(50);

void AnswerJson(gateway::GatewayConnection& c, int code, absl::string_view body) {
  c.RespondWith(code, e2b::HttpReason(code), "application/json", body);
}

void RpcError(gateway::GatewayConnection& c, const absl::Status& s) {
  AnswerJson(c, e2b::ConnectHttpStatus(s), e2b::ConnectErrorJson(s));
}

// The head of a streaming answer. Connect's streams answer 200 even when they fail: the
// error is the end-of-stream message (a client takes another status for a broken server).
bool StartStream(gateway::GatewayConnection& c) {
  return c.Write(
      "HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\nCache-Control: "
      "no-store\r\nConnection: close\r\n\r\n");
}

void StreamError(gateway::GatewayConnection& c, const absl::Status& s) {
  if (StartStream(c)) c.Write(e2b::Envelope(e2b::EndOfStreamJson(s), /*end=*/true));
  c.EndWrite();
}

void RestError(gateway::GatewayConnection& c, int code, absl::string_view message) {
  AnswerJson(c, code, e2b::ErrorJson(code, message));
}

// The REST status of a file operation's failure.
int FileErrorCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kOutOfRange:
      return 413;
    case absl::StatusCode::kResourceExhausted:
      return 507;
    case absl::StatusCode::kUnavailable:
      return 502;
    default:
      return 500;
  }
}

// A user name as useradd takes it (so that it makes a home path of its own).
bool ValidUser(absl::string_view user) {
  if (user.empty() || user.size() > 32 || !(absl::ascii_islower(user[0]) || user[0] == '_')) {
    return false;
  }
  for (char c : user) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '_' && c != '-') return false;
  }
  return true;
}

std::string HomeOf(const std::string& user) {
  return user.empty() || user == "root" ? "/root" : "/home/" + user;
}

// How often a stream with nothing to say sends a keep-alive: what the client asks for with
// Keepalive-Ping-Interval (seconds), else kDefaultKeepAlive.
absl::Duration KeepAliveOf(const gateway::GatewayRequest& request) {
  if (const std::string* every = request.Header("keepalive-ping-interval"); every != nullptr) {
    uint32_t seconds = 0;
    if (absl::SimpleAtoi(*every, &seconds) && seconds >= 1 && seconds <= 3600) {
      return absl::Seconds(seconds);
    }
  }
  return kDefaultKeepAlive;
}

bool Live(SessionState s) { return s == SessionState::kRunning || s == SessionState::kPaused; }

}  // namespace

absl::Status SendGuestFile(SessionFiles& files, const Principal& who, const std::string& session_id,
                           const std::string& path, absl::string_view extra_headers,
                           gateway::GatewayConnection& c) {
  bool started = false;
  absl::StatusOr<uint64_t> read =
      files.Read(who, session_id, path, /*max_bytes=*/0, [&](std::string piece) -> absl::Status {
        if (!started) {
          started = true;
          if (!c.Write(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n",
                                    extra_headers, "Connection: close\r\n\r\n"))) {
            return absl::CancelledError("the client went away");
          }
        }
        if (!c.Write(piece)) return absl::CancelledError("the client went away");
        return absl::OkStatus();
      });
  if (started) {
    if (!read.ok()) c.Cut();  // halfway: the client sees the body cut short
    return absl::OkStatus();
  }
  if (!read.ok()) return read.status();
  c.RespondWith(200, "OK", "application/octet-stream", "");  // empty
  return absl::OkStatus();
}

struct E2bEnvd::Call {
  const std::string& id;
  const gateway::GatewayRequest& request;
  gateway::GatewayConnection& connection;
  E2bSandboxRecord sandbox;
  Principal who;
  std::string user;  // the user the call names; empty: the image's
  // Gives the tenant's connection place back; once only, at the latest when the call ends. A
  // stream calls it before it writes its command's end, so that a client that goes on at once
  // finds the place free.
  std::function<void()> give_place = [] {};
};

void E2bEnvd::Serve(const std::string& id, const gateway::GatewayRequest& request,
                    gateway::GatewayConnection& connection) {
  std::string rpc;
  e2b::EnvdOp op = e2b::EnvdOpOf(request.method, request.target, &rpc);
  auto unreachable = [&](const std::string& message) {
    AnswerJson(connection, 502,
               nlohmann::json{{"sandboxId", id}, {"message", message}, {"code", 502}}.dump());
  };
  if (op == e2b::EnvdOp::kUnknown) {
    RestError(connection, 404,
              absl::StrCat("envd serves no ", absl::CHexEscape(request.method), " ",
                           absl::CHexEscape(request.target.substr(
                               0, std::min<size_t>(200, request.target.find('?'))))));
    return;
  }
  absl::StatusOr<std::optional<E2bSandboxRecord>> found = store_->api_keys().FindSandbox(id);
  if (!found.ok()) {
    LogError(absl::StrCat("envd: ", found.status().message()));
    RestError(connection, 503, "airlockd could not read its state; try again");
    return;
  }
  if (!found->has_value()) {
    unreachable(absl::StrCat("sandbox ", id, " was not found"));
    return;
  }
  if ((*found)->is_snapshot()) {  // a template: it is never woken, only forked
    unreachable(absl::StrCat(id, " is a snapshot, not a sandbox: create a sandbox from it"));
    return;
  }
  E2bSandboxRecord& sandbox = **found;
  absl::StatusOr<SessionRecord> session = store_->sessions().Get(sandbox.tenant, id);
  if (!session.ok() || !Live(session->state)) {
    unreachable(absl::StrCat("sandbox ", id, " has ended"));
    return;
  }
  if (op == e2b::EnvdOp::kHealth) {
    if (session->state == SessionState::kPaused) {
      unreachable(absl::StrCat("sandbox ", id, " is paused; connect to it to resume it"));
    } else {
      connection.RespondWith(204, "No Content", "text/plain", "");
    }
    return;
  }
  bool rest = op == e2b::EnvdOp::kFilesRead || op == e2b::EnvdOp::kFilesWrite;
  Call call{.id = id,
            .request = request,
            .connection = connection,
            .sandbox = sandbox,
            .who = PrincipalOfTenant(sandbox.tenant),
            .user = ""};
  // Never the tenant's own (host) privileges: the caller holds a sandbox's token, not the user.
  call.who.api_key = sandbox.api_key.empty() ? "e2b" : sandbox.api_key;

  const std::string* token = request.Header("x-access-token");
  bool admitted = token != nullptr && SecretEquals(*token, sandbox.access_token);
  std::optional<e2b::FilesQuery> query;
  if (rest) {
    absl::StatusOr<e2b::FilesQuery> q = e2b::ParseFilesQuery(request.target);
    if (!q.ok()) {
      RestError(connection, 400, q.status().message());
      return;
    }
    query = *std::move(q);
    if (!admitted && !query->signature.empty() && query->path) {
      bool fresh = !query->signature_expiration ||
                   *query->signature_expiration > absl::ToUnixSeconds(absl::Now());
      std::string expected = e2b::FileSignature(
          *query->path, op == e2b::EnvdOp::kFilesRead ? "read" : "write",
          query->username.value_or(""), sandbox.access_token, query->signature_expiration);
      admitted = fresh && !sandbox.access_token.empty() && SecretEquals(query->signature, expected);
    }
    call.user = query->username.value_or("");
  } else if (const std::string* authorization = request.Header("authorization");
             authorization != nullptr) {
    std::optional<std::string> user = e2b::BasicAuthUser(*authorization);
    if (!user) {
      RpcError(connection, absl::UnauthenticatedError(
                               "Authorization must be Basic with a user name and no password"));
      return;
    }
    call.user = *user;
  }
  if (!admitted) {
    std::string why =
        token == nullptr
            ? "this sandbox's envd needs its access token (X-Access-Token): E2B's SDKs send "
              "the one create and connect return"
            : "the access token is not this sandbox's";
    if (rest) {
      RestError(connection, 401, why);
    } else {
      RpcError(connection, absl::UnauthenticatedError(why));
    }
    return;
  }
  if (!call.user.empty() && !ValidUser(call.user)) {
    std::string why = absl::StrCat("user ", absl::CHexEscape(call.user.substr(0, 64)),
                                   " is not a user name; leave it out for the image's user");
    if (rest) {
      RestError(connection, 401, why);
    } else {
      RpcError(connection, absl::UnauthenticatedError(why));
    }
    return;
  }
  if (absl::Status s = sessions_->TakeConnection(sandbox.tenant); !s.ok()) {
    if (rest) {
      RestError(connection, 429, s.message());
    } else {
      RpcError(connection, s);
    }
    return;
  }
  bool holds_place = true;
  call.give_place = [&] {
    if (std::exchange(holds_place, false)) sessions_->GiveConnection(sandbox.tenant);
  };
  absl::Cleanup give = [&] { call.give_place(); };
  if (op == e2b::EnvdOp::kFilesRead) return ReadFile(call);
  if (op == e2b::EnvdOp::kFilesWrite) return WriteFiles(call);
  ServeRpc(call, op, rpc);
}

void E2bEnvd::ServeRpc(Call& call, e2b::EnvdOp op, const std::string& rpc) {
  gateway::GatewayConnection& c = call.connection;
  if (op == e2b::EnvdOp::kUnimplemented) {
    RpcError(c, absl::UnimplementedError(
                    absl::StrCat(absl::CHexEscape(rpc.substr(0, 200)),
                                 " is not one of the envd RPCs Airlock serves (process.Process and "
                                 "filesystem.Filesystem, as E2B's SDKs call them)")));
    return;
  }
  const std::string* type = call.request.Header("content-type");
  std::string wanted = e2b::IsStreaming(op) ? "application/connect+json" : "application/json";
  if (type == nullptr || !absl::StartsWithIgnoreCase(*type, wanted)) {
    RpcError(c, absl::InvalidArgumentError(absl::StrCat(
                    "Airlock's envd speaks Connect with JSON: send Content-Type ", wanted)));
    return;
  }
  if (op == e2b::EnvdOp::kStreamInput) return StreamInput(call);
  absl::StatusOr<std::string> body = c.ReadBody(call.request, e2b::kMaxRpcBytes + 5);
  if (!body.ok()) {
    RpcError(c, body.status());
    return;
  }
  if (e2b::IsStreaming(op)) {
    absl::StatusOr<std::string> message = e2b::OpenEnvelope(*body);
    if (!message.ok()) {
      StreamError(c, message.status());
      return;
    }
    if (op == e2b::EnvdOp::kWatchDir) return ServeWatch(call, *message);
    return ServeStream(call, op, *message);
  }
  absl::Status done;
  std::string answer = "{}";
  switch (op) {
    case e2b::EnvdOp::kList:
      answer = e2b::ListResponseJson(processes_.List(call.id));
      break;
    case e2b::EnvdOp::kSendInput: {
      absl::StatusOr<e2b::SendInputRequest> r = e2b::ParseSendInputRequest(*body);
      done = r.ok() ? processes_.SendInput(call.id, r->process, std::move(r->data)) : r.status();
      break;
    }
    case e2b::EnvdOp::kSendSignal: {
      absl::StatusOr<e2b::SendSignalRequest> r = e2b::ParseSendSignalRequest(*body);
      done = r.ok() ? processes_.Signal(call.id, r->process, r->signal) : r.status();
      break;
    }
    case e2b::EnvdOp::kCloseStdin: {
      absl::StatusOr<e2b::Selector> r = e2b::ParseSelectorRequest(*body);
      done = r.ok() ? processes_.CloseStdin(call.id, *r) : r.status();
      break;
    }
    case e2b::EnvdOp::kUpdate: {
      absl::StatusOr<e2b::UpdateRequest> r = e2b::ParseUpdateRequest(*body);
      if (!r.ok()) {
        done = r.status();
      } else if (r->pty_rows_cols) {
        done = processes_.Resize(call.id, r->process, r->pty_rows_cols->first,
                                 r->pty_rows_cols->second);
      }
      break;
    }
    default: {
      absl::StatusOr<std::string> json = FilesystemCall(call, op, *body);
      if (json.ok()) answer = *std::move(json);
      done = json.status();
    }
  }
  if (!done.ok()) {
    RpcError(c, done);
    return;
  }
  AnswerJson(c, 200, answer);
}

void E2bEnvd::ServeStream(Call& call, e2b::EnvdOp op, const std::string& message) {
  gateway::GatewayConnection& c = call.connection;
  absl::StatusOr<std::unique_ptr<E2bProcesses::Watch>> watch;
  if (op == e2b::EnvdOp::kStart) {
    absl::StatusOr<e2b::StartRequest> request = e2b::ParseStartRequest(message);
    if (!request.ok()) {
      StreamError(c, request.status());
      return;
    }
    E2bProcesses::StartSpec spec{.request = *std::move(request), .user = call.user};
    for (const auto& [key, value] : call.sandbox.env_vars) {
      spec.env.push_back(absl::StrCat(key, "=", value));
    }
    for (const auto& [key, value] : spec.request.process.envs) {
      spec.env.push_back(absl::StrCat(key, "=", value));
    }
    std::string home = HomeOf(call.user);
    absl::StatusOr<std::string> cwd =
        e2b::ResolvePath(spec.request.process.cwd.value_or(home), home);
    if (!cwd.ok()) {
      StreamError(c, cwd.status());
      return;
    }
    spec.request.process.cwd = *cwd;
    // Connect-Timeout-Ms: the command's lifetime, as envd takes it.
    if (const std::string* ms = call.request.Header("connect-timeout-ms"); ms != nullptr) {
      uint64_t n = 0;
      if (absl::SimpleAtoi(*ms, &n) && n > 0) spec.timeout_seconds = static_cast<double>(n) / 1000;
    }
    watch = processes_.Start(call.who, call.id, std::move(spec));
  } else {
    absl::StatusOr<e2b::Selector> selector = e2b::ParseSelectorRequest(message);
    watch = selector.ok() ? processes_.Connect(call.id, *selector)
                          : absl::StatusOr<std::unique_ptr<E2bProcesses::Watch>>(selector.status());
  }
  if (!watch.ok()) {
    StreamError(c, watch.status());
    return;
  }
  absl::Duration keepalive = KeepAliveOf(call.request);
  if (!StartStream(c) || !c.Write(e2b::Envelope(e2b::StartEventJson((*watch)->pid())))) {
    return;  // the client is gone; the process goes on
  }
  for (;;) {
    std::optional<E2bProcessEvent> event = (*watch)->Next(absl::Now() + keepalive);
    std::string json = !event       ? e2b::KeepAliveEventJson()
                       : event->end ? e2b::EndEventJson(event->exit_code, event->exited,
                                                        event->status, event->error)
                                    : e2b::DataEventJson(event->output, event->data);
    if (event && event->end) call.give_place();
    if (!c.Write(e2b::Envelope(json))) return;
    if (event && event->end) break;
  }
  c.Write(e2b::Envelope(e2b::EndOfStreamJson(absl::OkStatus()), /*end=*/true));
  c.EndWrite();
}

absl::StatusOr<std::string> E2bEnvd::FilesystemCall(Call& call, e2b::EnvdOp op,
                                                    const std::string& body) {
  std::string home = HomeOf(call.user);
  FsRequestMessage request{.user = call.user};
  switch (op) {
    case e2b::EnvdOp::kStat:
    case e2b::EnvdOp::kMakeDir:
    case e2b::EnvdOp::kRemove: {
      absl::StatusOr<std::string> path = e2b::ParsePathRequest(body);
      if (!path.ok()) return path.status();
      request.op = op == e2b::EnvdOp::kStat      ? FsOp::kStat
                   : op == e2b::EnvdOp::kMakeDir ? FsOp::kMakeDir
                                                 : FsOp::kRemove;
      absl::StatusOr<std::string> resolved = e2b::ResolvePath(*path, home);
      if (!resolved.ok()) return resolved.status();
      request.path = *std::move(resolved);
      break;
    }
    case e2b::EnvdOp::kMove: {
      absl::StatusOr<e2b::MoveRequest> move = e2b::ParseMoveRequest(body);
      if (!move.ok()) return move.status();
      absl::StatusOr<std::string> source = e2b::ResolvePath(move->source, home);
      if (!source.ok()) return source.status();
      absl::StatusOr<std::string> destination = e2b::ResolvePath(move->destination, home);
      if (!destination.ok()) return destination.status();
      request.op = FsOp::kMove;
      request.path = *std::move(source);
      request.target = *std::move(destination);
      break;
    }
    case e2b::EnvdOp::kListDir: {
      absl::StatusOr<e2b::ListDirRequest> list = e2b::ParseListDirRequest(body);
      if (!list.ok()) return list.status();
      absl::StatusOr<std::string> path = e2b::ResolvePath(list->path, home);
      if (!path.ok()) return path.status();
      request.op = FsOp::kList;
      request.path = *std::move(path);
      request.depth = list->depth;
      break;
    }
    case e2b::EnvdOp::kCreateWatcher: {
      absl::StatusOr<e2b::WatchRequest> watch = e2b::ParseWatchRequest(body);
      if (!watch.ok()) return watch.status();
      absl::StatusOr<std::string> path = e2b::ResolvePath(watch->path, home);
      if (!path.ok()) return path.status();
      absl::StatusOr<std::string> id = watchers_.Create(
          call.who, call.id,
          WatchDirMessage{.user = call.user,
                          .path = *path,
                          .flags = (watch->recursive ? kWatchRecursive : 0) |
                                   (watch->include_entry ? kWatchIncludeEntry : 0)});
      if (!id.ok()) return id.status();
      return e2b::CreateWatcherResponseJson(*id);
    }
    case e2b::EnvdOp::kGetWatcherEvents:
    case e2b::EnvdOp::kRemoveWatcher: {
      absl::StatusOr<std::string> id = e2b::ParseWatcherIdRequest(body);
      if (!id.ok()) return id.status();
      if (op == e2b::EnvdOp::kRemoveWatcher) {
        absl::Status removed = watchers_.Remove(call.id, *id);
        if (!removed.ok()) return removed;
        return std::string("{}");
      }
      absl::StatusOr<std::vector<WatchRecord>> events = watchers_.Events(call.id, *id);
      if (!events.ok()) return events.status();
      return e2b::WatcherEventsResponseJson(*events);
    }
    default:
      return absl::InternalError("not a unary call");
  }
  absl::StatusOr<std::vector<FsEntry>> entries = files_.Operate(call.who, call.id, request);
  if (!entries.ok()) return entries.status();
  if (request.op == FsOp::kList) return e2b::ListDirResponseJson(*entries);
  if (request.op == FsOp::kRemove) return std::string("{}");
  if (entries->size() != 1) return absl::InternalError("the guest answered no entry");
  return e2b::EntryResponseJson(entries->front());
}

void E2bEnvd::ServeWatch(Call& call, const std::string& message) {
  gateway::GatewayConnection& c = call.connection;
  absl::StatusOr<e2b::WatchRequest> request = e2b::ParseWatchRequest(message);
  if (!request.ok()) return StreamError(c, request.status());
  absl::StatusOr<std::string> path = e2b::ResolvePath(request->path, HomeOf(call.user));
  if (!path.ok()) return StreamError(c, path.status());
  absl::StatusOr<std::unique_ptr<SessionWatch>> watch =
      files_.Watch(call.who, call.id,
                   WatchDirMessage{.user = call.user,
                                   .path = *path,
                                   .flags = (request->recursive ? kWatchRecursive : 0) |
                                            (request->include_entry ? kWatchIncludeEntry : 0)});
  if (!watch.ok()) return StreamError(c, watch.status());
  std::vector<WatchRecord> records;
  if (absl::Status s = E2bWatchers::AwaitStart(**watch, &records); !s.ok()) {
    return StreamError(c, s);
  }
  absl::Duration keepalive = KeepAliveOf(call.request);
  if (!StartStream(c) || !c.Write(e2b::Envelope(e2b::WatchStartEventJson()))) {
    return;  // the client is gone; so is the watch
  }
  absl::Status end;
  for (;;) {
    std::string out;
    for (const WatchRecord& r : records) {
      if (r.kind != WatchEventKind::kStarted) out += e2b::Envelope(e2b::WatchEventJson(r));
    }
    if (!out.empty() && !c.Write(out)) return;
    absl::StatusOr<std::vector<WatchRecord>> next = (*watch)->Next(absl::Now() + keepalive);
    if (absl::IsDeadlineExceeded(next.status())) {
      if (!c.Write(e2b::Envelope(e2b::WatchKeepAliveEventJson()))) return;
      records.clear();
      continue;
    }
    if (!next.ok()) {
      // The directory went away (its removal is the last event the client saw), or the guest
      // lost events: the stream ends, saying why unless it is the former.
      if (!absl::IsOutOfRange(next.status())) end = next.status();
      break;
    }
    records = *std::move(next);
  }
  c.Write(e2b::Envelope(e2b::EndOfStreamJson(end), /*end=*/true));
  c.EndWrite();
}

void E2bEnvd::StreamInput(Call& call) {
  gateway::GatewayConnection& c = call.connection;
  gateway::BodyReader body(c, call.request);
  e2b::EnvelopeReader envelopes;
  std::optional<e2b::Selector> process;
  absl::Status status;
  // Each message as it arrives: the input goes to the process at once, not at the stream's end.
  for (bool more = true; more && status.ok();) {
    absl::StatusOr<std::optional<std::string>> piece = body.Next();
    if (!piece.ok()) {
      status = piece.status();
      break;
    }
    if (!piece->has_value()) {
      if (envelopes.partial()) status = absl::InvalidArgumentError("the stream ended mid-message");
      break;
    }
    envelopes.Add(**piece);
    while (status.ok()) {
      absl::StatusOr<std::optional<std::string>> message = envelopes.Next();
      if (!message.ok() || !message->has_value()) {
        status = message.status();
        break;
      }
      absl::StatusOr<e2b::StreamInputEvent> event = e2b::ParseStreamInputEvent(**message);
      if (!event.ok()) {
        status = event.status();
      } else if (event->kind == e2b::StreamInputEvent::Kind::kStart) {
        if (process) status = absl::InvalidArgumentError("a StreamInput starts once");
        process = event->process;
      } else if (event->kind == e2b::StreamInputEvent::Kind::kData) {
        if (!process) {
          status = absl::InvalidArgumentError(
              "a StreamInput begins with start, naming the process its input goes to");
        } else if (!event->data.empty()) {
          status = processes_.SendInput(call.id, *process, std::move(event->data));
        }
      }
    }
  }
  if (status.ok() && !process) {
    status = absl::InvalidArgumentError(
        "a StreamInput begins with start, naming the process its input goes to");
  }
  if (!status.ok()) return StreamError(c, status);
  if (StartStream(c)) {
    c.Write(e2b::Envelope("{}"));
    c.Write(e2b::Envelope(e2b::EndOfStreamJson(absl::OkStatus()), /*end=*/true));
  }
  c.EndWrite();
}

void E2bEnvd::ReadFile(Call& call) {
  gateway::GatewayConnection& c = call.connection;
  absl::StatusOr<e2b::FilesQuery> query = e2b::ParseFilesQuery(call.request.target);
  if (!query.ok() || !query->path) {
    RestError(c, 400, "give the file's path: /files?path=PATH");
    return;
  }
  absl::StatusOr<std::string> path = e2b::ResolvePath(*query->path, HomeOf(call.user));
  if (!path.ok()) {
    RestError(c, 400, path.status().message());
    return;
  }
  std::string name = path->substr(path->rfind('/') + 1);
  std::erase_if(name, [](char ch) { return ch == '"' || ch == '\\' || ch < 0x20 || ch == 0x7f; });
  absl::Status sent =
      SendGuestFile(files_, call.who, call.id, *path,
                    absl::StrCat("Content-Disposition: inline; filename=\"", name, "\"\r\n"), c);
  if (!sent.ok()) RestError(c, FileErrorCode(sent), sent.message());
}

void E2bEnvd::WriteFiles(Call& call) {
  gateway::GatewayConnection& c = call.connection;
  absl::StatusOr<e2b::FilesQuery> query = e2b::ParseFilesQuery(call.request.target);
  if (!query.ok()) {
    RestError(c, 400, query.status().message());
    return;
  }
  if (const std::string* coding = call.request.Header("content-encoding");
      coding != nullptr && !absl::EqualsIgnoreCase(*coding, "identity")) {
    RestError(c, 400, "Airlock's envd takes uploads uncompressed: leave gzip out of files.write");
    return;
  }
  if (uploads_.fetch_add(1) >= kMaxUploadsAtOnce) {
    uploads_--;
    RestError(c, 429, "airlockd is taking in too many uploads at once; try again in a moment");
    return;
  }
  absl::Cleanup done = [&] { uploads_--; };
  absl::StatusOr<std::string> body = c.ReadBody(call.request, kMaxUploadBytes);
  if (!body.ok()) {
    int code = absl::IsOutOfRange(body.status()) ? 413 : 400;
    RestError(c, code,
              absl::IsOutOfRange(body.status())
                  ? absl::StrCat("an upload is at most ", kMaxUploadBytes >> 20,
                                 " MiB: write larger files in parts, or with `airlock cp`")
                  : std::string(body.status().message()));
    return;
  }
  // Metadata (X-Metadata-KEY: VALUE) goes on every file written, as user.e2b.KEY attributes.
  absl::StatusOr<FileMetadata> metadata = e2b::MetadataFromHeaders(call.request.headers);
  if (!metadata.ok()) {
    RestError(c, 400, metadata.status().message());
    return;
  }
  std::vector<e2b::FilePart> parts;
  const std::string* type = call.request.Header("content-type");
  if (type != nullptr && absl::StartsWithIgnoreCase(*type, "multipart/")) {
    absl::StatusOr<std::vector<e2b::FilePart>> parsed = e2b::ParseMultipartFiles(*type, *body);
    if (!parsed.ok()) {
      RestError(c, 400, parsed.status().message());
      return;
    }
    parts = *std::move(parsed);
    if (parts.size() == 1 && query->path) parts[0].filename = *query->path;
  } else {
    if (!query->path) {
      RestError(c, 400, "give the file's path: /files?path=PATH");
      return;
    }
    parts.push_back({*query->path, *std::move(body)});
  }
  std::string home = HomeOf(call.user);
  std::vector<std::string> written;
  for (e2b::FilePart& part : parts) {
    absl::StatusOr<std::string> path = e2b::ResolvePath(part.filename, home);
    if (!path.ok()) {
      RestError(c, 400, absl::StrCat("a file's path: ", path.status().message()));
      return;
    }
    size_t at = 0;
    absl::StatusOr<uint64_t> wrote = files_.Write(
        call.who, call.id, *path, 0644,
        [&](std::string* piece, bool* last) {
          size_t n = std::min(kMaxFilePiece, part.content.size() - at);
          piece->assign(part.content, at, n);
          at += n;
          *last = at == part.content.size();
          return absl::OkStatus();
        },
        *metadata);
    if (!wrote.ok()) {
      RestError(c, FileErrorCode(wrote.status()), wrote.status().message());
      return;
    }
    written.push_back(*path);
  }
  AnswerJson(c, 200, e2b::WrittenFilesJson(written, *metadata));
}

}  // namespace airlock
