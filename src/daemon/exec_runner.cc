#include "src/daemon/exec_runner.h"

#include <signal.h>

#include <atomic>
#include <cmath>
#include <deque>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "src/common/exit_codes.h"
#include "src/common/log.h"
#include "src/daemon/agent_transcripts.h"
#include "src/daemon/airlock_service.h"
#include "src/telemetry/tracer.h"

namespace airlock {
namespace {

// Output is written to the state store in batches: at this size, after kLogBatchAge, or at the
// end. A batch never holds more than kLogBatchBytes: a flood keeps only its newest output (the
// stored log is a bounded ring anyway). A batch that overflowed waits kFloodBatchAge instead:
// a flood stores at most kLogBatchBytes a second, where at kLogBatchAge it stored four times
// that (SQLite's writes, its fsync and the ring's deletes on the thread that streams the
// output, and on the CPU the guest's vCPU needs), only for the ring to drop most of it.
constexpr size_t kLogBatchBytes = 4 * 1024 * 1024;
constexpr int64_t kLogBatchAgeMs = 250;
constexpr int64_t kFloodBatchAgeMs = 1000;
constexpr size_t kMaxArgvBytes = 48 * 1024;

// What the user sees for how a command ended.
v1::ExitStatus ToExitStatus(const ExecEvent& e, const std::string& command) {
  v1::ExitStatus s;
  switch (e.exit_kind) {
    case ExitKind::kExited:
      s.set_code(e.code);
      s.set_message(
          e.message);  // what happened on the way (a process the guest's OOM killer ended)
      break;
    case ExitKind::kSignaled:
      s.set_code(128 + e.code);
      s.set_signal(e.code);
      s.set_message(e.message);
      break;
    case ExitKind::kSpawnFailed:
      if (e.code == ENOENT && e.message.rfind("working directory", 0) != 0) {
        s.set_code(kExitNotFound);
        s.set_message(absl::StrCat(command, ": command not found in the guest"));
      } else if (e.code == EACCES || e.code == ENOEXEC || e.code == ETXTBSY) {
        s.set_code(kExitCannotExecute);
        s.set_message(e.message);
      } else {
        s.set_code(kExitAirlockError);
        s.set_message(e.message);
      }
      break;
    case ExitKind::kFailed:
      s.set_code(kExitAirlockError);
      s.set_message(e.message);
      break;
  }
  return s;
}

// Collects a command's output for the state store and writes it in batches.
class LogBatch {
 public:
  LogBatch(StateStore* store, const SessionRecord& session, int64_t exec_id)
      : store_(store), session_(session), exec_id_(exec_id) {}
  ~LogBatch() { Flush(); }
  void Add(LogStream stream, const std::string& data) {
    int64_t now = NowUnixMs();
    if (pending_.empty()) first_ms_ = now;
    if (!pending_.empty() && pending_.back().stream == stream &&
        pending_.back().data.size() < 65536) {
      pending_.back().data += data;
    } else {
      pending_.push_back({.unix_ms = now, .exec_id = exec_id_, .stream = stream, .data = data});
    }
    bytes_ += data.size();
    while (bytes_ > kLogBatchBytes && pending_.size() > 1) {
      bytes_ -= pending_.front().data.size();
      pending_.pop_front();
      overflowed_ = true;
    }
    Tick();
  }
  // Flushes a batch that has waited long enough (called while the command is quiet, too).
  void Tick() {
    if (!pending_.empty() &&
        NowUnixMs() - first_ms_ >= (overflowed_ ? kFloodBatchAgeMs : kLogBatchAgeMs)) {
      Flush();
    }
  }
  // What waits, taken to be stored by the caller.
  std::vector<LogRecord> Take() {
    std::vector<LogRecord> taken(pending_.begin(), pending_.end());
    pending_.clear();
    bytes_ = 0;
    overflowed_ = false;
    return taken;
  }
  void Flush() {
    if (pending_.empty()) return;
    // Output is best effort, not state: a failure to store it does not fail the command.
    LogIfFailed(store_->commands().AppendOutput(session_, Take()),
                absl::StrCat("session ", session_.id, ": command output not stored"));
  }

