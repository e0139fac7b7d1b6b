#include "src/guest/agent_server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "src/common/workspace_change.h"  // IsCleanRelativePath
#include "src/guest/agent_files.h"
#include "src/guest/agent_store.h"
#include "src/guest/guest_boot.h"
#include "src/guest/guest_volumes.h"
#include "src/guest/guest_workspace.h"
#include "src/guest/oom_report.h"
#include "src/guest/user_lookup.h"

namespace airlock::guest {
namespace {

constexpr char kAgentVersion[] = "airlock-agent 1";
// The agent stops reading command output while this much is queued for the host.
constexpr size_t kOutQueueCap = 1024 * 1024;
// The size of a command's stdout and stderr pipes (the kernel's default: 64 KiB).
constexpr int kCommandPipeBytes = 1024 * 1024;
constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Commands run in this cgroup (see ExecChild); the agent itself stays outside it, so a command
// that exhausts processes or memory cannot starve the agent.
constexpr char kCommandCgroup[] = "/sys/fs/cgroup/airlock";
// Memory kept back from commands for the kernel and the agent.
constexpr uint64_t kAgentMemoryReserve = 48ull << 20;

bool WriteText(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

uint64_t ReadMeminfo(const std::string& text, const std::string& key) {
  size_t at = text.find(key + ":");
  if (at == std::string::npos) return 0;
  return std::strtoull(text.c_str() + at + key.size() + 1, nullptr, 10) * 1024;
}

// How often the kernel's OOM killer has struck inside the commands' cgroup.
uint64_t CommandOomKills() {
  std::ifstream events(std::string(kCommandCgroup) + "/memory.events");
  std::string key;
  uint64_t value;
  while (events >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return 0;
}

uint64_t MonotonicMicros() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000 + static_cast<uint64_t>(now.tv_nsec) / 1000;
}

// The last `count` kills of the out-of-memory killer logged since about since_us, described.
std::string OomKillsSince(uint64_t since_us, uint64_t count) {
  // The kernel log's clock and CLOCK_MONOTONIC may differ by a little; the count bounds it.
  constexpr uint64_t kSlackUs = 1000000;
  std::vector<OomKill> kills =
      OomKillsIn(ReadKernelLog(), since_us > kSlackUs ? since_us - kSlackUs : 0);
  if (kills.size() > count) kills.erase(kills.begin(), kills.end() - static_cast<long>(count));
  std::string text = DescribeOomKills(kills);
  return text.empty() ? "out of memory in the guest: the kernel killed a process of the command"
                      : text;
}

// Returns what failed, or an empty string.
std::string ApplyCommandLimits(uint32_t pids_max) {
  mkdir(kCommandCgroup, 0755);
  if (!WriteText("/sys/fs/cgroup/cgroup.subtree_control", "+pids +memory")) {
    return std::string("enable cgroup controllers: ") + strerror(errno);
  }
  std::string base = kCommandCgroup;
  if (!WriteText(base + "/pids.max", pids_max ? std::to_string(pids_max) : "max")) {
    return std::string("pids.max: ") + strerror(errno);
  }
  std::ifstream meminfo("/proc/meminfo");
  std::stringstream ss;
  ss << meminfo.rdbuf();
  uint64_t total = ReadMeminfo(ss.str(), "MemTotal");
  if (total > 2 * kAgentMemoryReserve &&
      !WriteText(base + "/memory.max", std::to_string(total - kAgentMemoryReserve))) {
    return std::string("memory.max: ") + strerror(errno);
  }
  return "";
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// A small text file of the guest's (/etc/passwd, /etc/group); empty if missing, cut at 4 MiB.
std::string ReadSmallFile(const char* path) {
  constexpr size_t kCap = 4 << 20;
  std::ifstream in(path);
  std::string text;
  char buf[16384];
  while (text.size() < kCap && in.read(buf, sizeof(buf)).gcount() > 0) {
    text.append(buf, std::min(static_cast<size_t>(in.gcount()), kCap - text.size()));
  }
  return text;
}

// Forks a command's process, born in the commands' cgroup (clone3 with CLONE_INTO_CGROUP):
// moving it there after the fork took the kernel's cgroup lock for writing, which waits for an
// RCU grace period, 10-15 ms of every command under TCG. Returns as fork() does. Without the
// cgroup (ApplyCommandLimits could not make it), a plain fork: the command runs beside the agent.
pid_t ForkCommand() {
  int cgroup = open(kCommandCgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cgroup < 0) return fork();
  clone_args args = {};
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(cgroup);
  // The agent is one thread, so the child may go on in the C library as after fork().
  long pid = syscall(SYS_clone3, &args, sizeof(args));
  if (pid != 0) {
    int e = errno;
    close(cgroup);
    errno = e;
  }
  return static_cast<pid_t>(pid);
}

// Stages of ExecChild's failure reports.
constexpr int kStageCwd = 1, kStageExec = 2, kStageUser = 3, kStageTty = 4;

// Runs in the forked child: never returns. Reports failure as {errno, stage} on report_fd.
[[noreturn]] void ExecChild(const std::vector<std::string>& argv, std::vector<std::string> env,
                            const std::string& cwd, const Identity& who, int tty_fd, int stdin_fd,
                            int stdout_fd, int stderr_fd, int report_fd) {
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  // execve resets every caught signal; of the agent's, only what it ignores would live on.
  signal(SIGPIPE, SIG_DFL);
  setsid();
  auto fail = [&](int stage) {
    int report[2] = {errno, stage};
    (void)!write(report_fd, report, sizeof(report));
    _exit(127);
  };
  // On a terminal, all three are the pty's other end, which becomes the session's controlling
  // terminal (job control, ^C, SIGWINCH).
  if (tty_fd >= 0 && ioctl(tty_fd, TIOCSCTTY, 0) != 0) fail(kStageTty);
  dup2(tty_fd >= 0 ? tty_fd : stdin_fd, 0);
  dup2(tty_fd >= 0 ? tty_fd : stdout_fd, 1);
  dup2(tty_fd >= 0 ? tty_fd : stderr_fd, 2);
  // The terminal belongs to whoever runs on it (as a login would leave it).
  if (tty_fd >= 0 && fchown(tty_fd, who.uid, static_cast<gid_t>(-1)) != 0) fail(kStageTty);
  if (setgroups(who.groups.size(), who.groups.data()) != 0 || setgid(who.gid) != 0 ||
      setuid(who.uid) != 0) {
    fail(kStageUser);
  }
  if (!cwd.empty() && chdir(cwd.c_str()) != 0) fail(kStageCwd);
  if (std::none_of(env.begin(), env.end(),
                   [](const std::string& e) { return e.rfind("HOME=", 0) == 0; })) {
    env.push_back("HOME=" + who.home);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  std::string path = kDefaultPath;
  for (const std::string& e : env) {
    envp.push_back(const_cast<char*>(e.c_str()));
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  }
  envp.push_back(nullptr);
  const std::string& file = argv[0];
  if (file.find('/') != std::string::npos) {
    execve(file.c_str(), args.data(), envp.data());
    fail(kStageExec);
  }
  bool denied = false;
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + file;
    execve(candidate.c_str(), args.data(), envp.data());
    if (errno == EACCES) denied = true;
  }
  errno = denied ? EACCES : ENOENT;
  fail(kStageExec);
  _exit(127);
}

GuestMetrics SampleMetrics() {
  GuestMetrics m;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  uint64_t v[8] = {};
  stat >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7];
  m.cpu_busy_ticks = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  m.cpu_total_ticks = m.cpu_busy_ticks + v[3] + v[4];
  m.ticks_per_second = static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
  m.vcpus = static_cast<uint64_t>(sysconf(_SC_NPROCESSORS_ONLN));
  std::ifstream meminfo("/proc/meminfo");
  std::stringstream ss;
  ss << meminfo.rdbuf();
  m.memory_total_bytes = ReadMeminfo(ss.str(), "MemTotal");
  m.memory_available_bytes = ReadMeminfo(ss.str(), "MemAvailable");
  std::ifstream loadavg("/proc/loadavg");
  std::string a, b, c, running;
  loadavg >> a >> b >> c >> running;
  size_t slash = running.find('/');
  if (slash != std::string::npos)
    m.processes = std::strtoull(running.c_str() + slash + 1, nullptr, 10);
  struct statvfs fs;
  if (statvfs("/", &fs) == 0) {
    m.disk_total_bytes = static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
    m.disk_used_bytes = static_cast<uint64_t>(fs.f_blocks - fs.f_bfree) * fs.f_frsize;
  }
  timespec up;
  clock_gettime(CLOCK_BOOTTIME, &up);
  m.uptime_ms = static_cast<uint64_t>(up.tv_sec) * 1000 + up.tv_nsec / 1000000;
  return m;
}

void MakeParents(const std::string& path) {
  for (size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1)) {
    mkdir(path.substr(0, at).c_str(), 0755);
  }
}

}  // namespace

struct AgentServer::Stream {
  enum class Kind { kExec, kFileWrite, kFileRead, kBuffer, kWatch, kActivity };
  Kind kind = Kind::kExec;
  pid_t pid = -1;
  int stdin_fd = -1;
  int out_fd[2] = {-1, -1};  // stdout, stderr
  int file_fd = -1;
  std::string stdin_buf;
  bool input_ended = false;
  bool exited = false;
  int wait_status = 0;
  bool tty = false;         // out_fd[0] is a pty's agent end (and stdin_fd a copy of it)
  timespec exited_at = {};  // CLOCK_MONOTONIC, when the process was reaped
  StreamWindow window;      // output we may send, input we received
  int file_error = 0;
  // kFileWrite into a new name beside the file, renamed over it at kInputEnd: readers never see
  // half a file, and a write the host cancels (kSignal) or abandons leaves the old one.
  std::string file_path;  // where the file goes
  std::string temp_path;  // empty: written in place (a symlink, a hard link, a device)
  uid_t file_uid = 0;     // the owner of the file it replaces
  gid_t file_gid = 0;
  uint64_t oom_kills_at_start = 0;
  uint64_t started_us = 0;  // CLOCK_MONOTONIC
  std::string buffer;       // kBuffer: an answer made at once, sent as the window allows
  size_t buffer_sent = 0;
  // kWatch: the inotify watch, and its records (each whole in one frame) not sent yet.
  std::unique_ptr<DirWatch> watch;
  std::deque<std::string> records;
  size_t records_bytes = 0;
  bool watch_over = false;  // the directory is gone: the stream ends once records are sent
};

AgentServer::AgentServer(int channel_fd, int sigchld_fd, ActivityRecorder* recorder)
    : channel_fd_(channel_fd),
      sigchld_fd_(sigchld_fd),
      recorder_(recorder),
      net_([this](FrameType type, uint32_t stream, std::string_view payload) {
        Send(type, stream, payload);
      }) {}

AgentServer::~AgentServer() {
  for (auto& [id, s] : streams_) {
    for (int* fd : {&s->stdin_fd, &s->out_fd[0], &s->out_fd[1], &s->file_fd}) CloseFd(fd);
    if (!s->temp_path.empty()) unlink(s->temp_path.c_str());
  }
  CloseFd(&staging_[0]);
  CloseFd(&staging_[1]);
}

void AgentServer::Send(FrameType type, uint32_t stream, std::string_view payload) {
  SendBytes(EncodeFrame(type, stream, payload));
}

void AgentServer::SendBytes(std::string_view bytes) {
  if (out_.empty() && splice_left_ == 0) {
    while (!bytes.empty()) {
      ssize_t n = write(channel_fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // full (or failed: FlushOut reports it)
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    if (bytes.empty()) return;
  }
  out_.emplace_back(bytes);
  out_bytes_ += bytes.size();
}

bool AgentServer::FlushOut(std::string* error) {
  if (splice_left_ > 0) ContinueSplice();
  if (splice_left_ > 0) return true;  // the port is full
  while (!out_.empty()) {
    std::string& front = out_.front();
    ssize_t n = write(channel_fd_, front.data() + out_sent_, front.size() - out_sent_);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return true;
      *error = std::string("write to channel: ") + strerror(errno);
      return false;
    }
    if (n == 0) return true;  // the port took nothing: again when poll says it is writable
    out_bytes_ -= static_cast<size_t>(n);
    out_sent_ += static_cast<size_t>(n);
    if (out_sent_ == front.size()) {
      out_.pop_front();
      out_sent_ = 0;
    }
  }
  return true;
}

bool AgentServer::SpliceOutput(uint32_t id, Stream& s, int which) {
  if (staging_[0] < 0 && pipe2(staging_, O_CLOEXEC | O_NONBLOCK) != 0) {
    splice_usable_ = false;
    return false;
  }
  // Through a pipe of the agent's own, which then holds exactly this frame's payload: the
  // guest kernel (6.1) faults when a splice to a virtio port leaves part of a pipe behind, and
  // the command may add to its pipe at any moment. Pipe to pipe moves pages, not bytes.
  size_t want = std::min<uint64_t>(s.window.sendable(), kMaxPayload);
  ssize_t n = splice(s.out_fd[which], nullptr, staging_[1], nullptr, want, SPLICE_F_NONBLOCK);
  if (n <= 0) return false;  // nothing there, its end, or an error: read() says which
  char header[kFrameHeaderSize];
  EncodeFrameHeader(which == 0 ? FrameType::kStdout : FrameType::kStderr, id,
                    static_cast<uint32_t>(n), header);
  s.window.Sent(static_cast<uint64_t>(n));
  splice_left_ = static_cast<size_t>(n);
  // The port takes a write this small whole or not at all.
  if (write(channel_fd_, header, sizeof(header)) != static_cast<ssize_t>(sizeof(header))) {
    EndSplice(header);  // the port is full: the frame is queued instead
    return true;
  }
  ContinueSplice();
  return true;
}

void AgentServer::ContinueSplice() {
  while (splice_left_ > 0) {
    ssize_t n = splice(staging_[0], nullptr, channel_fd_, nullptr, splice_left_, SPLICE_F_NONBLOCK);
    if (n > 0) {
      splice_left_ -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;  // the port is full: FlushOut goes on when it is not
    // The port refused (or moved nothing): from here on, read and write.
    ConsoleLog(std::string("splice to the channel failed (") + (n < 0 ? strerror(errno) : "0") +
               "); writing output instead");
    splice_usable_ = false;
    EndSplice("");
    return;
  }
}

// Queues what is left of the frame in the staging pipe after `header` (empty: it is written
// already) ahead of everything else: nothing queued was written while the frame was pending.
void AgentServer::EndSplice(std::string_view header) {
  std::string rest(header.size() + splice_left_, '\0');
  memcpy(rest.data(), header.data(), header.size());
  size_t have = header.size();
  while (have < rest.size()) {
    ssize_t n = read(staging_[0], rest.data() + have, rest.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    have += static_cast<size_t>(n);
  }
  // Bytes the staging pipe held and no longer does were lost in the guest kernel (a splice
  // that failed after taking them): the frame is padded so that the channel stays in step.
  if (have < rest.size()) ConsoleLog("command output lost in the guest kernel; padded");
  out_bytes_ += rest.size();
  out_.push_front(std::move(rest));
  splice_left_ = 0;
}

void AgentServer::FinishStream(uint32_t id, ExitKind kind, int code, const std::string& message) {
  SendMessage(id, ExitMessage{.kind = kind, .code = code, .message = message});
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  Stream& s = *it->second;
  CloseFd(&s.stdin_fd);
  CloseFd(&s.out_fd[0]);
  CloseFd(&s.out_fd[1]);
  CloseFd(&s.file_fd);
  if (!s.temp_path.empty()) unlink(s.temp_path.c_str());  // a write that did not finish
  streams_.erase(it);
}

// A new pty: the agent's end (non-blocking later) and the command's, sized rows x cols.
bool OpenPty(uint32_t rows, uint32_t cols, int* master, int* peer) {
  *master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (*master < 0) return false;
  winsize size = {};
  size.ws_row = static_cast<unsigned short>(rows);
  size.ws_col = static_cast<unsigned short>(cols);
  if (unlockpt(*master) != 0 || ioctl(*master, TIOCSWINSZ, &size) != 0 ||
      (*peer = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
    int e = errno;
    CloseFd(master);
    errno = e;
    return false;
  }
  return true;
}

void AgentServer::StartExec(uint32_t id, const std::string& payload) {
  ExecStartMessage request;
  bool ok = DecodePayload(payload, &request);
  auto stream = std::make_unique<Stream>();
  streams_[id] = std::move(stream);
  if (!ok) {
    FinishStream(id, ExitKind::kSpawnFailed, EINVAL, "malformed exec request");
    return;
  }
  const std::vector<std::string>& argv = request.argv;
  const std::vector<std::string>& env = request.env;
  const std::string& cwd = request.cwd;
  const std::string& user = request.user;
  uint32_t flags = request.flags, rows = request.rows, cols = request.cols;
  bool tty = flags & kExecFlagTty;
  bool detach = flags & kExecFlagDetach;
  Identity who;
  std::string who_error;
  if (!ResolveUser(user, ReadSmallFile("/etc/passwd"), ReadSmallFile("/etc/group"), &who,
                   &who_error)) {
    FinishStream(id, ExitKind::kSpawnFailed, EINVAL, who_error);
    return;
  }
  // Without a terminal: a pipe each for stdin, stdout and stderr. On one: the pty's agent end
  // is the output, and a second descriptor of it takes input.
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
  int master = -1, peer = -1;
  auto close_all = [&] {
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1], &report[0], &report[1],
                    &master, &peer}) {
      CloseFd(fd);
    }
  };
  // Detached: stdout and stderr appended to a log of its own, which its user owns.
  std::string log_path = "/var/log/airlock/exec-" + std::to_string(id) + ".log";
  bool made =
      tty ? OpenPty(rows, cols, &master, &peer) &&
                (!(flags & kExecFlagStdin) || (in[1] = fcntl(master, F_DUPFD_CLOEXEC, 0)) >= 0)
      : detach
          ? (MakeParents(log_path),
             (out[1] = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) >=
                     0 &&
                 fchown(out[1], who.uid, who.gid) == 0 &&
                 (err[1] = fcntl(out[1], F_DUPFD_CLOEXEC, 0)) >= 0)
          : pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0;
  if (!made || pipe2(report, O_CLOEXEC) != 0) {
    int e = errno;
    close_all();
    FinishStream(id, ExitKind::kSpawnFailed, e,
                 tty      ? "open a terminal"
                 : detach ? "open " + log_path
                          : "pipe");
    return;
  }
  if (!tty && !(flags & kExecFlagStdin)) {
    CloseFd(&in[0]);
    in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  pid_t pid = ForkCommand();
  if (pid == 0) ExecChild(argv, env, cwd, who, peer, in[0], out[1], err[1], report[1]);
  int fork_errno = errno;
  for (int* fd : {&in[0], &out[1], &err[1], &report[1], &peer}) CloseFd(fd);
  Stream& s = *streams_[id];
  s.tty = tty;
  s.stdin_fd = in[1];
  s.out_fd[0] = tty ? master : out[0];
  s.out_fd[1] = err[0];
  if (pid < 0) {
    CloseFd(&report[0]);
    FinishStream(
        id, ExitKind::kSpawnFailed, fork_errno,
        std::string("start the command's process: ") + strerror(fork_errno) +
            (fork_errno == EAGAIN ? " (the session's commands already run as many processes as it "
                                    "allows: end some, or create the session with a larger --pids)"
                                  : ""));
    return;
  }
  s.pid = pid;
  if (recorder_ != nullptr && recorder_->started()) recorder_->NoteCommand(pid, request.exec_id);
  s.oom_kills_at_start = CommandOomKills();
  s.started_us = MonotonicMicros();
  // The report pipe closes on a successful exec; otherwise it carries {errno, stage}.
  int failure[2] = {0, 0};
  ssize_t n;
  do {
    n = read(report[0], failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  CloseFd(&report[0]);
  if (n == sizeof(failure)) {
    waitpid(pid, nullptr, 0);
    std::string what = failure[1] == kStageCwd    ? "working directory " + cwd
                       : failure[1] == kStageUser ? "switch to user " + user
                       : failure[1] == kStageTty  ? "set up the terminal"
                                                  : argv[0];
    FinishStream(id, ExitKind::kSpawnFailed, failure[0], what + ": " + strerror(failure[0]));
    return;
  }
  if (detach) {
    // Reaped, whenever it ends, with every other orphan of PID 1.
    FinishStream(id, ExitKind::kExited, 0,
                 "pid " + std::to_string(pid) + ", detached; its output goes to " + log_path);
    return;
  }
  if (!(flags & kExecFlagStdin)) CloseFd(&s.stdin_fd);
  for (int fd : {s.out_fd[0], s.out_fd[1], s.stdin_fd}) {
    if (fd >= 0) SetNonBlocking(fd);
  }
  // A command that writes a lot runs on while the agent sends, instead of every 64 KiB waking
  // the agent and sleeping itself: under TCG each switch costs the vCPU its TLB and its
  // chained translations. Best effort (the pipe keeps its size if the kernel refuses).
  if (!tty) {
    for (int fd : {s.out_fd[0], s.out_fd[1]}) fcntl(fd, F_SETPIPE_SZ, kCommandPipeBytes);
  }
}

void AgentServer::StartFileWrite(uint32_t id, const std::string& payload) {
  FileWriteMessage request;
  bool ok = DecodePayload(payload, &request);
  const std::string& path = request.path;
  uint32_t mode = request.mode;
  auto stream = std::make_unique<Stream>();
  stream->kind = Stream::Kind::kFileWrite;
  streams_[id] = std::move(stream);
  if (!ok || path.empty() || path[0] != '/') {
    FinishStream(id, ExitKind::kFailed, EINVAL, "path must be absolute");
    return;
  }
  MakeParents(path);
  Stream& s = *streams_[id];
  s.file_path = path;
  struct stat st;
  bool exists = lstat(path.c_str(), &st) == 0;
  int fd = -1;
  if (exists && (!S_ISREG(st.st_mode) || st.st_nlink > 1)) {
    // What is replaced here is not one plain file: write through it as it is.
    fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode & 07777);
  } else {
    size_t slash = path.rfind('/');
    std::string name = path.substr(slash + 1).substr(0, 128);
    std::string temp = path.substr(0, slash + 1) + WriteTempName(name);
    fd = mkostemp(temp.data(), O_CLOEXEC);
    if (fd >= 0) {
      s.temp_path = temp;
      if (fchmod(fd, mode & 07777) != 0) s.file_error = errno;
      if (exists) {
        s.file_uid = st.st_uid;
        s.file_gid = st.st_gid;
      }
    }
  }
  if (fd < 0) {
    int e = errno;
    FinishStream(id, ExitKind::kFailed, e, strerror(e));  // input already on its way is dropped
    return;
  }
  s.file_fd = fd;
  // Its metadata goes with the new file (the name it replaces had its own).
  for (const auto& [key, value] : request.metadata) {
    std::string name = kMetadataXattrPrefix + key;
    if (!s.file_error && fsetxattr(fd, name.c_str(), value.data(), value.size(), 0) != 0) {
      s.file_error = errno;
    }
  }
}

// The end of a kFileWrite's input: the file is on disk, under its name, or the stream fails.
void AgentServer::FinishFileWrite(uint32_t id, Stream& s) {
  int e = s.file_error;
  if (s.file_fd >= 0 && !e && s.file_uid + s.file_gid != 0 &&
      fchown(s.file_fd, s.file_uid, s.file_gid) != 0) {
    e = errno;
  }
  if (s.file_fd >= 0 && !e && fsync(s.file_fd) != 0) e = errno;
  if (!e && !s.temp_path.empty()) {
    if (rename(s.temp_path.c_str(), s.file_path.c_str()) != 0) {
      e = errno;
    } else {
      s.temp_path.clear();
    }
  }
  GrantInput(id, s, true);
  FinishStream(id, e ? ExitKind::kFailed : ExitKind::kExited, e, e ? strerror(e) : "");
}

void AgentServer::StartFileRead(uint32_t id, const std::string& payload) {
  FileReadMessage request;
  bool ok = DecodePayload(payload, &request);
  const std::string& path = request.path;
  auto stream = std::make_unique<Stream>();
  stream->kind = Stream::Kind::kFileRead;
  streams_[id] = std::move(stream);
  if (!ok || path.empty() || path[0] != '/') {
    FinishStream(id, ExitKind::kFailed, EINVAL, "path must be absolute");
    return;
  }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int e = fd < 0 ? errno : EISDIR;
    if (fd >= 0) close(fd);
    FinishStream(id, ExitKind::kFailed, e, path + ": " + strerror(e));
    return;
  }
  streams_[id]->file_fd = fd;
}

namespace {

// A file kTailFiles found: where it is and its name relative to the directory asked for.
struct TailFile {
  std::string name;
  int dir_fd;  // borrowed from TailWalk::dirs
  std::string leaf;
};

// Walks a directory tree without following symbolic links, collecting regular files whose
// names end in suffix, at most kMaxTailFiles, in name order.
struct TailWalk {
  std::string suffix;
  std::vector<int> dirs;  // every directory opened, closed by the walk's owner
  std::vector<TailFile> files;

  ~TailWalk() {
    for (int fd : dirs) close(fd);
  }
  void Walk(int dir_fd, const std::string& prefix, uint32_t depth) {
    int listing = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
    DIR* d = listing >= 0 ? fdopendir(listing) : nullptr;
    if (d == nullptr) {
      if (listing >= 0) close(listing);
      return;
    }
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != ".." && names.size() < 4 * kMaxTailFiles) names.push_back(name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      if (files.size() >= kMaxTailFiles) return;
      struct stat st;
      if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(st.st_mode) && depth > 0) {
        int sub = openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) continue;
        dirs.push_back(sub);
        Walk(sub, prefix + name + "/", depth - 1);
      } else if (S_ISREG(st.st_mode) && name.size() > suffix.size() &&
                 name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        files.push_back({prefix + name, dir_fd, name});
      }
    }
  }
};

}  // namespace

