#include "src/testing/fake_vm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <optional>
#include <span>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "src/common/channel_messages.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"

extern char** environ;

namespace airlock {

namespace {

constexpr char kStateMagic[] = "airlock-fake-vm-state 1\n";
constexpr char kRamMagic[] = "airlock-fake-vm-ram 1\n";
constexpr char kRecordFile[] = "fake-vm";
// What a fake guest may hold in files, all together: a test's, never a guest-sized amount.
constexpr size_t kMaxRamBytes = 16 << 20;

// The guest's memory: everything a restore brings back.
struct Ram {
  std::map<std::string, std::string> files;
  std::string hostname;
  uint32_t boots = 0;
  uint32_t restores = 0;
  uint32_t max_stream_seen = 0;
  bool paused = false;  // answered kPause; silent until the next kSync

  size_t bytes() const {
    size_t n = 0;
    for (const auto& [path, data] : files) n += path.size() + data.size();
    return n;
  }
  std::string Encode() const {
    PayloadWriter w;
    w.U32(boots).U32(restores).U32(max_stream_seen).U32(paused ? 1 : 0).Str(hostname);
    w.U32(static_cast<uint32_t>(files.size()));
    for (const auto& [path, data] : files) w.Str(path).Str(data);
    return w.bytes();
  }
  static absl::StatusOr<Ram> Decode(std::string_view in) {
    Ram ram;
    PayloadReader r(in);
    uint32_t paused = 0, count = 0;
    if (!(r.U32(&ram.boots) && r.U32(&ram.restores) && r.U32(&ram.max_stream_seen) &&
          r.U32(&paused) && r.Str(&ram.hostname) && r.U32(&count))) {
      return absl::DataLossError("the fake guest's saved memory is malformed");
    }
    for (uint32_t i = 0; i < count; ++i) {
      std::string path, data;
      if (!r.Str(&path) || !r.Str(&data)) {
        return absl::DataLossError("the fake guest's saved files are malformed");
      }
      ram.files[path] = std::move(data);
    }
    if (!r.AtEnd()) return absl::DataLossError("the fake guest's saved memory has extra bytes");
    ram.paused = paused != 0;
    return ram;
  }
};

std::string U64Bytes(uint64_t v) { return PayloadWriter().U64(v).bytes(); }

absl::StatusOr<std::string> ReadFd(int fd, size_t cap) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read a fake VM's saved state");
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > cap) return absl::DataLossError("a fake VM's saved state is too large");
  }
}

// The RAM a guest keeps in a memory file: its magic, its length and its bytes, at offset 0.
absl::StatusOr<Ram> ReadRamFile(int fd) {
  std::string head(sizeof(kRamMagic) - 1 + 8, '\0');
  if (pread(fd, head.data(), head.size(), 0) != static_cast<ssize_t>(head.size()) ||
      head.compare(0, sizeof(kRamMagic) - 1, kRamMagic) != 0) {
    return absl::DataLossError("the memory file holds no fake guest's memory");
  }
  uint64_t size = 0;
  PayloadReader r(std::string_view(head).substr(sizeof(kRamMagic) - 1));
  if (!r.U64(&size) || size > 2 * kMaxRamBytes) {
    return absl::DataLossError("the fake guest's memory file is malformed");
  }
  std::string ram(size, '\0');
  if (pread(fd, ram.data(), size, static_cast<off_t>(head.size())) != static_cast<ssize_t>(size)) {
    return absl::DataLossError("the fake guest's memory file is short");
  }
  return Ram::Decode(ram);
}

// One stream the host opened, with what the guest is yet to send on it.
struct Stream {
  FrameType kind = FrameType::kExecStart;
  std::vector<std::string> argv;
  std::string path;
  bool wants_input = false;
  std::string input;
  uint64_t sendable = kInitialWindow;
  std::deque<std::pair<FrameType, std::string>> out;  // data frames, then the exit last
  bool finished = false;                              // its exit is queued
};

}  // namespace