 private:
  StateStore* store_;
  const SessionRecord& session_;
  int64_t exec_id_;
  std::deque<LogRecord> pending_;
  size_t bytes_ = 0;
  int64_t first_ms_ = 0;
  bool overflowed_ = false;  // output was dropped from this batch: a flood
};

}  // namespace

// KEY=VALUE lists, later ones overriding earlier ones key by key, in first-seen order.
std::vector<std::string> MergeEnv(const std::vector<std::vector<std::string>>& layers) {
  std::vector<std::string> out;
  std::map<std::string, size_t> at;
  for (const std::vector<std::string>& layer : layers) {
    for (const std::string& kv : layer) {
      std::string key = kv.substr(0, kv.find('='));
      auto it = at.find(key);
      if (it == at.end()) {
        at[key] = out.size();
        out.push_back(kv);
      } else {
        out[it->second] = kv;
      }
    }
  }
  return out;
}

bool ValidTerminalSize(const v1::TerminalSize& size) {
  return size.rows() >= 1 && size.cols() >= 1 && size.rows() <= kMaxTerminalSide &&
         size.cols() <= kMaxTerminalSide;
}

absl::Status ValidateExecStart(const v1::ExecStart& start) {
  if (!start.session_id().empty()) {
    if (absl::Status s = CheckSessionId(start.session_id()); !s.ok()) return s;
  }
  size_t argv_bytes = 0;
  for (const std::string& a : start.argv()) argv_bytes += a.size() + 1;
  for (const std::string& e : start.env()) argv_bytes += e.size() + 1;
  if (argv_bytes > kMaxArgvBytes || !std::isfinite(start.timeout_seconds()) ||
      start.timeout_seconds() < 0) {
    return absl::InvalidArgumentError(
        "ExecStart needs argv and env under 48 KiB together (argv empty: the image's own "
        "Entrypoint/Cmd) and a timeout of zero "
        "or more seconds");
  }
  for (const std::string& e : start.env()) {
    if (e.find('=') == std::string::npos || e[0] == '=') {
      return absl::InvalidArgumentError(
          absl::StrCat("environment entry \"", e.substr(0, 100), "\" is not KEY=VALUE"));
    }
  }
  if (start.user().size() > 256 ||
      start.user().find_first_of(std::string("\0\n", 2)) != std::string::npos) {
    return absl::InvalidArgumentError(
        "user must be NAME or UID, optionally :GROUP or :GID (at most 256 bytes, one line)");
  }
  if (!start.agent().empty() && FindAgent(start.agent()) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("airlockd knows no agent \"",
                                                   start.agent().substr(0, 64), "\" (it knows ",
                                                   KnownAgents(), ")"));
  }
  if (start.detach() && (start.tty() || start.stdin() || start.session_id().empty())) {
    return absl::InvalidArgumentError(
        "a detached command runs in a session (give its id), without input or a terminal "
        "(leave out -i and -t)");
  }
  if (start.has_window() && !start.tty()) {
    return absl::InvalidArgumentError(
        "a window size applies only to a command on a terminal (tty)");
  }
  if (start.has_window() && !ValidTerminalSize(start.window())) {
    return absl::InvalidArgumentError(
        absl::StrCat("a terminal has 1 to ", kMaxTerminalSide, " rows and columns"));
  }
  if (!start.session_id().empty() && (!start.image().empty() || start.has_limits())) {
    return absl::InvalidArgumentError("image and limits apply only to a command without a session");
  }
  if (!start.session_id().empty() && start.secrets_size() > 0) {
    return absl::InvalidArgumentError(
        "secrets given with a command apply only without a session; bind them to a session with "
        "`airlock secret set`");
  }
  if (!start.session_id().empty() && !start.workspace().empty()) {
    return absl::InvalidArgumentError(
        "a workspace given with a command applies only without a session; a session gets its "
        "workspace when it is created (`airlock session create --workspace DIR`)");
  }
  return absl::OkStatus();
}