void AgentServer::StartTailFiles(uint32_t id, const std::string& payload) {
  TailFilesMessage request;
  bool ok = DecodePayload(payload, &request);
  const std::string& user = request.user;
  const std::string& dir = request.dir;
  const std::string& suffix = request.suffix;
  uint32_t depth = request.depth, max_bytes = request.max_bytes;
  std::map<std::string, uint64_t> known(request.offsets.begin(), request.offsets.end());
  auto stream = std::make_unique<Stream>();
  stream->kind = Stream::Kind::kBuffer;
  streams_[id] = std::move(stream);
  if (!ok || !IsCleanRelativePath(dir)) {
    FinishStream(id, ExitKind::kFailed, EINVAL, "malformed tail request");
    return;
  }
  Identity who;
  std::string who_error;
  if (!ResolveUser(user, ReadSmallFile("/etc/passwd"), ReadSmallFile("/etc/group"), &who,
                   &who_error)) {
    FinishStream(id, ExitKind::kFailed, EINVAL, who_error);
    return;
  }
  TailWalk walk;
  walk.suffix = suffix;
  int fd = open(who.home.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) walk.dirs.push_back(fd);
  for (size_t start = 0; fd >= 0 && start <= dir.size();) {
    size_t end = dir.find('/', start);
    if (end == std::string::npos) end = dir.size();
    fd = openat(fd, dir.substr(start, end - start).c_str(),
                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) walk.dirs.push_back(fd);
    start = end + 1;
  }
  if (fd < 0) {
    int e = errno;
    FinishStream(id, ExitKind::kFailed, e, dir + ": " + strerror(e));
    return;
  }
  walk.Walk(fd, "", depth);
  // Each file with news gets an equal share of the bytes asked for (what one leaves, the next
  // may use), so one that grows without end cannot starve the others.
  std::string& answer = streams_[id]->buffer;
  uint64_t left = max_bytes;
  for (size_t i = 0; i < walk.files.size(); ++i) {
    const TailFile& f = walk.files[i];
    int file = openat(f.dir_fd, f.leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (file < 0) continue;
    if (fstat(file, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(file);
      continue;
    }
    TailRecord record;
    record.name = f.name;
    record.size = static_cast<uint64_t>(st.st_size);
    auto seen = known.find(f.name);
    bool is_new = seen == known.end() || seen->second > record.size;
    record.offset = is_new ? 0 : seen->second;
    uint64_t share = left / (walk.files.size() - i);
    uint64_t want = std::min<uint64_t>(record.size - record.offset, share);
    record.bytes.resize(want);
    ssize_t n =
        want > 0 ? pread(file, record.bytes.data(), want, static_cast<off_t>(record.offset)) : 0;
    close(file);
    record.bytes.resize(n > 0 ? static_cast<size_t>(n) : 0);
    left -= record.bytes.size();
    if (record.bytes.empty() && !is_new) continue;
    answer += EncodeTailRecord(record);
  }
}

namespace {

GuestAccounts ReadAccounts() {
  return GuestAccounts{.passwd = ReadSmallFile("/etc/passwd"),
                       .group = ReadSmallFile("/etc/group")};
}

// Records a watch may have waiting for the host's window; beyond it, events are lost.
constexpr size_t kMaxWatchBacklog = 1 << 20;

}  // namespace

void AgentServer::StartReadAgentStore(uint32_t id, const std::string& payload) {
  AgentStoreMessage request;
  bool ok = DecodePayload(payload, &request);
  streams_[id] = std::make_unique<Stream>();
  if (!ok) {
    FinishStream(id, ExitKind::kFailed, EINVAL, "malformed agent store request");
    return;
  }
  Identity who;
  std::string who_error;
  if (!ResolveUser(request.user, ReadSmallFile("/etc/passwd"), ReadSmallFile("/etc/group"), &who,
                   &who_error)) {
    FinishStream(id, ExitKind::kFailed, EINVAL, who_error);
    return;
  }
  // The stream is the reader's, as a command's: its answer is its output, and its end (or the
  // signal that ended it) the stream's.
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    FinishStream(id, ExitKind::kFailed, errno, "pipe");
    return;
  }
  pid_t pid = StartStoreReader(request, who.home + "/" + request.path, out[1]);
  int fork_errno = errno;
  CloseFd(&out[1]);
  Stream& s = *streams_[id];
  if (pid < 0) {
    CloseFd(&out[0]);
    FinishStream(id, ExitKind::kFailed, fork_errno, "fork");
    return;
  }
  // What it opens is the agent's own reading, not the session's activity.
  if (recorder_ != nullptr && recorder_->started()) recorder_->NoteAgentOwn(pid);
  s.pid = pid;
  s.input_ended = true;
  s.out_fd[0] = out[0];
  SetNonBlocking(out[0]);
  s.oom_kills_at_start = CommandOomKills();
  s.started_us = MonotonicMicros();
}

void AgentServer::StartFsRequest(uint32_t id, const std::string& payload) {
  FsRequestMessage request;
  auto stream = std::make_unique<Stream>();
  stream->kind = Stream::Kind::kBuffer;
  Stream& s = *stream;
  streams_[id] = std::move(stream);
  if (!DecodePayload(payload, &request)) {
    FinishStream(id, ExitKind::kFailed, EINVAL, "malformed file request");
    return;
  }
  FsResult result = DoFsRequest(request, ReadAccounts(), &s.buffer);
  if (result.error != 0) FinishStream(id, ExitKind::kFailed, result.error, result.message);
}

void AgentServer::StartWatchDir(uint32_t id, const std::string& payload) {
  WatchDirMessage request;
  auto stream = std::make_unique<Stream>();
  stream->kind = Stream::Kind::kWatch;
  Stream& s = *stream;
  streams_[id] = std::move(stream);
  if (!DecodePayload(payload, &request)) {
    FinishStream(id, ExitKind::kFailed, EINVAL, "malformed watch request");
    return;
  }
  FsResult result;
  s.watch = DirWatch::Start(request, ReadAccounts(), &result);
  if (!s.watch) {
    FinishStream(id, ExitKind::kFailed, result.error, result.message);
    return;
  }
  s.records.push_back(EncodeWatchRecord(WatchRecord{.kind = WatchEventKind::kStarted}));
  s.records_bytes = s.records.back().size();
}

void AgentServer::StartWatchActivity(uint32_t id, const std::string& payload) {
  // Opened by a host that then paused us: it forgot the stream at the pause, and nothing may
  // be sent now; the next reader asks again.
  if (paused_) return;
  auto stream = std::make_unique<Stream>();
  stream->kind = Stream::Kind::kActivity;
  streams_[id] = std::move(stream);
  if (!payload.empty()) {
    FinishStream(id, ExitKind::kFailed, EINVAL, "malformed activity request");
    return;
  }
  // One host reader at a time: a new one takes over from the last.
  for (auto& [other, s] : streams_) {
    if (other != id && s->kind == Stream::Kind::kActivity) {
      FinishStream(other, ExitKind::kExited, 0, "");
      break;
    }
  }
  std::string error = recorder_ == nullptr ? "no recorder" : recorder_->Start(SessionDiskRoot());
  if (!error.empty()) {
    int e = errno != 0 ? errno : EIO;
    ConsoleLog("activity record: " + error);
    FinishStream(id, ExitKind::kFailed, e, error);
  }
}

void AgentServer::FlushActivity() {
  if (recorder_ == nullptr || !recorder_->started() || paused_) return;
  recorder_->ReadReady();
  for (auto& [id, s] : streams_) {
    if (s->kind != Stream::Kind::kActivity) continue;
    for (;;) {
      std::string payload = recorder_->Take(std::min<uint64_t>(s->window.sendable(), kMaxPayload));
      if (payload.empty()) return;
      Send(FrameType::kStdout, id, payload);
      s->window.Sent(payload.size());
    }
  }
}

void AgentServer::PumpActivity(uint32_t id, Stream& s) {
  while (recorder_->MillisUntilDue(MonotonicMicros()) == 0 && out_bytes_ < kOutQueueCap) {
    std::string payload = recorder_->Take(std::min<uint64_t>(s.window.sendable(), kMaxPayload));
    if (payload.empty()) return;  // waits for the window
    Send(FrameType::kStdout, id, payload);
    s.window.Sent(payload.size());
  }
}

void AgentServer::ReadWatch(uint32_t id, Stream& s) {
  size_t before = s.records.size();
  FsResult result;
  bool going = s.watch->Read(&s.records, &result);
  for (size_t i = before; i < s.records.size(); ++i) s.records_bytes += s.records[i].size();
  if (!going && result.error != 0) {
    FinishStream(id, ExitKind::kFailed, result.error, result.message);
  } else if (s.records_bytes > kMaxWatchBacklog) {
    FinishStream(id, ExitKind::kFailed, EOVERFLOW,
                 "the host did not take the events in time; some were lost");
  } else if (!going) {
    s.watch_over = true;
  }
}

void AgentServer::PumpWatch(uint32_t id, Stream& s) {
  while (!s.records.empty() && out_bytes_ < kOutQueueCap) {
    std::string payload;
    while (!s.records.empty() && payload.size() + s.records.front().size() <=
                                     std::min<uint64_t>(s.window.sendable(), kMaxPayload)) {
      payload += s.records.front();
      s.records_bytes -= s.records.front().size();
      s.records.pop_front();
    }
    if (payload.empty()) return;  // waits for the window
    Send(FrameType::kStdout, id, payload);
    s.window.Sent(payload.size());
  }
  if (s.records.empty() && s.watch_over) FinishStream(id, ExitKind::kExited, 0, "");
}

void AgentServer::PumpBuffer(uint32_t id, Stream& s) {
  while (s.window.sendable() > 0 && out_bytes_ < kOutQueueCap && s.buffer_sent < s.buffer.size()) {
    size_t n =
        std::min<uint64_t>({s.window.sendable(), kMaxPayload, s.buffer.size() - s.buffer_sent});
    Send(FrameType::kStdout, id, std::string_view(s.buffer).substr(s.buffer_sent, n));
    s.window.Sent(n);
    s.buffer_sent += n;
  }
  if (s.buffer_sent == s.buffer.size()) FinishStream(id, ExitKind::kExited, 0, "");
}

void AgentServer::GrantInput(uint32_t id, Stream& s, bool force) {
  if (uint32_t grant = s.window.TakeGrant(force); grant > 0) {
    SendMessage(id, WindowMessage{.bytes = grant});
  }
}

bool AgentServer::HandleInput(Stream& s, const Frame& frame, std::string* error) {
  if (!s.window.Received(frame.payload.size())) {
    *error = "host sent input beyond the window";
    return false;
  }
  if (s.kind == Stream::Kind::kExec && s.stdin_fd >= 0 && !s.input_ended) {
    s.stdin_buf += frame.payload;
    return true;
  }
  if (s.kind == Stream::Kind::kFileWrite && s.file_fd >= 0) {
    const char* p = frame.payload.data();
    size_t left = frame.payload.size();
    while (left > 0) {
      ssize_t n = write(s.file_fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int e = errno;
        FinishStream(frame.stream, ExitKind::kFailed, e, strerror(e));  // the disk is full...
        return true;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  s.window.Consumed(frame.payload.size());  // written, or discarded
  return true;
}

// The kinds of stream the host opens, by the frame that opens them. The server routes every
// later frame of a stream by its id and keeps its flow control (StreamWindow); a new kind adds
// a line here and its own Start and Pump.
const std::map<FrameType, AgentServer::Opener>& AgentServer::Openers() {
  static const auto* openers = new std::map<FrameType, Opener>{
      {FrameType::kExecStart, &AgentServer::StartExec},
      {FrameType::kFileWrite, &AgentServer::StartFileWrite},
      {FrameType::kFileRead, &AgentServer::StartFileRead},
      {FrameType::kTailFiles, &AgentServer::StartTailFiles},
      {FrameType::kReadAgentStore, &AgentServer::StartReadAgentStore},
      {FrameType::kMetricsRequest, &AgentServer::StartMetrics},
      {FrameType::kOpenPort, &AgentServer::StartPortConnection},
      {FrameType::kFsRequest, &AgentServer::StartFsRequest},
      {FrameType::kWatchDir, &AgentServer::StartWatchDir},
      {FrameType::kWatchActivity, &AgentServer::StartWatchActivity},
  };
  return *openers;
}

// A connection to a guest port is GuestNet's, like the guest's own connections.
void AgentServer::StartPortConnection(uint32_t id, const std::string& payload) {
  net_.OpenPort(id, payload);
}

void AgentServer::StartMetrics(uint32_t id, const std::string& payload) {
  SendMessage(id, SampleMetrics());
}

bool AgentServer::HandleFrame(const Frame& frame, std::string* error) {
  if (net_.Handles(frame)) return net_.HandleFrame(frame, error);
  auto it = streams_.find(frame.stream);
  if (auto opener = Openers().find(frame.type); opener != Openers().end()) {
    if (frame.stream == 0 || it != streams_.end()) {
      *error = "stream " + std::to_string(frame.stream) + " is already open";
      return false;
    }
    max_stream_seen_ = std::max(max_stream_seen_, frame.stream);
    (this->*opener->second)(frame.stream, frame.payload);
    return true;
  }
  switch (frame.type) {
    case FrameType::kSync: {
      SyncMessage sync;
      if (!DecodePayload(frame.payload, &sync)) {
        *error = "malformed sync";
        return false;
      }
      const std::string& entropy = sync.entropy;
      const std::string& hostname = sync.hostname;
      timespec now = {static_cast<time_t>(sync.seconds), static_cast<long>(sync.nanoseconds)};
      if (clock_settime(CLOCK_REALTIME, &now) != 0) ConsoleLog("clock_settime failed");
      int rnd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
      if (rnd >= 0) {
        std::vector<uint32_t> info(2 + (entropy.size() + 3) / 4);
        auto* pool = reinterpret_cast<rand_pool_info*>(info.data());
        pool->entropy_count = static_cast<int>(entropy.size() * 8);
        pool->buf_size = static_cast<int>(entropy.size());
        memcpy(pool->buf, entropy.data(), entropy.size());
        if (ioctl(rnd, RNDADDENTROPY, pool) != 0) ConsoleLog("RNDADDENTROPY failed");
        // Adding entropy alone does not rekey an initialized RNG: after a restore or a fork
        // every copy would go on with the same state. Reseed it now from the fresh pool.
        if (ioctl(rnd, RNDRESEEDCRNG) != 0) ConsoleLog("RNDRESEEDCRNG failed");
        close(rnd);
      }
      if (!hostname.empty() && sethostname(hostname.data(), hostname.size()) != 0) {
        ConsoleLog("sethostname failed");
      }
      std::string limit_error = ApplyCommandLimits(sync.pids_max);
      if (!limit_error.empty()) ConsoleLog("limits: " + limit_error);
      ThawVolumes();
      std::string problem;
      if (sync.flags & kSyncMountWorkspace) {
        problem = MountWorkspace(SessionDiskRoot());
        if (!problem.empty()) ConsoleLog("workspace: " + problem);
      }
      if (std::string volumes = MountVolumes(sync.volumes); !volumes.empty()) {
        ConsoleLog("volumes: " + volumes);
        problem += (problem.empty() ? "" : "; ") + volumes;
      }
      // A workspace mounted just now is recorded too, once recording has started.
      if (recorder_ != nullptr && recorder_->started()) {
        if (std::string e = recorder_->Start(SessionDiskRoot()); !e.empty()) {
          ConsoleLog("activity record: " + e);
        }
      }
      paused_ = false;
      SendMessage(0, ReadyMessage{.highest_stream = max_stream_seen_,
                                  .highest_guest_stream = net_.highest_stream(),
                                  .problem = problem});
      return true;
    }
    case FrameType::kPause:
      if (frame.stream != 0 || !frame.payload.empty()) {
        *error = "malformed pause";
        return false;
      }
      net_.DropAll();  // the host forgot them already: connections end with a pause
      // The activity record's reader takes what the window allows now (it reads what came
      // before kPaused), and is forgotten: the rest waits in the recorder for the next one.
      FlushActivity();
      std::erase_if(streams_, [](const auto& entry) {
        return entry.second->kind == Stream::Kind::kActivity;
      });
      FreezeVolumes();
      Send(FrameType::kPaused, 0, "");
      paused_ = true;
      return true;
    case FrameType::kInput:
      return it == streams_.end() || HandleInput(*it->second, frame, error);
    case FrameType::kInputEnd:
      if (it == streams_.end()) return true;
      it->second->input_ended = true;
      if (it->second->kind == Stream::Kind::kFileWrite) FinishFileWrite(frame.stream, *it->second);
      return true;
    case FrameType::kSignal: {
      SignalMessage signal;
      if (!DecodePayload(frame.payload, &signal) || signal.signal >= NSIG) {
        *error = "malformed signal request";
        return false;
      }
      int sig = signal.signal;
      if (it == streams_.end()) return true;
      if (it->second->kind == Stream::Kind::kFileWrite ||
          it->second->kind == Stream::Kind::kFileRead || it->second->kind == Stream::Kind::kWatch ||
          it->second->kind == Stream::Kind::kActivity) {
        // The host gave up on a file operation: nothing is written, the file is let go.
        FinishStream(frame.stream, ExitKind::kFailed, ECANCELED, "cancelled by the host");
      } else if (it->second->pid > 0 && !it->second->exited) {
        kill(-it->second->pid, sig);
      }
      return true;
    }
    case FrameType::kResize: {
      ResizeMessage resize;
      if (!DecodePayload(frame.payload, &resize)) {
        *error = "malformed resize";
        return false;
      }
      uint32_t rows = resize.rows, cols = resize.cols;
      if (it != streams_.end() && it->second->tty && it->second->out_fd[0] >= 0) {
        winsize size = {};
        size.ws_row = static_cast<unsigned short>(rows);
        size.ws_col = static_cast<unsigned short>(cols);
        ioctl(it->second->out_fd[0], TIOCSWINSZ, &size);  // the kernel signals SIGWINCH
      }
      return true;
    }
    case FrameType::kWindow: {
      WindowMessage window;
      if (!DecodePayload(frame.payload, &window)) {
        *error = "malformed window";
        return false;
      }
      if (it != streams_.end() && !it->second->window.Granted(window.bytes)) {
        *error = "window grows beyond its size";
        return false;
      }
      return true;
    }
    case FrameType::kProtocolError:
      ConsoleLog("host reported a protocol error: " + frame.payload.substr(0, 200));
      return true;
    case FrameType::kData:
    case FrameType::kDataEnd:
    case FrameType::kReset:
      // Late frames of a port connection (kOpenPort) the guest already closed or refused: the
      // host sent them before it read the guest's end.
      if (frame.stream % 2 == 1 && frame.stream <= max_stream_seen_) return true;
      *error = "connection frame for a stream the host never opened";
      return false;
    default:
      *error = "unexpected frame type " + std::to_string(static_cast<int>(frame.type));
      return false;
  }
}

void AgentServer::Reap() {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (auto& [id, s] : streams_) {
      if (s->pid == pid) {
        s->exited = true;
        s->wait_status = status;
        clock_gettime(CLOCK_MONOTONIC, &s->exited_at);
      }
    }
  }
}

// How long the output of a command on a terminal is waited for after the command ended, when
// something else still holds the terminal (a background job).
constexpr int64_t kTtyGraceMs = 100;

bool AgentServer::InTtyGrace(const Stream& s) {
  if (!s.tty || !s.exited) return false;
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  int64_t ms =
      (now.tv_sec - s.exited_at.tv_sec) * 1000 + (now.tv_nsec - s.exited_at.tv_nsec) / 1000000;
  return ms < kTtyGraceMs;
}

void AgentServer::PumpOutput(uint32_t id, Stream& s, int which, bool exited) {
  while (s.out_fd[which] >= 0 && s.window.sendable() > 0 && out_bytes_ < kOutQueueCap) {
    // Output is the bulk of what crosses the channel: spliced when it can be (not from a
    // terminal, which is no pipe), else read into one buffer and written from there.
    if (!s.tty && splice_usable_ && splice_left_ == 0 && out_.empty() &&
        SpliceOutput(id, s, which)) {
      continue;
    }
    size_t want = std::min<uint64_t>(s.window.sendable(), kMaxPayload);
    if (!read_buf_) read_buf_.reset(new char[kFrameHeaderSize + kMaxPayload]);
    ssize_t n = read(s.out_fd[which], read_buf_.get() + kFrameHeaderSize, want);
    if (n > 0) {
      char header[kFrameHeaderSize];
      EncodeFrameHeader(which == 0 ? FrameType::kStdout : FrameType::kStderr, id,
                        static_cast<uint32_t>(n), header);
      memcpy(read_buf_.get(), header, kFrameHeaderSize);
      SendBytes(std::string_view(read_buf_.get(), kFrameHeaderSize + static_cast<size_t>(n)));
      s.window.Sent(static_cast<uint64_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // EOF, an error (a pty whose other end all its holders closed: EIO), or (once the process
    // is gone) nothing more buffered: this pipe is done. Output of background processes still
    // holding the pipe after the exit is not waited for. A pty passes what the process wrote
    // on to its agent end a moment later (the kernel's flip buffer), so it gets a grace.
    if (n == 0 || errno != EAGAIN || (exited && !InTtyGrace(s))) CloseFd(&s.out_fd[which]);
    return;
  }
}

void AgentServer::PumpStdin(Stream& s) {
  while (s.stdin_fd >= 0 && !s.stdin_buf.empty()) {
    ssize_t n = write(s.stdin_fd, s.stdin_buf.data(), s.stdin_buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n < 0) {  // EPIPE: the process closed its stdin; discard what is left
      s.window.Consumed(s.stdin_buf.size());
      s.stdin_buf.clear();
      CloseFd(&s.stdin_fd);
      return;
    }
    s.stdin_buf.erase(0, static_cast<size_t>(n));
    s.window.Consumed(static_cast<uint64_t>(n));
  }
}

void AgentServer::PumpFileRead(uint32_t id, Stream& s) {
  char buf[kMaxPayload];
  while (s.window.sendable() > 0 && out_bytes_ < kOutQueueCap) {
    ssize_t n = read(s.file_fd, buf, std::min<uint64_t>(s.window.sendable(), sizeof(buf)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      FinishStream(id, ExitKind::kFailed, e, strerror(e));
      return;
    }
    if (n == 0) {
      FinishStream(id, ExitKind::kExited, 0, "");
      return;
    }
    Send(FrameType::kStdout, id, std::string_view(buf, static_cast<size_t>(n)));
    s.window.Sent(static_cast<uint64_t>(n));
  }
}

void AgentServer::WaitForHost() {
  for (;;) {
    pollfd p = {channel_fd_, POLLIN, 0};
    if (poll(&p, 1, 0) < 0 && errno != EINTR) return;
    if (p.revents & (POLLHUP | POLLERR)) {
      usleep(20000);
      continue;
    }
    // Connected. Anything readable now came before this host's hello (it sends nothing until
    // it has one): the tail of the old connection.
    char buf[4096];
    ssize_t n;
    while ((n = read(channel_fd_, buf, sizeof(buf))) > 0) {
    }
    if (n == 0) continue;  // gone again
    return;
  }
}

std::string AgentServer::Serve() {
  WaitForHost();
  Send(FrameType::kHello, 0, EncodeHello(kAgentVersion));
  net_.Start();
  std::vector<uint8_t> inbuf(kMaxPayload);
  std::vector<pollfd> fds;
  struct Owner {
    uint32_t id;
    int which;  // 0 stdout, 1 stderr, 2 stdin, 3 a watch's inotify
  };
  std::vector<Owner> owners;
  for (;;) {
    fds.clear();
    owners.clear();
    bool waiting = !out_.empty() || splice_left_ > 0;
    fds.push_back({channel_fd_, static_cast<short>(POLLIN | (waiting ? POLLOUT : 0)), 0});
    fds.push_back({sigchld_fd_, POLLIN, 0});
    int timeout = -1;
    size_t recorder_fds = fds.size();
    int recorder_wait = recorder_ != nullptr ? recorder_->AddPollFds(&fds, MonotonicMicros()) : -1;
    recorder_fds = fds.size() - recorder_fds;
    for (auto& [id, s] : streams_) {
      if (paused_) break;  // output waits in its pipes until the host is back
      bool can_send = s->window.sendable() > 0 && out_bytes_ < kOutQueueCap;
      if (s->kind == Stream::Kind::kActivity) {
        // Due records wait for a window that holds the oldest of them (kWindow wakes us).
        int due = recorder_->MillisUntilDue(MonotonicMicros());
        bool fits = out_bytes_ < kOutQueueCap && s->window.sendable() >= recorder_->FrontBytes();
        if (due >= 0 && (due > 0 || fits) && (timeout < 0 || due < timeout)) timeout = due;
        continue;
      }
      if ((s->kind == Stream::Kind::kFileRead || s->kind == Stream::Kind::kBuffer) && can_send) {
        timeout = 0;
      }
      if (s->kind == Stream::Kind::kWatch) {
        if (!s->records.empty() && can_send) timeout = 0;
        if (s->watch && !s->watch_over) {
          fds.push_back({s->watch->fd(), POLLIN, 0});
          owners.push_back({id, 3});
        }
        continue;
      }
      if (s->kind != Stream::Kind::kExec) continue;
      if (s->exited && can_send) timeout = InTtyGrace(*s) ? 10 : 0;
      for (int which = 0; which < 2; ++which) {
        if (s->out_fd[which] >= 0 && can_send) {
          fds.push_back({s->out_fd[which], POLLIN, 0});
          owners.push_back({id, which});
        }
      }
      if (s->stdin_fd >= 0 && !s->stdin_buf.empty()) {
        fds.push_back({s->stdin_fd, POLLOUT, 0});
        owners.push_back({id, 2});
      }
    }
    bool can_send = !paused_ && out_bytes_ < kOutQueueCap;
    int net_timeout = net_.AddPollFds(&fds, can_send);
    if (net_timeout >= 0 && (timeout < 0 || net_timeout < timeout)) timeout = net_timeout;
    if (recorder_wait >= 0 && (timeout < 0 || recorder_wait < timeout)) timeout = recorder_wait;
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      return std::string("poll: ") + strerror(errno);
    }
    if (fds[0].revents & (POLLHUP | POLLERR)) {
      // The host end is gone (airlockd stopped or restarted). Whatever was half-sent either way
      // is lost: start over, and say hello to the next host as at boot.
      return "the host went away";
    }
    if (fds[0].revents & POLLIN) {
      ssize_t n = read(channel_fd_, inbuf.data(), inbuf.size());
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        return std::string("read from channel: ") + strerror(errno);
      }
      std::span<const uint8_t> input(inbuf.data(), n > 0 ? static_cast<size_t>(n) : 0);
      Frame frame;
      std::string error;
      for (;;) {
        FrameParser::Result result = parser_.Next(&input, &frame);
        if (result == FrameParser::Result::kNeedMore) break;
        if (result == FrameParser::Result::kError) {
          error = parser_.error();
        } else {
          HandleFrame(frame, &error);
        }
        if (!error.empty()) {
          SendMessage(0, ProtocolErrorMessage{error.substr(0, kMaxReasonBytes)});
          std::string ignored;
          FlushOut(&ignored);
          return "protocol error: " + error;
        }
      }
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info;
      while (read(sigchld_fd_, &info, sizeof(info)) > 0) {
      }
    }
    Reap();  // cheap, and also catches a SIGCHLD that raced with the pipes
    net_.HandlePoll(fds, can_send && !paused_);
    for (size_t i = 0; i < recorder_fds; ++i) {
      if (fds[2 + i].revents != 0) {
        recorder_->ReadReady();
        break;
      }
    }
    for (size_t i = 0; i < owners.size(); ++i) {
      const pollfd& p = fds[i + 2 + recorder_fds];
      auto it = streams_.find(owners[i].id);
      if (p.revents == 0 || it == streams_.end()) continue;
      if (owners[i].which == 3) {
        ReadWatch(owners[i].id, *it->second);
      } else if (owners[i].which == 2) {
        PumpStdin(*it->second);
      } else {
        PumpOutput(owners[i].id, *it->second, owners[i].which, false);
      }
    }
    std::vector<uint32_t> ids;
    for (auto& [id, s] : streams_) {
      if (!paused_) ids.push_back(id);
    }
    for (uint32_t id : ids) {
      auto it = streams_.find(id);
      if (it == streams_.end()) continue;
      Stream& s = *it->second;
      if (s.kind == Stream::Kind::kFileRead) {
        PumpFileRead(id, s);
        continue;
      }
      if (s.kind == Stream::Kind::kBuffer) {
        PumpBuffer(id, s);
        continue;
      }
      if (s.kind == Stream::Kind::kWatch) {
        PumpWatch(id, s);
        continue;
      }
      if (s.kind == Stream::Kind::kActivity) {
        PumpActivity(id, s);
        continue;
      }
      if (s.kind != Stream::Kind::kExec) {
        GrantInput(id, s, false);
        continue;
      }
      if (s.input_ended && s.stdin_buf.empty()) CloseFd(&s.stdin_fd);
      GrantInput(id, s, s.stdin_buf.empty());
      if (!s.exited) continue;
      PumpOutput(id, s, 0, true);
      PumpOutput(id, s, 1, true);
      if (s.out_fd[0] < 0 && s.out_fd[1] < 0) {
        FlushActivity();  // what the command did reaches the host before its exit does
        uint64_t oom_kills = CommandOomKills() - s.oom_kills_at_start;
        if (WIFSIGNALED(s.wait_status)) {
          bool oom = WTERMSIG(s.wait_status) == SIGKILL && oom_kills > 0;
          FinishStream(id, ExitKind::kSignaled, WTERMSIG(s.wait_status),
                       oom ? "killed by the out-of-memory killer: the command used all the memory "
                             "the session allows"
                           : "");
        } else {
          // The command lived on, but a process of it was killed (an `apt-get install` whose
          // dpkg died): the exit says which, as the command's own error may not.
          FinishStream(id, ExitKind::kExited, WEXITSTATUS(s.wait_status),
                       oom_kills > 0 ? OomKillsSince(s.started_us, oom_kills) : "");
        }
      }
    }
    std::string error;
    if (!FlushOut(&error)) return error;
  }
}

}  // namespace airlock::guest
