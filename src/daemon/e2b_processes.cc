#include "src/daemon/e2b_processes.h"

#include <csignal>

#include "absl/strings/str_cat.h"

namespace airlock {

namespace e2b = gateway::e2b;

struct E2bProcesses::Process {
  uint32_t pid = 0;
  std::string session_id;
  e2b::ProcessInfo info;
  bool pty = false;
  bool stdin = false;

  absl::Mutex mu;
  absl::CondVar cv;
  std::deque<v1::ExecRequest> inputs ABSL_GUARDED_BY(mu);
  bool stdin_closed ABSL_GUARDED_BY(mu) = false;
  bool stopping ABSL_GUARDED_BY(mu) = false;     // airlockd stops: the command is killed
  bool reads_ended ABSL_GUARDED_BY(mu) = false;  // the runner reads no more input
  std::optional<E2bProcessEvent> end ABSL_GUARDED_BY(mu);
  absl::Time ended_at ABSL_GUARDED_BY(mu);
  std::vector<std::shared_ptr<Watcher>> watchers ABSL_GUARDED_BY(mu);

  bool Matches(const e2b::Selector& s) const {
    return s.pid ? *s.pid == pid : (info.tag && *info.tag == s.tag);
  }
  // Hands an event to every watcher, waiting while one is too far behind.
  void Publish(E2bProcessEvent event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (const std::shared_ptr<Watcher>& w : watchers) {
      while (!w->gone && !stopping && w->bytes > kMaxBufferedBytes) cv.Wait(&mu);
      if (w->gone) continue;
      w->bytes += event.data.size();
      w->events.push_back(event);
    }
    cv.SignalAll();
  }
};

namespace {

// How envd (Go's os.ProcessState) describes an exit.
E2bProcessEvent EndOf(const v1::ExitStatus& exit) {
  E2bProcessEvent end{.end = true};
  if (exit.signal() != 0 || exit.timed_out()) {
    int sig = exit.signal() != 0 ? exit.signal() : SIGKILL;
    end.exit_code = -1;
    end.exited = false;
    end.status = sig == SIGKILL   ? "signal: killed"
                 : sig == SIGTERM ? "signal: terminated"
                                  : absl::StrCat("signal: ", sig);
    end.error = exit.timed_out() ? exit.message() : end.status;
    return end;
  }
  end.exit_code = exit.code();
  end.exited = true;
  end.status = absl::StrCat("exit status ", exit.code());
  if (exit.code() != 0) end.error = exit.message().empty() ? end.status : exit.message();
  return end;
}

}  // namespace

// The process's command as ExecRunner's client: input from the API's calls, output to the
// watchers.
class E2bProcesses::Client final : public ExecClient {
 public:
  explicit Client(std::shared_ptr<Process> p) : p_(std::move(p)) {}

  bool Read(v1::ExecRequest* message) override {
    absl::MutexLock lock(&p_->mu);
    while (p_->inputs.empty() && !p_->end && !p_->stopping && !p_->reads_ended) {
      p_->cv.Wait(&p_->mu);
    }
    if (p_->inputs.empty()) return false;
    *message = std::move(p_->inputs.front());
    p_->inputs.pop_front();
    return true;
  }
  bool Write(const v1::ExecResponse& response) override {
    absl::MutexLock lock(&p_->mu);
    switch (response.kind_case()) {
      case v1::ExecResponse::kStdout:
        p_->Publish({.output = p_->pty ? e2b::Output::kPty : e2b::Output::kStdout,
                     .data = response.stdout()});
        break;
      case v1::ExecResponse::kStderr:
        p_->Publish({.output = e2b::Output::kStderr, .data = response.stderr()});
        break;
      case v1::ExecResponse::kExit:
        p_->end = EndOf(response.exit());
        p_->ended_at = absl::Now();
        p_->Publish(*p_->end);
        break;
      default:
        break;
    }
    return true;  // the command runs on without watchers
  }
  bool Cancelled() override {
    absl::MutexLock lock(&p_->mu);
    return p_->stopping;
  }
  void Cancel() override {
    absl::MutexLock lock(&p_->mu);
    p_->reads_ended = true;
    p_->cv.SignalAll();
  }