absl::Status ExecRunner::Run(const Principal& who, const v1::ExecStart& start, ExecClient& client) {
  telemetry::Span span("exec");
  // Without a session, this command gets one of its own for its lifetime (`airlock run`).
  std::string session_id = start.session_id();
  struct OneShot {
    SessionManager* sessions;
    StateStore* store;
    Principal who;
    std::string id;
    ~OneShot() {
      if (id.empty()) return;
      LogIfFailed(sessions->Remove(who, id, "its one command ended"),
                  absl::StrCat("one-shot session ", id, " not removed"));
      LogIfFailed(store->sessions().Delete(who, who.Tenant(), id),
                  absl::StrCat("one-shot session ", id, ": its record not deleted"));
    }
  } one_shot{sessions_, store_, who, ""};
  if (session_id.empty()) {
    SessionLimits limits = FromProto(start.limits());
    limits.ttl_seconds = 0;           // it lives as long as its command
    limits.idle_timeout_seconds = 0;  // and is never paused
    absl::StatusOr<std::vector<EgressGrant>> egress =
        sessions_->ResolveEgress({start.allow().begin(), start.allow().end()},
                                 {start.allow_preset().begin(), start.allow_preset().end()}, "run");
    if (!egress.ok()) return (egress.status());
    absl::StatusOr<std::unique_ptr<PendingWorkspace>> workspace =
        uploads_->TakeFor(who.Tenant(), start.workspace());
    if (!workspace.ok()) return (workspace.status());
    absl::StatusOr<SessionRecord> created =
        sessions_->Create(who, start.image(), limits, *egress, FromProto(start.secrets()),
                          workspace->get(), /*one_shot=*/true, FromProto(start.volumes()));
    if (!created.ok()) return (created.status());
    session_id = one_shot.id = created->id;
  }
  absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(who, session_id);
  if (!live.ok()) return (live.status());
  // The image's config (OCI images) supplies the command when none is given, and the
  // environment and working directory under what the request says.
  const OciRunConfig& image = (*live)->run;
  std::vector<std::string> argv(start.argv().begin(), start.argv().end());
  if (argv.empty()) {
    argv = image.entrypoint;
    argv.insert(argv.end(), image.cmd.begin(), image.cmd.end());
  }
  if (argv.empty()) {
    return (absl::InvalidArgumentError(
        absl::StrCat("no command given, and image ", (*live)->record.image,
                     " names none (no Entrypoint or Cmd); put one after --")));
  }
  ExecRequest request;
  request.argv = argv;
  // The session's secrets as of now (they may have changed since its VM started).
  absl::StatusOr<SessionRecord> current = store_->sessions().Get(who.Tenant(), session_id);
  if (!current.ok()) return (current.status());
  std::vector<std::string> base = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
      absl::StrCat("HOSTNAME=", (*live)->record.hostname)};
  if (start.tty()) base.push_back("TERM=xterm");  // the client says which, normally
  // A traced call hands its trace on to the command (W3C's TRACEPARENT, which the command's
  // own env may override), so that what runs in the guest can join it.
  if (span.recording()) {
    base.push_back("TRACEPARENT=" + telemetry::FormatTraceparent(span.context()));
  }
  request.env = MergeEnv({base,
                          image.env,
                          sessions_->secrets().GuestEnv(current->tenant, current->secrets),
                          {start.env().begin(), start.env().end()}});
  request.cwd = start.cwd().empty() ? image.working_dir : start.cwd();
  // The guest resolves the user in its own /etc/passwd, and sets HOME from it unless given.
  request.user = start.user().empty() ? image.user : start.user();
  request.stdin = start.stdin();
  request.tty = start.tty();
  request.detach = start.detach();
  if (start.has_window()) {
    request.rows = start.window().rows();
    request.cols = start.window().cols();
  }
  ExecRecord record;
  record.argv = argv;
  record.user = request.user;
  record.cwd = request.cwd;
  record.tty = request.tty;
  absl::StatusOr<int64_t> exec_id = store_->commands().Start(who, (*live)->record, record);
  if (!exec_id.ok()) return (exec_id.status());
  request.exec_id = static_cast<uint64_t>(*exec_id);
  absl::StatusOr<std::unique_ptr<ExecStream>> started = (*live)->vm->channel().StartExec(request);
  if (!started.ok()) {
    LogIfFailed(store_->commands().End((*live)->record, *exec_id, kExitAirlockError,
                                       std::string(started.status().message())),
                absl::StrCat("session ", (*live)->record.id, ": the end of command ", *exec_id,
                             " not recorded"));
    return (started.status());
  }
  std::shared_ptr<ExecStream> exec(std::move(*started));
  span.SetAttribute("airlock.session.id", (*live)->record.id);
  span.SetAttribute("airlock.exec.id", *exec_id);
  // Counted and timed from the start in the guest to this call's return.
  struct Timed {
    VmCounters& counters;
    absl::Time started = absl::Now();
    ~Timed() {
      counters.execs++;
      counters.exec_ms.Record(absl::ToDoubleMilliseconds(absl::Now() - started));
    }
  } timed{sessions_->counters()};
  LogBatch logs(store_, (*live)->record, *exec_id);
  // An agent's transcripts are read while it runs, and once more after (Stop, as this call
  // returns; before the session handle goes).
  std::optional<TranscriptCollector> transcripts;
  if (const AgentKind* agent = FindAgent(start.agent()); agent != nullptr) {
    transcripts.emplace(store_, (*live)->record, (*live)->vm->channel().shared_from_this(), *agent,
                        request.user, *exec_id, &(*live)->agent_positions);
  }
  logs.Add(LogStream::kEvent, absl::StrCat("$ ", absl::StrJoin(argv, " ")));

  // Client messages: stdin, its end, signals. A client that goes away takes its command along.
  absl::Mutex mu;
  absl::CondVar cv;
  bool reader_done = false;
  std::atomic<bool> finished{false};
  std::thread reader([&] {
    v1::ExecRequest message;
    bool stdin_open = start.stdin();
    while (client.Read(&message)) {
      if (message.has_stdin() && stdin_open) {
        if (!exec->WriteStdin(message.stdin()).ok()) stdin_open = false;
      } else if (message.has_stdin_eof() && stdin_open) {
        exec->CloseStdin()
            .IgnoreError();  // a channel that failed ends the command, and Next() says so
        stdin_open = false;
      } else if (message.has_signal()) {
        int sig = message.signal();
        if (sig > 0 && sig < NSIG)
          exec->Signal(sig)
              .IgnoreError();  // a channel that failed ends the command, and Next() says so
      } else if (message.has_resize() && start.tty() && ValidTerminalSize(message.resize())) {
        // A bad size is dropped: the terminal keeps its size, the command goes on.
        exec->Resize(message.resize().rows(), message.resize().cols())
            .IgnoreError();  // a channel that failed ends the command, and Next() says so
      }
    }
    if (!finished && client.Cancelled())
      exec->Signal(SIGKILL)
          .IgnoreError();  // a channel that failed ends the command, and Next() says so
    if (stdin_open) exec->CloseStdin().IgnoreError();  // half-close ends stdin too
    absl::MutexLock lock(&mu);
    reader_done = true;
    cv.SignalAll();
  });
  auto finish = [&](const absl::Status& status) {
    finished = true;
    // A guest that never grants window must not hold the reader (and this call) forever.
    exec->Abandon();
    {
      // A well-behaved client half-closes after the exit; do not wait forever for one that won't.
      absl::MutexLock lock(&mu);
      absl::Time until = absl::Now() + absl::Seconds(2);
      while (!reader_done && !cv.WaitWithDeadline(&mu, until)) {
      }
      if (!reader_done) client.Cancel();
    }
    reader.join();
    return status;
  };

  absl::Time deadline = start.timeout_seconds() > 0
                            ? absl::Now() + absl::Seconds(start.timeout_seconds())
                            : absl::InfiniteFuture();
  bool timed_out = false;
  for (;;) {
    if (client.Cancelled()) {
      exec->Signal(SIGKILL)
          .IgnoreError();  // a channel that failed ends the command, and Next() says so
      logs.Add(LogStream::kEvent, "client went away; command killed");
      LogIfFailed(
          store_->commands().End((*live)->record, *exec_id, 128 + SIGKILL, "client went away"),
          absl::StrCat("session ", (*live)->record.id, ": the end of command ", *exec_id,
                       " not recorded"));
      return finish(absl::CancelledError("the client went away; the command was killed"));
    }
    absl::StatusOr<ExecEvent> event =
        exec->Next(std::min(deadline, absl::Now() + absl::Milliseconds(250)));
    // After the start, failures reach the client as the command's end (exit 125 and why), so
    // that it half-closes and the call ends cleanly.
    auto fail = [&](const std::string& why) {
      logs.Add(LogStream::kEvent, why);
      logs.Flush();
      LogIfFailed(store_->commands().End((*live)->record, *exec_id, kExitAirlockError, why),
                  absl::StrCat("session ", (*live)->record.id, ": the end of command ", *exec_id,
                               " not recorded"));
      v1::ExecResponse response;
      response.mutable_exit()->set_code(kExitAirlockError);
      response.mutable_exit()->set_message(why);
      client.Write(response);
      return finish(absl::OkStatus());
    };
    logs.Tick();
    if (!event.ok()) {
      if (!absl::IsDeadlineExceeded(event.status())) {
        return fail(absl::StrCat("the VM failed: ", event.status().message()));
      }
      if (absl::Now() < deadline) continue;
      if (!timed_out) {
        timed_out = true;
        exec->Signal(SIGKILL)
            .IgnoreError();  // a channel that failed ends the command, and Next() says so
        deadline = absl::Now() + absl::Seconds(10);  // for the exit to come back
        continue;
      }
      return fail("the command did not end after it was killed");
    }
    v1::ExecResponse response;
    if (event->type == ExecEvent::Type::kStdout) {
      logs.Add(LogStream::kStdout, event->data);
      response.set_stdout(std::move(event->data));
    } else if (event->type == ExecEvent::Type::kStderr) {
      logs.Add(LogStream::kStderr, event->data);
      response.set_stderr(std::move(event->data));
    } else {
      v1::ExitStatus exit = ToExitStatus(*event, argv[0]);
      if (timed_out) {
        exit.set_code(kExitTimeout);
        exit.set_timed_out(true);
        exit.set_message(
            absl::StrCat("timed out after ", start.timeout_seconds(), "s; the command was killed"));
      }
      // What the command's connections were refused, and what its agent wrote last, are in
      // the log before its exit is reported.
      if ((*live)->egress != nullptr) (*live)->egress->Flush();
      if (transcripts) transcripts->Stop();
      logs.Add(LogStream::kEvent, absl::StrCat("exit ", exit.code(),
                                               exit.message().empty() ? "" : ": ", exit.message()));
      // The end and the output before it in one transaction; output is best effort, so if
      // that fails the end is recorded alone.
      std::vector<LogRecord> last_output = logs.Take();
      absl::Status ended = store_->commands().End((*live)->record, *exec_id, exit.code(),
                                                  exit.message(), last_output);
      if (!ended.ok() && !last_output.empty()) {
        LogIfFailed(ended,
                    absl::StrCat("session ", (*live)->record.id, ": command output not stored"));
        ended = store_->commands().End((*live)->record, *exec_id, exit.code(), exit.message());
      }
      LogIfFailed(ended, absl::StrCat("session ", (*live)->record.id, ": the end of command ",
                                      *exec_id, " not recorded"));
      *response.mutable_exit() = exit;
      client.Write(response);
      return finish(absl::OkStatus());
    }
    if (!client.Write(response)) {
      // The client is gone; the loop sees the cancellation next.
      continue;
    }
  }
}

}  // namespace airlock