// The fake VM's machine: its process, its guest's memory and the agent serving its channel.
// Outlives the Vm handle of a detached VM.
class FakeVmCore {
 public:
  FakeVmCore(const VmConfig& config, Ram ram, bool restored) : ram_(std::move(ram)) {
    runtime_dir_ = config.runtime_dir;
    sync_ = {.pids_max = config.guest_pids_max,
             .hostname = config.hostname,
             .restored = restored,
             .mount_workspace = config.mount_workspace};
    stopped_ = config.hold;
  }
  ~FakeVmCore() { End(absl::CancelledError("the fake VM was destroyed")); }

  absl::Status Launch(const VmConfig& config) {
    if (config.session_disk_fd >= 0) {
      disk_.reset(fcntl(config.session_disk_fd, F_DUPFD_CLOEXEC, 0));
      if (!disk_.valid()) return ErrnoStatus("dup the session disk");
    }
    if (config.memory_fd >= 0 && config.memory_shared) {
      // Opened again read-write, as QEMU does (a resumed session's memory file is handed over
      // read-only).
      memory_.reset(
          open(absl::StrCat("/proc/self/fd/", config.memory_fd).c_str(), O_RDWR | O_CLOEXEC));
      if (!memory_.valid()) return ErrnoStatus("open the guest memory");
    }
    if (!runtime_dir_.empty()) {
      if (absl::Status s = MakeDirectories(runtime_dir_, 0700); !s.ok()) return s;
      if (absl::Status s =
              WriteFileAtomically(absl::StrCat(runtime_dir_, "/", kRecordFile), "fake vm\n", 0600);
          !s.ok()) {
        return s;
      }
    }
    const char* argv[] = {"sleep", "infinity", nullptr};
    int err = posix_spawn(&pid_, "/bin/sleep", nullptr, nullptr, const_cast<char**>(argv), environ);
    if (err != 0) return ErrnoStatus("start the fake VM's process", "/bin/sleep", err);
    pidfd_.reset(static_cast<int>(syscall(SYS_pidfd_open, pid_, 0)));
    if (!pidfd_.valid()) return ErrnoStatus("pidfd_open");
    return absl::OkStatus();
  }

  // A new connection to the agent (boot, or a host that reattaches): the agent serves guest_fd
  // from now on, and says hello first unless the guest was restored and waits for a sync.
  void Connect(UniqueFd guest_fd, bool hello) {
    Disconnect();
    absl::MutexLock lock(&mu_);
    if (hello) {
      ram_.paused = false;
      stopped_ = false;
      streams_.clear();
    }
    guest_fd_ = std::move(guest_fd);
    int fd = guest_fd_.get();
    thread_ = std::thread([this, fd, hello] { Serve(fd, hello); });
  }

  void Disconnect() {
    std::thread old;
    {
      absl::MutexLock lock(&mu_);
      if (guest_fd_.valid()) shutdown(guest_fd_.get(), SHUT_RDWR);
      old = std::move(thread_);
    }
    if (old.joinable()) old.join();
    absl::MutexLock lock(&mu_);
    guest_fd_.reset();
  }

  // Kills the process (if it runs) and ends the agent.
  void End(const absl::Status& reason) {
    {
      absl::MutexLock lock(&proc_mu_);
      if (pid_ > 0 && !exit_reason_) {
        kill(pid_, SIGKILL);
        Reap(0);
      }
    }
    Disconnect();
  }

  std::optional<std::string> ExitReason() {
    absl::MutexLock lock(&proc_mu_);
    if (pid_ > 0 && !exit_reason_) Reap(WNOHANG);
    return exit_reason_;
  }

  absl::Status SaveState(int state_fd) {
    if (std::optional<std::string> gone = ExitReason()) {
      return absl::UnavailableError("the fake VM is gone: " + *gone);
    }
    absl::MutexLock lock(&mu_);
    if (!ram_.paused) {
      return absl::FailedPreconditionError(
          "the fake guest was not quiesced (kPause) before its state was saved");
    }
    stopped_ = true;
    std::string ram = ram_.Encode();
    std::string state = kStateMagic;
    if (memory_.valid()) {
      std::string file = absl::StrCat(kRamMagic, U64Bytes(ram.size()), ram);
      struct stat st;
      if (fstat(memory_.get(), &st) != 0) return ErrnoStatus("stat the guest memory");
      if (file.size() > static_cast<uint64_t>(st.st_size)) {
        return absl::ResourceExhaustedError("the fake guest's files outgrew its memory");
      }
      if (pwrite(memory_.get(), file.data(), file.size(), 0) != static_cast<ssize_t>(file.size())) {
        return ErrnoStatus("write the guest memory");
      }
      state += "apart\n";
    } else {
      state += absl::StrCat("inside\n", U64Bytes(ram.size()), ram);
    }
    return WriteAll(state_fd, state);
  }

