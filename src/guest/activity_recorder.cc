#include "src/guest/activity_recorder.h"

#include <fcntl.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <sys/fanotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>

namespace airlock::guest {
namespace {

uint64_t NowMonotonicMicros() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
}

int64_t NowUnixMillis() {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

// What /proc/self/fd/FD (or any link) points at; "" when it cannot be read.
std::string ReadLink(const std::string& link) {
  char buf[kMaxFsPathBytes + 1];
  ssize_t n = readlink(link.c_str(), buf, sizeof(buf));
  if (n <= 0 || static_cast<size_t>(n) > kMaxFsPathBytes) return "";
  return std::string(buf, n);
}

std::string FdPath(int fd) { return ReadLink("/proc/self/fd/" + std::to_string(fd)); }

std::string ReadProcFile(const std::string& path, size_t max) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out(max, '\0');
  size_t got = 0;
  while (got < max) {
    ssize_t n = read(fd, out.data() + got, max - got);
    if (n <= 0) break;
    got += n;
  }
  close(fd);
  out.resize(got);
  return out;
}

// argv from /proc/PID/cmdline, cut at the protocol's caps.
std::vector<std::string> ReadArgv(uint32_t pid) {
  std::string raw = ReadProcFile("/proc/" + std::to_string(pid) + "/cmdline",
                                 kMaxActivityArgvBytes + kMaxActivityArgs);
  std::vector<std::string> argv;
  size_t bytes = 0, start = 0;
  while (start < raw.size() && argv.size() < kMaxActivityArgs) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    std::string arg = raw.substr(start, end - start);
    if (bytes + arg.size() > kMaxActivityArgvBytes) {
      arg.resize(kMaxActivityArgvBytes - bytes);
      argv.push_back(std::move(arg));
      break;
    }
    bytes += arg.size();
    argv.push_back(std::move(arg));
    start = end + 1;
  }
  return argv;
}

// Calls each(event) for every event a read of a fanotify group returned; returns how many of
// them said the kernel's queue overflowed.
template <typename Each>
int ForEachFanotifyEvent(char* buf, ssize_t n, Each each) {
  int overflows = 0;
  for (auto* m = reinterpret_cast<fanotify_event_metadata*>(buf); FAN_EVENT_OK(m, n);
       m = FAN_EVENT_NEXT(m, n)) {
    if (m->vers != FANOTIFY_METADATA_VERSION) continue;
    if (m->mask & FAN_Q_OVERFLOW) {
      ++overflows;
    } else {
      each(m);
    }
  }
  return overflows;
}

bool StartsWithDir(std::string_view path, std::string_view dir) {
  return path.substr(0, dir.size()) == dir &&
         (path.size() == dir.size() || path[dir.size()] == '/');
}

}  // namespace

bool IsRecordedPath(std::string_view path) {
  return StartsWithDir(path, "/workspace") || StartsWithDir(path, "/root") ||
         StartsWithDir(path, "/home");
}

std::string GuestPathOfLayer(std::string_view disk_path) {
  // The root overlay's upper layer is the disk's /upper; the workspace's is /workspace/upper.
  for (auto [layer, mount] :
       {std::pair<std::string_view, std::string_view>{"/workspace/upper", "/workspace"},
        {"/upper", ""}}) {
    if (!StartsWithDir(disk_path, layer)) continue;
    std::string rest(disk_path.substr(layer.size()));
    std::string path = std::string(mount) + rest;
    return path.empty() ? "/" : path;
  }
  return "";
}

ActivityRecorder::~ActivityRecorder() {
  for (int fd : {proc_fd_, files_fd_, entries_fd_, disk_fd_}) {
    if (fd >= 0) close(fd);
  }
}