 private:
  std::shared_ptr<Process> p_;
};

E2bProcesses::Watch::Watch(std::shared_ptr<Process> process, std::shared_ptr<Watcher> watcher)
    : process_(std::move(process)), watcher_(std::move(watcher)) {}

E2bProcesses::Watch::~Watch() {
  absl::MutexLock lock(&process_->mu);
  watcher_->gone = true;
  std::erase(process_->watchers, watcher_);
  process_->cv.SignalAll();
}

uint32_t E2bProcesses::Watch::pid() const { return process_->pid; }

std::optional<E2bProcessEvent> E2bProcesses::Watch::Next(absl::Time deadline) {
  absl::MutexLock lock(&process_->mu);
  while (watcher_->events.empty()) {
    if (process_->cv.WaitWithDeadline(&process_->mu, deadline)) return std::nullopt;
  }
  E2bProcessEvent event = std::move(watcher_->events.front());
  watcher_->events.pop_front();
  watcher_->bytes -= event.data.size();
  process_->cv.SignalAll();
  return event;
}

E2bProcesses::~E2bProcesses() { Stop(); }

void E2bProcesses::Stop() {
  std::map<uint32_t, std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    for (auto& [id, processes] : by_session_) {
      for (const std::shared_ptr<Process>& p : processes) {
        absl::MutexLock plock(&p->mu);
        p->stopping = true;
        p->cv.SignalAll();
      }
    }
    threads.swap(threads_);
    finished_.clear();
  }
  for (auto& [pid, thread] : threads) thread.join();
}

void E2bProcesses::Prune() {
  for (uint32_t pid : finished_) {
    if (auto it = threads_.find(pid); it != threads_.end()) {
      it->second.join();
      threads_.erase(it);
    }
  }
  finished_.clear();
  absl::Time horizon = absl::Now() - kEndedRetention;
  for (auto it = by_session_.begin(); it != by_session_.end();) {
    std::erase_if(it->second, [&](const std::shared_ptr<Process>& p) {
      absl::MutexLock lock(&p->mu);
      return p->end && p->ended_at < horizon;
    });
    it = it->second.empty() ? by_session_.erase(it) : std::next(it);
  }
}

absl::StatusOr<std::unique_ptr<E2bProcesses::Watch>> E2bProcesses::Start(
    const Principal& who, const std::string& session_id, StartSpec spec) {
  v1::ExecStart start;
  start.set_session_id(session_id);
  start.add_argv(spec.request.process.cmd);
  for (const std::string& a : spec.request.process.args) start.add_argv(a);
  for (const std::string& e : spec.env) start.add_env(e);
  start.set_cwd(spec.request.process.cwd.value_or(""));
  start.set_stdin(spec.request.stdin);
  start.set_timeout_seconds(spec.timeout_seconds);
  start.set_user(spec.user);
  if (spec.request.pty) {
    start.set_tty(true);
    start.mutable_window()->set_rows(spec.request.pty_rows);
    start.mutable_window()->set_cols(spec.request.pty_cols);
  }
  if (absl::Status s = ValidateExecStart(start); !s.ok()) return s;

  auto p = std::make_shared<Process>();
  p->session_id = session_id;
  p->info = {.config = spec.request.process, .pid = 0, .tag = spec.request.tag};
  p->pty = spec.request.pty;
  p->stdin = spec.request.stdin;
  auto watcher = std::make_shared<Watcher>();
  {
    absl::MutexLock plock(&p->mu);  // nobody else has it yet
    p->watchers.push_back(watcher);
  }
  absl::MutexLock lock(&mu_);
  if (stopped_) return absl::UnavailableError("airlockd is stopping");
  Prune();
  std::vector<std::shared_ptr<Process>>& mine = by_session_[session_id];
  if (mine.size() >= kMaxPerSession) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this sandbox has ", mine.size(),
                     " processes running or just ended; wait for some to end"));
  }
  p->pid = p->info.pid = next_pid_++;
  mine.push_back(p);
  threads_[p->pid] = std::thread([this, p, who, start] {
    Client client(p);
    absl::Status ran = runner_->Run(who, start, client);
    {
      absl::MutexLock plock(&p->mu);
      if (!p->end) {  // it never started, or airlockd stopped it
        p->end = E2bProcessEvent{
            .end = true,
            .exit_code = -1,
            .exited = false,
            .status = "error",
            .error = ran.ok() ? "the command ended without an exit" : std::string(ran.message())};
        p->ended_at = absl::Now();
        p->Publish(*p->end);
      }
    }
    absl::MutexLock done(&mu_);
    finished_.push_back(p->pid);
  });
  return std::make_unique<Watch>(p, std::move(watcher));
}