  void Continue() {
    absl::MutexLock lock(&mu_);
    stopped_ = false;
  }

  pid_t pid() const { return pid_; }
  int memory_fd() const { return memory_.valid() ? memory_.get() : -1; }
  int disk_fd() const { return disk_.get(); }
  const std::string& runtime_dir() const { return runtime_dir_; }
  void set_runtime_dir(std::string dir) { runtime_dir_ = std::move(dir); }
  GuestSync& sync() { return sync_; }
  std::string last_event() {
    absl::MutexLock lock(&mu_);
    return last_event_;
  }

 private:
  void Reap(int flags) ABSL_EXCLUSIVE_LOCKS_REQUIRED(proc_mu_) {
    int status = 0;
    pid_t r;
    do {
      r = waitpid(pid_, &status, flags);
    } while (r < 0 && errno == EINTR);
    if (r != pid_) return;
    exit_reason_ = WIFSIGNALED(status) ? absl::StrCat("killed by signal ", WTERMSIG(status))
                                       : absl::StrCat("exited with status ", WEXITSTATUS(status));
  }

  // The agent: reads the host's frames until the connection or the process ends.
  void Serve(int fd, bool hello) {
    if (hello) {
      absl::MutexLock lock(&mu_);
      Send(fd, FrameType::kHello, 0, EncodeHello("fake"));
    }
    FrameParser parser;
    std::vector<uint8_t> buf(1 << 16);
    for (;;) {
      pollfd fds[2] = {{fd, POLLIN, 0}, {pidfd_.get(), POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (fds[1].revents != 0) break;  // the VM process died: its port closes
      ssize_t n = read(fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      std::span<const uint8_t> in(buf.data(), static_cast<size_t>(n));
      while (!in.empty()) {
        Frame frame;
        FrameParser::Result r = parser.Next(&in, &frame);
        if (r == FrameParser::Result::kError) {
          absl::MutexLock lock(&mu_);
          last_event_ = "the host sent a malformed frame: " + parser.error();
          shutdown(fd, SHUT_RDWR);
          return;
        }
        if (r == FrameParser::Result::kNeedMore) break;
        absl::MutexLock lock(&mu_);
        Handle(fd, frame);
      }
    }
    shutdown(fd, SHUT_RDWR);
  }

  // A host that went away loses what was sent (no SIGPIPE: MSG_NOSIGNAL).
  template <typename Message>
  void SendMessage(int fd, uint32_t stream, const Message& m) {
    Send(fd, Message::kType, stream, EncodePayload(m));
  }
  void Send(int fd, FrameType type, uint32_t stream, std::string_view payload) {
    std::string frame = EncodeFrame(type, stream, payload);
    for (size_t at = 0; at < frame.size();) {
      ssize_t n = send(fd, frame.data() + at, frame.size() - at, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      at += static_cast<size_t>(n);
    }
  }

  void Handle(int fd, const Frame& frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stopped_) return;  // a stopped guest reads nothing (the host never sends then)
    auto it = streams_.find(frame.stream);
    switch (frame.type) {
      case FrameType::kSync: {
        SyncMessage sync;
        if (!DecodePayload(frame.payload, &sync)) {
          SendMessage(fd, 0, ProtocolErrorMessage{"malformed sync"});
          return;
        }
        if (!sync.hostname.empty()) ram_.hostname = sync.hostname;
        ram_.paused = false;
        SendMessage(fd, 0, ReadyMessage{.highest_stream = ram_.max_stream_seen});
        for (auto it = streams_.begin(); it != streams_.end();) Pump(fd, it++);
        return;
      }
      case FrameType::kPause:
        Send(fd, FrameType::kPaused, 0, "");
        ram_.paused = true;
        return;
      case FrameType::kExecStart:
      case FrameType::kFileWrite:
      case FrameType::kFileRead:
      case FrameType::kMetricsRequest:
      case FrameType::kTailFiles:
      case FrameType::kFsRequest:
      case FrameType::kWatchDir:
        Open(fd, frame);
        return;
      case FrameType::kInput:
        if (it == streams_.end()) return;
        it->second.input += frame.payload;
        if (it->second.input.size() > kMaxRamBytes) {
          Finish(it->second, ExitKind::kFailed, ENOSPC, "the fake guest's memory is full");
        } else if (!ram_.paused && !frame.payload.empty()) {
          SendMessage(fd, frame.stream,
                      WindowMessage{.bytes = static_cast<uint32_t>(frame.payload.size())});
        }
        break;
      case FrameType::kInputEnd:
        if (it == streams_.end()) return;
        it->second.wants_input = false;
        Run(it->second);
        break;
      case FrameType::kSignal: {
        if (it == streams_.end() || it->second.finished) return;
        SignalMessage signal;
        if (!DecodePayload(frame.payload, &signal)) {
          SendMessage(fd, 0, ProtocolErrorMessage{"malformed signal request"});
          return;
        }
        if (it->second.kind == FrameType::kExecStart) {
          Finish(it->second, ExitKind::kSignaled, signal.signal, "");
        } else {
          Finish(it->second, ExitKind::kFailed, ECANCELED, "cancelled by the host");
        }
        break;
      }
      case FrameType::kWindow: {
        WindowMessage window;
        if (it == streams_.end() || !DecodePayload(frame.payload, &window)) return;
        it->second.sendable += window.bytes;
        break;
      }
      default:
        return;  // policies, resizes and egress frames: this guest opens no connections
    }
    if (it != streams_.end()) {
      Pump(fd, it);
    }
  }

  void Open(int fd, const Frame& frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (frame.stream == 0 || streams_.count(frame.stream) != 0) {
      SendMessage(fd, 0, ProtocolErrorMessage{"stream reused"});
      return;
    }
    ram_.max_stream_seen = std::max(ram_.max_stream_seen, frame.stream);
    if (frame.type == FrameType::kMetricsRequest) {
      SendMessage(fd, frame.stream, GuestMetrics{});
      return;
    }
    Stream s;
    s.kind = frame.type;
    bool ok = false;
    if (frame.type == FrameType::kExecStart) {
      ExecStartMessage exec;
      ok = DecodePayload(frame.payload, &exec);
      s.argv = std::move(exec.argv);
      s.wants_input = (exec.flags & kExecFlagStdin) != 0;
    } else if (frame.type == FrameType::kFileWrite) {
      FileWriteMessage write;
      ok = DecodePayload(frame.payload, &write);
      s.path = std::move(write.path);
      s.wants_input = true;
    } else if (frame.type == FrameType::kFileRead) {
      FileReadMessage read;
      ok = DecodePayload(frame.payload, &read);
      s.path = std::move(read.path);
    } else if (frame.type == FrameType::kTailFiles) {
      TailFilesMessage tail;
      ok = DecodePayload(frame.payload, &tail);
    } else {
      // Directory operations and watches: this guest's files are a flat map, so it says so
      // rather than leave the host waiting.
      auto [it, added] = streams_.emplace(frame.stream, std::move(s));
      Finish(it->second, ExitKind::kFailed, ENOSYS, "the fake guest has no directories");
      Pump(fd, it);
      return;
    }
    auto [it, added] = streams_.emplace(frame.stream, std::move(s));
    if (!ok) {
      it->second.wants_input = false;
      Finish(it->second,
             frame.type == FrameType::kExecStart ? ExitKind::kSpawnFailed : ExitKind::kFailed,
             EINVAL, "malformed request");
    }
    if (!it->second.wants_input) Run(it->second);
    Pump(fd, it);
  }

  // Does what the stream asks, once its input (if any) is in, and queues the answer.
  void Run(Stream& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (s.finished) return;
    switch (s.kind) {
      case FrameType::kFileWrite:
        if (ram_.bytes() + s.input.size() > kMaxRamBytes) {
          Finish(s, ExitKind::kFailed, ENOSPC, "the fake guest's memory is full");
          return;
        }
        ram_.files[s.path] = std::move(s.input);
        Finish(s, ExitKind::kExited, 0, "");
        return;
      case FrameType::kFileRead:
        if (auto f = ram_.files.find(s.path); f != ram_.files.end()) {
          s.out.emplace_back(FrameType::kStdout, f->second);
          Finish(s, ExitKind::kExited, 0, "");
        } else {
          Finish(s, ExitKind::kFailed, ENOENT, "No such file or directory");
        }
        return;
      case FrameType::kTailFiles:
        Finish(s, ExitKind::kFailed, ENOENT, "No such file or directory");
        return;
      default:
        break;
    }
    if (s.argv.empty()) {
      Finish(s, ExitKind::kSpawnFailed, ENOENT, "no command");
      return;
    }
    const std::string& command = s.argv[0];
    std::vector<std::string> args(s.argv.begin() + 1, s.argv.end());
    if (command == "echo") {
      s.out.emplace_back(FrameType::kStdout, absl::StrCat(absl::StrJoin(args, " "), "\n"));
      Finish(s, ExitKind::kExited, 0, "");
    } else if (command == "cat") {
      if (args.empty()) {
        s.out.emplace_back(FrameType::kStdout, s.input);
        Finish(s, ExitKind::kExited, 0, "");
        return;
      }
      int code = 0;
      for (const std::string& path : args) {
        auto f = ram_.files.find(path);
        if (f == ram_.files.end()) {
          s.out.emplace_back(FrameType::kStderr,
                             absl::StrCat("cat: ", path, ": No such file or directory\n"));
          code = 1;
        } else {
          s.out.emplace_back(FrameType::kStdout, f->second);
        }
      }
      Finish(s, ExitKind::kExited, code, "");
    } else if (command == "hostname") {
      s.out.emplace_back(FrameType::kStdout, ram_.hostname + "\n");
      Finish(s, ExitKind::kExited, 0, "");
    } else if (command == "boots") {
      s.out.emplace_back(FrameType::kStdout,
                         absl::StrCat("booted ", ram_.boots, " restored ", ram_.restores, "\n"));
      Finish(s, ExitKind::kExited, 0, "");
    } else if (command == "true" || command == "false") {
      Finish(s, ExitKind::kExited, command == "false" ? 1 : 0, "");
    } else if (command == "exit") {
      int code = args.empty() ? 0 : atoi(args[0].c_str());
      Finish(s, ExitKind::kExited, code, "");
    } else {
      Finish(s, ExitKind::kSpawnFailed, ENOENT,
             absl::StrCat("the fake guest has no command \"", command, "\""));
    }
  }

  void Finish(Stream& s, ExitKind kind, int32_t code, const std::string& message) {
    if (s.finished) return;
    s.finished = true;
    s.out.emplace_back(FrameType::kExit,
                       EncodePayload(ExitMessage{.kind = kind, .code = code, .message = message}));
  }

  // Flushes the stream, and forgets it once its exit is sent.
  void Pump(int fd, std::map<uint32_t, Stream>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Flush(fd, it->first, it->second);
    if (it->second.finished && it->second.out.empty()) streams_.erase(it);
  }

  // Sends what the stream's window allows (nothing while paused).
  void Flush(int fd, uint32_t id, Stream& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!ram_.paused && !s.out.empty()) {
      auto& [type, bytes] = s.out.front();
      if (type == FrameType::kExit) {
        Send(fd, type, id, bytes);
        s.out.pop_front();
        continue;
      }
      if (bytes.empty()) {
        s.out.pop_front();
        continue;
      }
      size_t n = std::min<uint64_t>({bytes.size(), s.sendable, kMaxPayload});
      if (n == 0) return;
      Send(fd, type, id, std::string_view(bytes).substr(0, n));
      s.sendable -= n;
      bytes.erase(0, n);
    }
  }

  absl::Mutex mu_;
  Ram ram_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint32_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
  UniqueFd guest_fd_;
  std::thread thread_;
  std::string last_event_;
  absl::Mutex proc_mu_;  // also serializes reaping pid_
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  std::optional<std::string> exit_reason_ ABSL_GUARDED_BY(proc_mu_);
  UniqueFd memory_;
  UniqueFd disk_;
  std::string runtime_dir_;
  GuestSync sync_;
};

class FakeVm : public Vm {
 public:
  FakeVm(FakeVmDriver* driver, std::shared_ptr<FakeVmCore> core, bool join_midway)
      : driver_(driver), core_(std::move(core)) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) abort();
    channel_ = GuestChannel::Start(
        UniqueFd(fds[0]), [](const absl::Status&) {}, join_midway);
    core_->Connect(UniqueFd(fds[1]), /*hello=*/!core_->sync().restored || join_midway);
  }
  ~FakeVm() override {
    channel_->Stop();
    if (detached_) return;
    core_->End(absl::CancelledError("the VM was destroyed"));
    driver_->Forget(core_.get());
  }