std::string ActivityRecorder::Start(int session_disk_root) {
  if (proc_fd_ < 0) {
    int fd = socket(PF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_CONNECTOR);
    if (fd < 0) return std::string("process events: socket: ") + strerror(errno);
    int size = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size));  // best effort
    sockaddr_nl address = {};
    address.nl_family = AF_NETLINK;
    address.nl_groups = CN_IDX_PROC;
    address.nl_pid = static_cast<uint32_t>(getpid());
    // nlmsghdr, cn_msg, then the operation: laid out by hand (cn_msg ends in a flexible array).
    alignas(nlmsghdr) char listen[NLMSG_LENGTH(sizeof(cn_msg) + sizeof(proc_cn_mcast_op))] = {};
    auto* header = reinterpret_cast<nlmsghdr*>(listen);
    header->nlmsg_len = sizeof(listen);
    header->nlmsg_type = NLMSG_DONE;
    header->nlmsg_pid = static_cast<uint32_t>(getpid());
    auto* message = static_cast<cn_msg*>(NLMSG_DATA(header));
    message->id.idx = CN_IDX_PROC;
    message->id.val = CN_VAL_PROC;
    message->len = sizeof(proc_cn_mcast_op);
    proc_cn_mcast_op op = PROC_CN_MCAST_LISTEN;
    memcpy(message->data, &op, sizeof(op));
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        send(fd, listen, sizeof(listen), 0) != static_cast<ssize_t>(sizeof(listen))) {
      int e = errno;
      close(fd);
      errno = e;
      return std::string("process events: ") + strerror(e);
    }
    proc_fd_ = fd;
  }
  if (files_fd_ < 0) {
    // O_NONBLOCK: the kernel opens each event's file in PID 1's read(), and a FIFO opened
    // without it would wait for a writer there.
    files_fd_ = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK,
                              O_RDONLY | O_LARGEFILE | O_CLOEXEC | O_NOATIME | O_NONBLOCK);
    if (files_fd_ < 0) return std::string("file events: fanotify: ") + strerror(errno);
  }
  if (entries_fd_ < 0) {
    entries_fd_ = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME,
                                O_RDONLY | O_CLOEXEC);
    if (entries_fd_ < 0) return std::string("file entry events: fanotify: ") + strerror(errno);
    // A descriptor open for reading, not O_PATH: fanotify_mark and open_by_handle_at take no
    // O_PATH descriptor.
    if (session_disk_root >= 0) {
      disk_fd_ = open(("/proc/self/fd/" + std::to_string(session_disk_root)).c_str(),
                      O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    int disk = disk_fd_;
    disk_prefix_ = disk < 0 ? "" : FdPath(disk);
    if (disk_prefix_ == "/") disk_prefix_.clear();
    if (disk < 0 ||
        fanotify_mark(entries_fd_, FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
                      FAN_CREATE | FAN_DELETE | FAN_RENAME | FAN_ONDIR, disk, nullptr) != 0) {
      int e = disk < 0 ? ENOENT : errno;
      close(entries_fd_);  // tried again whole by the next Start
      entries_fd_ = -1;
      errno = e;
      return std::string("file entry events: mark the session disk: ") + strerror(e);
    }
  }
  // Marks are per filesystem: the root overlay, and the workspace's once it is mounted (a mark
  // on a filesystem already marked changes nothing).
  for (const char* path : {"/", "/workspace"}) {
    if (fanotify_mark(files_fd_, FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
                      FAN_CLOSE_WRITE | FAN_CLOSE_NOWRITE, AT_FDCWD, path) != 0 &&
        errno != ENOENT) {
      return std::string("file events: mark ") + path + ": " + strerror(errno);
    }
  }
  return "";
}

int ActivityRecorder::AddPollFds(std::vector<pollfd>* fds, uint64_t now_us) const {
  if (proc_fd_ >= 0) fds->push_back({proc_fd_, POLLIN, 0});
  uint64_t due = files_read_us_ + kFileReadPauseMicros;
  if (now_us < due) return static_cast<int>((due - now_us + 999) / 1000);
  for (int fd : {files_fd_, entries_fd_}) {
    if (fd >= 0) fds->push_back({fd, POLLIN, 0});
  }
  return -1;
}