absl::StatusOr<std::shared_ptr<E2bProcesses::Process>> E2bProcesses::Find(
    const std::string& session_id, const e2b::Selector& selector) {
  absl::MutexLock lock(&mu_);
  Prune();
  if (auto it = by_session_.find(session_id); it != by_session_.end()) {
    for (const std::shared_ptr<Process>& p : it->second) {
      if (p->Matches(selector)) return p;
    }
  }
  return absl::NotFoundError(
      selector.pid ? absl::StrCat("process with pid ", *selector.pid, " not found")
                   : absl::StrCat("process with tag ", selector.tag.substr(0, 256), " not found"));
}

absl::StatusOr<std::unique_ptr<E2bProcesses::Watch>> E2bProcesses::Connect(
    const std::string& session_id, const e2b::Selector& selector) {
  absl::StatusOr<std::shared_ptr<Process>> p = Find(session_id, selector);
  if (!p.ok()) return p.status();
  auto watcher = std::make_shared<Watcher>();
  absl::MutexLock lock(&(*p)->mu);
  if ((*p)->end) {
    watcher->events.push_back(*(*p)->end);
  } else {
    (*p)->watchers.push_back(watcher);
  }
  return std::make_unique<Watch>(*p, std::move(watcher));
}

std::vector<e2b::ProcessInfo> E2bProcesses::List(const std::string& session_id) {
  std::vector<e2b::ProcessInfo> out;
  absl::MutexLock lock(&mu_);
  Prune();
  if (auto it = by_session_.find(session_id); it != by_session_.end()) {
    for (const std::shared_ptr<Process>& p : it->second) {
      absl::MutexLock plock(&p->mu);
      if (!p->end) out.push_back(p->info);
    }
  }
  return out;
}

absl::Status E2bProcesses::Queue(const std::shared_ptr<Process>& p, v1::ExecRequest message) {
  absl::MutexLock lock(&p->mu);
  if (p->end || p->reads_ended) {
    return absl::NotFoundError(absl::StrCat("process with pid ", p->pid, " has ended"));
  }
  p->inputs.push_back(std::move(message));
  p->cv.SignalAll();
  return absl::OkStatus();
}

absl::Status E2bProcesses::SendInput(const std::string& session_id, const e2b::Selector& selector,
                                     std::string data) {
  absl::StatusOr<std::shared_ptr<Process>> p = Find(session_id, selector);
  if (!p.ok()) return p.status();
  {
    absl::MutexLock lock(&(*p)->mu);
    if (!(*p)->stdin || (*p)->stdin_closed) {
      return absl::FailedPreconditionError(absl::StrCat(
          "process ", (*p)->pid,
          (*p)->stdin ? "'s stdin is closed" : " was started without stdin (start it with stdin)"));
    }
  }
  v1::ExecRequest message;
  message.set_stdin(std::move(data));
  return Queue(*p, std::move(message));
}

absl::Status E2bProcesses::CloseStdin(const std::string& session_id,
                                      const e2b::Selector& selector) {
  absl::StatusOr<std::shared_ptr<Process>> p = Find(session_id, selector);
  if (!p.ok()) return p.status();
  {
    absl::MutexLock lock(&(*p)->mu);
    if (!(*p)->stdin || (*p)->stdin_closed) return absl::OkStatus();
    (*p)->stdin_closed = true;
  }
  v1::ExecRequest message;
  message.set_stdin_eof(true);
  return Queue(*p, std::move(message));
}

absl::Status E2bProcesses::Signal(const std::string& session_id, const e2b::Selector& selector,
                                  int signal) {
  absl::StatusOr<std::shared_ptr<Process>> p = Find(session_id, selector);
  if (!p.ok()) return p.status();
  v1::ExecRequest message;
  message.set_signal(signal);
  return Queue(*p, std::move(message));
}

absl::Status E2bProcesses::Resize(const std::string& session_id, const e2b::Selector& selector,
                                  uint32_t rows, uint32_t cols) {
  absl::StatusOr<std::shared_ptr<Process>> p = Find(session_id, selector);
  if (!p.ok()) return p.status();
  if (!(*p)->pty) {
    return absl::FailedPreconditionError(
        absl::StrCat("process ", (*p)->pid, " has no terminal to resize"));
  }
  v1::ExecRequest message;
  message.mutable_resize()->set_rows(rows);
  message.mutable_resize()->set_cols(cols);
  return Queue(*p, std::move(message));
}

}  // namespace airlock