  absl::Status WaitReady(absl::Time deadline) override {
    absl::Status s = channel_->Handshake(deadline, core_->sync());
    if (!s.ok()) Kill(s);
    return s;
  }
  absl::Status SaveState(int state_fd, absl::Time deadline) override {
    return core_->SaveState(state_fd);
  }
  absl::Status Continue(absl::Time deadline) override {
    core_->Continue();
    GuestSync sync = core_->sync();
    sync.restored = true;
    return channel_->Handshake(deadline, sync);
  }
  GuestChannel& channel() override { return *channel_; }
  pid_t pid() const override { return core_->pid(); }
  void Kill(const absl::Status& reason) override { core_->End(reason); }
  std::string DiagnosticTail() const override {
    std::string last = core_->last_event();
    return last.empty() ? "fake guest: nothing to report" : "fake guest: " + last;
  }
  std::optional<std::string> ExitReason() override { return core_->ExitReason(); }
  int shared_memory_fd() const override { return core_->memory_fd(); }
  std::string accelerator() const override { return "tcg"; }
  std::string vmm_version() const override { return "fake 1"; }
  absl::Status Adopt(const std::string& runtime_dir, const std::string& host_cgroup, GuestSync sync,
                     absl::Time deadline) override {
    if (core_->runtime_dir().empty()) {
      return absl::FailedPreconditionError("only a VM with a runtime directory can be handed on");
    }
    (void)RemoveTree(runtime_dir);
    if (absl::Status s = MakeDirectories(DirName(runtime_dir), 0700); !s.ok()) return s;
    if (rename(core_->runtime_dir().c_str(), runtime_dir.c_str()) != 0) {
      return ErrnoStatus("move the VM's runtime directory to", runtime_dir);
    }
    core_->set_runtime_dir(runtime_dir);
    sync.restored = true;
    core_->sync() = sync;
    return channel_->Handshake(deadline, sync);
  }
  void Detach() override {
    if (core_->runtime_dir().empty()) return;
    detached_ = true;
    driver_->Keep(core_);
  }