void ActivityRecorder::ReadReady() {
  // Processes first, so that the file events of one just started know its command; an ended
  // one is kept a while for the file events that follow its exit.
  if (proc_fd_ >= 0) ReadProcessEvents();
  if (files_fd_ >= 0) ReadFileEvents();
  if (entries_fd_ >= 0) ReadEntryEvents();
  files_read_us_ = NowMonotonicMicros();
  ForgetEnded();
  FlushLost();
}

void ActivityRecorder::NoteCommand(pid_t pid, uint64_t exec_id) {
  if (!Track(static_cast<uint32_t>(pid))) return;
  Process& p = processes_[static_cast<uint32_t>(pid)];
  p = Process{};
  p.exec_id = exec_id;
  p.parent = 1;
}

void ActivityRecorder::NoteAgentOwn(pid_t pid) {
  if (!Track(static_cast<uint32_t>(pid))) return;
  Process& p = processes_[static_cast<uint32_t>(pid)];
  p = Process{};
  p.own = true;
  p.parent = 1;
}

bool ActivityRecorder::IsOwn(uint32_t pid) const {
  auto it = processes_.find(pid);
  return it != processes_.end() && it->second.own;
}

uint64_t ActivityRecorder::ExecOf(uint32_t pid) const {
  auto it = processes_.find(pid);
  return it == processes_.end() ? 0 : it->second.exec_id;
}

std::string ActivityRecorder::NameOf(uint32_t pid) {
  auto it = processes_.find(pid);
  if (it != processes_.end() && !it->second.name.empty()) return it->second.name;
  std::string name = ReadProcFile("/proc/" + std::to_string(pid) + "/comm", 64);
  if (!name.empty() && name.back() == '\n') name.pop_back();
  if (name.size() > kMaxActivityProcessBytes) name.resize(kMaxActivityProcessBytes);
  return name;
}

void ActivityRecorder::StartOf(uint32_t pid) {
  auto it = processes_.find(pid);
  if (it == processes_.end() && Track(pid)) it = processes_.emplace(pid, Process{}).first;
  ActivityRecord r;
  r.kind = ActivityKind::kProcessStart;
  r.unix_ms = NowUnixMillis();
  r.pid = pid;
  r.argv = ReadArgv(pid);
  r.path = ReadLink("/proc/" + std::to_string(pid) + "/exe");
  if (r.path.empty() || r.path[0] != '/') r.path.clear();  // it ended before it could be read
  std::string name = ReadProcFile("/proc/" + std::to_string(pid) + "/comm", 64);
  if (!name.empty() && name.back() == '\n') name.pop_back();
  if (name.size() > kMaxActivityProcessBytes) name.resize(kMaxActivityProcessBytes);
  r.process = name;
  if (it != processes_.end()) {
    r.exec_id = it->second.exec_id;
    r.parent = it->second.parent;
    it->second.name = name;
    it->second.recorded = true;
  }
  Add(std::move(r));
}

