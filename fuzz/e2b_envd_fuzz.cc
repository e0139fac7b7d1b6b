// Fuzz target: the E2B-compatible envd API's parsers of what reaches the gateway (Connect
// envelopes, the process and filesystem services' JSON messages, /files queries, multipart uploads,
// Basic authorization, paths, StreamInput's client stream). Besides not crashing: what a parse
// accepts is within its caps, an envelope made of what was opened opens to the same message, and
// a client stream's envelopes account for every byte.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "src/gateway/e2b_control.h"
#include "src/gateway/e2b_envd.h"

namespace e2b = airlock::gateway::e2b;

namespace {
void Check(bool ok) {
  if (!ok) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::string> opened = e2b::OpenEnvelope(text);
  if (opened.ok()) Check(e2b::Envelope(*opened) == text);
  const std::string& message = opened.ok() ? *opened : text;
  absl::StatusOr<e2b::StartRequest> start = e2b::ParseStartRequest(message);
  if (start.ok()) {
    Check(!start->process.cmd.empty() && start->process.args.size() <= e2b::kMaxArgs);
    Check(start->pty_rows >= 1 && start->pty_rows <= 10000 && start->pty_cols >= 1 &&
          start->pty_cols <= 10000);
  }
  absl::StatusOr<e2b::Selector> selector = e2b::ParseSelectorRequest(message);
  if (selector.ok()) Check(selector->pid.has_value() || !selector->tag.empty());
  (void)e2b::ParseSendInputRequest(message);
  absl::StatusOr<e2b::SendSignalRequest> signal = e2b::ParseSendSignalRequest(message);
  if (signal.ok()) Check(signal->signal == 9 || signal->signal == 15);
  (void)e2b::ParseUpdateRequest(message);
  absl::StatusOr<std::string> fs_path = e2b::ParsePathRequest(message);
  if (fs_path.ok()) Check(!fs_path->empty());
  absl::StatusOr<e2b::MoveRequest> move = e2b::ParseMoveRequest(message);
  if (move.ok()) Check(!move->source.empty() && !move->destination.empty());
  absl::StatusOr<e2b::ListDirRequest> list = e2b::ParseListDirRequest(message);
  if (list.ok()) Check(list->depth >= 1 && list->depth <= airlock::kMaxFsDepth);
  absl::StatusOr<e2b::WatchRequest> watch = e2b::ParseWatchRequest(message);
  if (watch.ok()) Check(!watch->path.empty());
  absl::StatusOr<std::string> watcher = e2b::ParseWatcherIdRequest(message);
  if (watcher.ok()) Check(!watcher->empty());
  absl::StatusOr<e2b::FilesQuery> query = e2b::ParseFilesQuery(text);
  if (query.ok() && query->path) Check(query->path->size() <= e2b::kMaxFieldBytes);
  // The first line is the Content-Type, the rest the body.
  size_t eol = text.find('\n');
  if (eol != std::string::npos) {
    absl::StatusOr<std::vector<e2b::FilePart>> parts =
        e2b::ParseMultipartFiles(text.substr(0, eol), text.substr(eol + 1));
    if (parts.ok()) Check(!parts->empty() && parts->size() <= e2b::kMaxEntries);
  }
  std::optional<std::string> user = e2b::BasicAuthUser(text);
  if (user) Check(!user->empty() && user->find(':') == std::string::npos);
  absl::StatusOr<std::string> path = e2b::ResolvePath(text, "/root");
  if (path.ok()) Check(!path->empty() && path->front() == '/');
  std::string rpc;
  (void)e2b::EnvdOpOf("POST", text, &rpc);
  // A StreamInput body, given in two pieces: every message within the cap, and no byte left
  // unaccounted (the messages and what is left add up to the input).
  e2b::EnvelopeReader reader;
  size_t consumed = 0;
  for (absl::string_view piece :
       {absl::string_view(text).substr(0, size / 2), absl::string_view(text).substr(size / 2)}) {
    reader.Add(piece);
    for (;;) {
      absl::StatusOr<std::optional<std::string>> next = reader.Next();
      if (!next.ok() || !next->has_value()) break;
      Check((*next)->size() <= e2b::kMaxRpcBytes);
      consumed += 5 + (*next)->size();
      absl::StatusOr<e2b::StreamInputEvent> event = e2b::ParseStreamInputEvent(**next);
      if (event.ok() && event->kind == e2b::StreamInputEvent::Kind::kStart) {
        Check(event->process.pid.has_value() || !event->process.tag.empty());
      }
    }
  }
  Check(consumed <= size && (consumed == size || reader.partial()));
  (void)e2b::ParseStreamInputEvent(message);
  return 0;
}