 private:
  FakeVmDriver* driver_;
  std::shared_ptr<FakeVmCore> core_;
  std::shared_ptr<GuestChannel> channel_;
  bool detached_ = false;
};

FakeVmDriver::FakeVmDriver() = default;

FakeVmDriver::~FakeVmDriver() = default;

absl::StatusOr<std::unique_ptr<Vm>> FakeVmDriver::Start(const VmConfig& config) {
  {
    absl::MutexLock lock(&mu_);
    if (fail_count_ > 0) {
      --fail_count_;
      return fail_status_;
    }
  }
  Ram ram;
  bool restored = config.incoming_state_fd >= 0;
  if (restored) {
    absl::StatusOr<std::string> state = ReadFd(config.incoming_state_fd, 4 * kMaxRamBytes);
    if (!state.ok()) return state.status();
    std::string_view rest = *state;
    if (!rest.starts_with(kStateMagic)) {
      return absl::DataLossError("the saved state is not a fake VM's");
    }
    rest.remove_prefix(sizeof(kStateMagic) - 1);
    absl::StatusOr<Ram> loaded;
    if (rest == "apart\n") {
      if (config.memory_fd < 0) {
        return absl::InvalidArgumentError("a state saved without its RAM needs a memory_fd");
      }
      loaded = ReadRamFile(config.memory_fd);
    } else if (rest.starts_with("inside\n")) {
      rest.remove_prefix(7);
      uint64_t size = 0;
      PayloadReader r(rest);
      if (!r.U64(&size) || size != rest.size() - 8) {
        return absl::DataLossError("the fake VM's saved state is malformed");
      }
      loaded = Ram::Decode(rest.substr(8));
    } else {
      return absl::DataLossError("the fake VM's saved state is malformed");
    }
    if (!loaded.ok()) return loaded.status();
    ram = *std::move(loaded);
    if (!config.hold) ++ram.restores;
  } else {
    ram.boots = 1;
    ram.hostname = config.hostname;
  }
  auto core = std::make_shared<FakeVmCore>(config, std::move(ram), restored);
  if (absl::Status s = core->Launch(config); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    ++(restored ? restored_ : booted_);
    all_.push_back(core);
  }
  return std::make_unique<FakeVm>(this, std::move(core), /*join_midway=*/false);
}