void ActivityRecorder::ReadProcessEvents() {
  alignas(nlmsghdr) char buf[16384];
  for (int reads = 0; reads < kMaxReadsPerSource; ++reads) {
    sockaddr_nl from = {};
    socklen_t from_len = sizeof(from);
    ssize_t n =
        recvfrom(proc_fd_, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) {
      if (errno == ENOBUFS) {
        Lost("the kernel's queue of process events overflowed (times)", 1);
        continue;
      }
      return;  // EAGAIN: nothing more now
    }
    if (from.nl_pid != 0) continue;  // only the kernel speaks for the connector
    int len = static_cast<int>(n);
    for (nlmsghdr* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_NOOP) continue;
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(cn_msg) + sizeof(proc_event))) continue;
      cn_msg message;
      memcpy(&message, NLMSG_DATA(h), sizeof(message));
      if (message.id.idx != CN_IDX_PROC || message.id.val != CN_VAL_PROC ||
          message.len < sizeof(proc_event)) {
        continue;
      }
      proc_event event;  // copied: in the datagram it is not aligned for its 64-bit fields
      memcpy(&event, static_cast<char*>(NLMSG_DATA(h)) + sizeof(cn_msg), sizeof(event));
      switch (event.what) {
        case proc_event::PROC_EVENT_FORK: {
          const auto& f = event.event_data.fork;
          if (f.child_pid != f.child_tgid) break;  // a thread
          uint32_t child = static_cast<uint32_t>(f.child_tgid);
          if (!Track(child)) break;
          Process& p = processes_[child];
          uint32_t parent = static_cast<uint32_t>(f.parent_tgid);
          // A command's own process (or a helper of the agent's) was noted when the agent
          // forked it: keep what it is.
          bool noted =
              parent == 1 && p.parent == 1 && (p.exec_id != 0 || p.own) && p.exited_us == 0;
          if (!noted) {
            p.exec_id = ExecOf(parent);
            p.own = false;
          }
          p.parent = parent;
          p.name.clear();
          p.recorded = false;
          p.exited_us = 0;
          break;
        }
        case proc_event::PROC_EVENT_EXEC:
          StartOf(static_cast<uint32_t>(event.event_data.exec.process_tgid));
          break;
        case proc_event::PROC_EVENT_EXIT: {
          const auto& x = event.event_data.exit;
          if (x.process_pid != x.process_tgid) break;  // a thread
          uint32_t pid = static_cast<uint32_t>(x.process_tgid);
          auto it = processes_.find(pid);
          if (it == processes_.end() || it->second.exited_us != 0) break;
          if (it->second.recorded) {
            ActivityRecord r;
            r.kind = ActivityKind::kProcessExit;
            r.unix_ms = NowUnixMillis();
            r.pid = pid;
            r.exec_id = it->second.exec_id;
            r.process = it->second.name;
            uint32_t status = x.exit_code;
            r.code = (status & 0x7f) != 0 ? -static_cast<int32_t>(status & 0x7f)
                                          : static_cast<int32_t>((status >> 8) & 0xff);
            Add(std::move(r));
          }
          // Kept a while: its last file events may still be in the other queues.
          it->second.exited_us = NowMonotonicMicros();
          break;
        }
        default:
          break;
      }
    }
  }
}

bool ActivityRecorder::Track(uint32_t pid) {
  if (processes_.size() < kMaxTrackedProcesses || processes_.contains(pid)) return true;
  // Full: forget the processes that have ended (their exits may have been lost).
  std::erase_if(processes_, [](const auto& entry) {
    return entry.second.exited_us != 0 ||
           (kill(static_cast<pid_t>(entry.first), 0) != 0 && errno == ESRCH);
  });
  if (processes_.size() < kMaxTrackedProcesses) return true;
  Lost("processes beyond what the recorder follows at once were not attributed", 1);
  return false;
}

void ActivityRecorder::ForgetEnded() {
  uint64_t now = NowMonotonicMicros();
  std::erase_if(processes_, [now](const auto& entry) {
    return entry.second.exited_us != 0 && now - entry.second.exited_us > kEndedProcessMicros;
  });
}