absl::StatusOr<LaunchedVm> FakeVmDriver::Reattach(const std::string& runtime_dir,
                                                  absl::Time deadline) {
  std::shared_ptr<FakeVmCore> core = TakeDetached(runtime_dir);
  if (core == nullptr || core->ExitReason()) {
    return absl::NotFoundError(absl::StrCat("no VM runs for ", runtime_dir));
  }
  core->Continue();  // a guest a snapshot left stopped runs again
  UniqueFd disk(fcntl(core->disk_fd(), F_DUPFD_CLOEXEC, 0));
  if (!disk.valid()) return ErrnoStatus("dup the session disk");
  auto vm = std::make_unique<FakeVm>(this, core, /*join_midway=*/true);
  if (absl::Status s = vm->WaitReady(deadline); !s.ok()) return s;
  return LaunchedVm{std::move(vm), std::move(disk)};
}

void FakeVmDriver::Destroy(const std::string& runtime_dir) {
  std::shared_ptr<FakeVmCore> core = TakeDetached(runtime_dir);
  core.reset();
  (void)RemoveTree(runtime_dir);
}

std::shared_ptr<FakeVmCore> FakeVmDriver::TakeDetached(const std::string& runtime_dir) {
  absl::MutexLock lock(&mu_);
  auto it = detached_.find(runtime_dir);
  if (it == detached_.end()) return nullptr;
  std::shared_ptr<FakeVmCore> core = std::move(it->second);
  detached_.erase(it);
  return core;
}