void ActivityRecorder::ReadFileEvents() {
  // Small reads: each event in the buffer is a descriptor open in PID 1 until it is looked at.
  alignas(fanotify_event_metadata) char buf[2048];
  for (int reads = 0; reads < kMaxReadsPerSource; ++reads) {
    ssize_t n = read(files_fd_, buf, sizeof(buf));
    if (n <= 0) {
      // The kernel could not open an event's file for us: that event is gone.
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        Lost("a file event whose file could not be opened", 1);
        continue;
      }
      return;
    }
    int overflows = ForEachFanotifyEvent(buf, n, [&](fanotify_event_metadata* m) {
      if (m->fd < 0) return;
      uint32_t pid = static_cast<uint32_t>(m->pid);
      std::string path;
      // The agent's own reads and writes are not a program's.
      if (pid != 1 && !IsOwn(pid)) path = FdPath(m->fd);
      close(m->fd);
      constexpr std::string_view kDeleted = " (deleted)";
      if (path.size() > kDeleted.size() &&
          std::string_view(path).substr(path.size() - kDeleted.size()) == kDeleted) {
        path.resize(path.size() - kDeleted.size());  // closed after it was removed
      }
      if (path.empty() || !IsRecordedPath(path)) return;
      ActivityRecord r;
      r.kind = (m->mask & FAN_CLOSE_WRITE) ? ActivityKind::kWrite : ActivityKind::kRead;
      r.unix_ms = NowUnixMillis();
      r.pid = pid;
      r.exec_id = ExecOf(pid);
      r.process = NameOf(pid);
      r.path = std::move(path);
      Add(std::move(r));
    });
    if (overflows > 0) Lost("the kernel's queue of file events overflowed (times)", overflows);
  }
}

namespace {

// One directory-and-name record of a FAN_REPORT_DFID_NAME event.
struct EntryName {
  file_handle* handle = nullptr;
  std::string name;
};

}  // namespace

void ActivityRecorder::ReadEntryEvents() {
  alignas(fanotify_event_metadata) char buf[8192];
  int disk = disk_fd_;
  for (int reads = 0; reads < kMaxReadsPerSource; ++reads) {
    ssize_t n = read(entries_fd_, buf, sizeof(buf));
    if (n <= 0) return;
    int overflows = ForEachFanotifyEvent(buf, n, [&](fanotify_event_metadata* m) {
      uint32_t pid = static_cast<uint32_t>(m->pid);
      if (pid == 1 || IsOwn(pid)) return;
      EntryName from, to;
      char* info = reinterpret_cast<char*>(m) + m->metadata_len;
      char* end = reinterpret_cast<char*>(m) + m->event_len;
      while (info + sizeof(fanotify_event_info_header) <= end) {
        auto* header = reinterpret_cast<fanotify_event_info_header*>(info);
        if (header->len < sizeof(fanotify_event_info_header) || info + header->len > end) break;
        char* record_end = info + header->len;
        auto* fid = reinterpret_cast<fanotify_event_info_fid*>(info);
        auto* handle = reinterpret_cast<file_handle*>(fid->handle);
        char* name = reinterpret_cast<char*>(handle) + sizeof(file_handle);
        if (header->len >= sizeof(fanotify_event_info_fid) + sizeof(file_handle) &&
            name + handle->handle_bytes < record_end) {
          name += handle->handle_bytes;
          EntryName entry{handle, std::string(name, strnlen(name, record_end - name))};
          if (header->info_type == FAN_EVENT_INFO_TYPE_NEW_DFID_NAME) {
            to = std::move(entry);
          } else if (header->info_type == FAN_EVENT_INFO_TYPE_DFID_NAME ||
                     header->info_type == FAN_EVENT_INFO_TYPE_OLD_DFID_NAME) {
            from = std::move(entry);
          }
        }
        info = record_end;
      }
      // Each side's path as the guest sees it ("" outside the layers), and whether the entry
      // there is a whiteout (overlayfs's mark of an image file removed). *gone: the directory
      // itself was removed before the event was read.
      auto resolve = [&](const EntryName& e, bool* whiteout, bool* gone) -> std::string {
        if (e.handle == nullptr || disk < 0) return "";
        int dir = open_by_handle_at(disk, e.handle, O_PATH | O_CLOEXEC);
        if (dir < 0) {
          *gone = true;
          return "";
        }
        std::string dir_path = FdPath(dir);
        struct stat st;
        if (whiteout != nullptr) {
          *whiteout = fstatat(dir, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                      S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0);
        }
        close(dir);
        if (dir_path.compare(0, disk_prefix_.size(), disk_prefix_) != 0) return "";
        std::string guest =
            GuestPathOfLayer(std::string_view(dir_path).substr(disk_prefix_.size()));
        if (guest.empty()) return "";
        return (guest == "/" ? "" : guest) + "/" + e.name;
      };
      bool whiteout = false, gone = false;
      std::vector<ActivityRecord> records;
      if (m->mask & FAN_RENAME) {
        bool unused = false;
        std::string old_path = resolve(from, &unused, &gone);
        std::string new_path = resolve(to, &whiteout, &gone);
        if (old_path.empty() && !new_path.empty() && whiteout) {
          // A file of the image removed.
          records.push_back({.kind = ActivityKind::kRemove, .path = new_path});
        } else if (!old_path.empty() && !new_path.empty()) {
          records.push_back({.kind = ActivityKind::kRename, .path = old_path, .target = new_path});
        }
        // Else overlayfs's own: a copy-up, or one side of an exchange.
      } else {
        std::string path = resolve(from, (m->mask & FAN_CREATE) ? &whiteout : nullptr, &gone);
        if (!path.empty()) {
          // Events the kernel merged (made and removed before they were read) are both said.
          if ((m->mask & FAN_CREATE) && !whiteout) {
            records.push_back({.kind = ActivityKind::kCreate, .path = path});
          }
          if ((m->mask & FAN_DELETE) || whiteout) {
            records.push_back({.kind = ActivityKind::kRemove, .path = path});
          }
        }
      }
      if (gone) {
        Lost("file events in directories removed before they were read (paths unknown)", 1);
      }
      for (ActivityRecord& r : records) {
        if (!IsRecordedPath(r.path) && !IsRecordedPath(r.target)) continue;
        if (r.path.size() > kMaxFsPathBytes || r.target.size() > kMaxFsPathBytes) continue;
        r.unix_ms = NowUnixMillis();
        r.pid = pid;
        r.exec_id = ExecOf(pid);
        r.process = NameOf(pid);
        Add(std::move(r));
      }
    });
    if (overflows > 0) Lost("the kernel's queue of file events overflowed (times)", overflows);
  }
}

void ActivityRecorder::Lost(const std::string& why, uint64_t count) { lost_[why] += count; }

void ActivityRecorder::FlushLost() {
  if (lost_.empty() || backlog_bytes_ + 1024 > kMaxActivityBacklog) return;
  std::map<std::string, uint64_t> lost;
  lost.swap(lost_);
  for (const auto& [why, count] : lost) {
    ActivityRecord r;
    r.kind = ActivityKind::kLost;
    r.unix_ms = NowUnixMillis();
    r.code = static_cast<int32_t>(std::min<uint64_t>(count, INT32_MAX));
    r.path = why;
    Add(std::move(r));
  }
}

void ActivityRecorder::Add(ActivityRecord record) {
  std::string encoded = EncodeActivityRecord(record);
  if (record.kind != ActivityKind::kLost &&
      backlog_bytes_ + encoded.size() + 1024 > kMaxActivityBacklog) {
    Lost("the host did not take records in time", 1);
    return;
  }
  if (backlog_.empty()) oldest_us_ = NowMonotonicMicros();
  backlog_bytes_ += encoded.size();
  backlog_.push_back(std::move(encoded));
}

int ActivityRecorder::MillisUntilDue(uint64_t now_us) const {
  if (backlog_.empty()) return -1;
  if (backlog_bytes_ >= kActivityBatchBytes || now_us >= oldest_us_ + kActivityBatchMicros) {
    return 0;
  }
  return static_cast<int>((oldest_us_ + kActivityBatchMicros - now_us + 999) / 1000);
}

std::string ActivityRecorder::Take(size_t max_bytes) {
  std::string out;
  while (!backlog_.empty() && out.size() + backlog_.front().size() <= max_bytes) {
    out += backlog_.front();
    backlog_bytes_ -= backlog_.front().size();
    backlog_.pop_front();
  }
  FlushLost();
  return out;
}

}  // namespace airlock::guest