void FakeVmDriver::FailStarts(absl::Status status, int count) {
  absl::MutexLock lock(&mu_);
  fail_status_ = std::move(status);
  fail_count_ = count;
}

int FakeVmDriver::booted() const {
  absl::MutexLock lock(&mu_);
  return booted_;
}

int FakeVmDriver::restored() const {
  absl::MutexLock lock(&mu_);
  return restored_;
}

std::vector<pid_t> FakeVmDriver::RunningPids() const {
  std::vector<std::shared_ptr<FakeVmCore>> cores;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& weak : all_) {
      if (auto core = weak.lock()) cores.push_back(std::move(core));
    }
  }
  std::vector<pid_t> pids;
  for (const auto& core : cores) {
    if (!core->ExitReason()) pids.push_back(core->pid());
  }
  return pids;
}

void FakeVmDriver::Forget(const FakeVmCore* core) {
  absl::MutexLock lock(&mu_);
  std::erase_if(all_, [core](const std::weak_ptr<FakeVmCore>& w) {
    auto p = w.lock();
    return p == nullptr || p.get() == core;
  });
}

void FakeVmDriver::Keep(std::shared_ptr<FakeVmCore> core) {
  absl::MutexLock lock(&mu_);
  detached_[core->runtime_dir()] = std::move(core);
}

}  // namespace airlock
