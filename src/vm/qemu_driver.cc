#include "src/vm/qemu_driver.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/log.h"
#include "src/common/unique_fd.h"
#include "src/vm/host_cgroup.h"
#include "src/vm/qmp_client.h"

namespace airlock {
namespace {

// Descriptor numbers inside QEMU.
constexpr int kChannelFd = 3;
constexpr int kQmpFd = 4;
constexpr int kConsoleFd = 5;
constexpr int kDiskFd = 6;
constexpr int kDiskReadOnlyFd = 7;  // QEMU also opens fdset members read-only
constexpr int kWorkspaceFd = 8;
constexpr int kImageFd = 9;  // the image store is not readable by QEMU's uid: it gets a descriptor
constexpr int kKernelFd = 10;  // the kernel and initramfs too (the jail has no path to them)
constexpr int kInitrdFd = 11;
constexpr int kExecFd = 12;    // QEMU's binary, executed by descriptor; closed by the exec
constexpr int kMemoryFd = 13;  // the guest's RAM as a memfd (VmConfig::memory_fd), if any
// Volume slot i: its disk at kVolumeFd + 2i (read-write, or read-only for a read-only one), and
// read-only at kVolumeFd + 2i + 1 for a read-write one.
constexpr int kVolumeFd = 14;
constexpr int kSources = 11 + 2 * kVolumeSlots;
// uids (and gids) of jailed VMs: each running VM has one of its own.
constexpr uid_t kJailUidBase = 700000;
constexpr uid_t kJailUids = 65536;
// How much console and VMM output is kept for error messages.
constexpr size_t kLogCap = 64 * 1024;
// A VM that outlives airlockd: the files of its runtime directory.
constexpr char kChannelSocket[] = "channel.sock";
constexpr char kQmpSocket[] = "qmp.sock";
constexpr char kConsoleSocket[] = "console.sock";
constexpr char kVmmLog[] = "vmm.log";
constexpr char kRecordFile[] = "vm.json";
constexpr size_t kMaxRecord = 64 * 1024;

// A bounded tail of a byte stream.
class LogTail {
 public:
  void Append(const char* p, size_t n) {
    absl::MutexLock lock(&mu_);
    data_.append(p, n);
    if (data_.size() > kLogCap) data_.erase(0, data_.size() - kLogCap);
  }
  std::string LastLines(size_t lines) const {
    absl::MutexLock lock(&mu_);
    size_t at = data_.size();
    while (lines > 0 && at > 0) {
      at = data_.rfind('\n', at - 1);
      if (at == std::string::npos) {
        at = 0;
        break;
      }
      --lines;
    }
    std::string out = data_.substr(at);
    while (!out.empty() && (out[0] == '\n' || out[0] == '\r')) out.erase(0, 1);
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::string data_ ABSL_GUARDED_BY(mu_);
};

// waitid's P_PIDFD, which older headers lack.
constexpr int kPidfdIdType = 3;

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

int PidfdKill(int pidfd) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0));
}

// A string member of a JSON object (a QMP answer, a record); empty when it is missing or not a
// string (never throws).
std::string JsonText(const nlohmann::json& j, const char* key) {
  auto it = j.is_object() ? j.find(key) : j.end();
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// When the process started (clock ticks since boot; /proc/PID/stat field 22): with the pid, it
// names one process for good, so a recorded VM is never confused with a recycled pid.
std::optional<uint64_t> ProcessStartTime(pid_t pid) {
  absl::StatusOr<std::string> stat = ReadFileToString(absl::StrCat("/proc/", pid, "/stat"), 4096);
  if (!stat.ok()) return std::nullopt;
  size_t close = stat->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<std::string> fields = absl::StrSplit(stat->substr(close + 1), ' ', absl::SkipEmpty());
  uint64_t start;
  // Fields after the command start at field 3 (the state).
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &start)) return std::nullopt;
  return start;
}

// The address of name in the directory open as dir_fd, through /proc/self/fd: short enough for
// sockaddr_un whatever the directory's own path.
sockaddr_un AddressIn(int dir_fd, const char* name) {
  std::string path = absl::StrCat("/proc/self/fd/", dir_fd, "/", name);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), std::min(path.size() + 1, sizeof(addr.sun_path) - 1));
  return addr;
}

absl::StatusOr<UniqueFd> ListenAt(int dir_fd, const char* name) {
  sockaddr_un addr = AddressIn(dir_fd, name);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket");
  unlinkat(dir_fd, name, 0);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoStatus("bind", name);
  }
  if (listen(fd.get(), 1) != 0) return ErrnoStatus("listen", name);
  return fd;
}

absl::StatusOr<UniqueFd> ConnectAt(int dir_fd, const char* name) {
  sockaddr_un addr = AddressIn(dir_fd, name);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket");
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoStatus("connect to the VM's", name);
  }
  return fd;
}

// A uid (and gid) of the jail range held by one VM, given back when the object goes. Each
// process starts its search at a random place in the range, so that two airlockd on one host
// (tests) rarely pick the same one.
class JailUid {
 public:
  static std::optional<JailUid> Take() {
    absl::MutexLock lock(&mu_);
    static uid_t next = [] {
      uint32_t r = 0;
      if (getrandom(&r, sizeof(r), 0) != sizeof(r)) r = static_cast<uint32_t>(getpid());
      return static_cast<uid_t>(r % kJailUids);
    }();
    for (uid_t i = 0; i < kJailUids; ++i) {
      uid_t uid = kJailUidBase + (next + i) % kJailUids;
      if (Used().insert(uid).second) {
        next = (next + i + 1) % kJailUids;
        return JailUid(uid);
      }
    }
    return std::nullopt;
  }
  // The uid of a VM found again (its record names it).
  static std::optional<JailUid> Adopt(uid_t uid) {
    if (uid < kJailUidBase || uid >= kJailUidBase + kJailUids) return std::nullopt;
    absl::MutexLock lock(&mu_);
    Used().insert(uid);
    return JailUid(uid);
  }
  JailUid(JailUid&& other) noexcept : uid_(std::exchange(other.uid_, 0)) {}
  JailUid& operator=(JailUid&& other) noexcept {
    std::swap(uid_, other.uid_);
    return *this;
  }
  ~JailUid() {
    if (uid_ == 0) return;
    absl::MutexLock lock(&mu_);
    Used().erase(uid_);
  }
  uid_t uid() const { return uid_; }

 private:
  explicit JailUid(uid_t uid) : uid_(uid) {}
  static std::set<uid_t>& Used() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    static auto* used = new std::set<uid_t>;
    return *used;
  }
  ABSL_CONST_INIT static inline absl::Mutex mu_{absl::kConstInit};
  uid_t uid_;
};

// What a later airlockd needs to find a VM again (the runtime directory's vm.json).
struct VmRecord {
  pid_t pid = 0;
  uint64_t start_time = 0;
  std::string accelerator;
  std::string cgroup;  // the host cgroup's name; empty: none
  uid_t uid = 0;       // its jail's uid; 0: not jailed
  dev_t disk_dev = 0;  // the writable disk, which only the VM may still hold open
  ino_t disk_ino = 0;
  // The file the guest's RAM is written into (VmConfig::memory_shared, a resumed session's
  // memory file); 0: none, or one that dies with the VM.
  dev_t memory_dev = 0;
  ino_t memory_ino = 0;
  GuestSync sync;
};

std::string EncodeRecord(const VmRecord& r) {
  nlohmann::json j = {{"pid", r.pid},
                      {"start_time", r.start_time},
                      {"accelerator", r.accelerator},
                      {"cgroup", r.cgroup},
                      {"uid", r.uid},
                      {"disk_dev", static_cast<uint64_t>(r.disk_dev)},
                      {"disk_ino", static_cast<uint64_t>(r.disk_ino)},
                      {"memory_dev", static_cast<uint64_t>(r.memory_dev)},
                      {"memory_ino", static_cast<uint64_t>(r.memory_ino)},
                      {"pids_max", r.sync.pids_max},
                      {"hostname", r.sync.hostname},
                      {"mount_workspace", r.sync.mount_workspace}};
  nlohmann::json volumes = nlohmann::json::array();
  for (const VolumeMount& v : r.sync.volumes) {
    volumes.push_back({{"slot", v.slot}, {"flags", v.flags}, {"path", v.path}});
  }
  j["volumes"] = std::move(volumes);
  return j.dump() + "\n";
}

absl::StatusOr<VmRecord> ReadRecord(const std::string& runtime_dir) {
  std::string path = absl::StrCat(runtime_dir, "/", kRecordFile);
  absl::StatusOr<std::string> text = ReadFileToString(path, kMaxRecord);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError("no VM was recorded (it was being started)");
    }
    return text.status();
  }
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  VmRecord r;
  auto number = [&](const char* key) -> uint64_t {
    auto it = j.is_object() ? j.find(key) : j.end();
    return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
  };
  r.pid = static_cast<pid_t>(number("pid"));
  r.start_time = number("start_time");
  r.accelerator = JsonText(j, "accelerator");
  r.cgroup = JsonText(j, "cgroup");
  r.uid = static_cast<uid_t>(number("uid"));
  r.disk_dev = static_cast<dev_t>(number("disk_dev"));
  r.disk_ino = static_cast<ino_t>(number("disk_ino"));
  r.memory_dev = static_cast<dev_t>(number("memory_dev"));
  r.memory_ino = static_cast<ino_t>(number("memory_ino"));
  r.sync.pids_max = static_cast<uint32_t>(number("pids_max"));
  r.sync.hostname = JsonText(j, "hostname");
  auto mount = j.is_object() ? j.find("mount_workspace") : j.end();
  r.sync.mount_workspace = mount != j.end() && mount->is_boolean() && mount->get<bool>();
  auto volumes = j.is_object() ? j.find("volumes") : j.end();
  if (volumes != j.end() && volumes->is_array()) {
    for (const nlohmann::json& v : *volumes) {
      auto field = [&v](const char* key) -> uint64_t {
        auto it = v.is_object() ? v.find(key) : v.end();
        return it != v.end() && it->is_number_unsigned() ? it->get<uint64_t>() : kVolumeSlots;
      };
      VolumeMount mount_point{.slot = static_cast<uint32_t>(field("slot")),
                              .flags = static_cast<uint32_t>(field("flags")) & kVolumeReadOnly,
                              .path = JsonText(v, "path")};
      if (mount_point.slot < kVolumeSlots && IsVolumeMountPoint(mount_point.path)) {
        r.sync.volumes.push_back(std::move(mount_point));
      }
    }
  }
  if (r.pid <= 1 || r.start_time == 0 || r.accelerator.empty()) {
    return absl::DataLossError(absl::StrCat(path, " is not a VM record"));
  }
  return r;
}

// The file a process holds open with this device and inode, opened read-write again; invalid
// if it holds none.
UniqueFd OpenHeldFile(pid_t pid, dev_t dev, ino_t ino) {
  UniqueFd file;
  std::string fd_dir = absl::StrCat("/proc/", pid, "/fd");
  if (DIR* d = opendir(fd_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string path = absl::StrCat(fd_dir, "/", e->d_name);
      struct stat st;
      if (e->d_name[0] == '.' || stat(path.c_str(), &st) != 0 || st.st_dev != dev ||
          st.st_ino != ino) {
        continue;
      }
      file.reset(open(path.c_str(), O_RDWR | O_CLOEXEC));
      if (file.valid()) break;
    }
    closedir(d);
  }
  return file;
}

// A pidfd for the recorded process if it is still the one that was recorded.
absl::StatusOr<UniqueFd> OpenRecordedProcess(const VmRecord& r) {
  UniqueFd pidfd(PidfdOpen(r.pid));
  if (!pidfd.valid()) return absl::NotFoundError("the VM process is gone");
  // Checked after the pidfd exists: if the start time matches now, the pidfd is that process.
  if (ProcessStartTime(r.pid) != r.start_time) {
    return absl::NotFoundError("the VM process is gone (its pid belongs to another process)");
  }
  return pidfd;
}

// Waits until the process of pidfd has ended (not our child: nothing to reap).
bool WaitGone(int pidfd, int timeout_ms) {
  pollfd p = {pidfd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1;
}

// max-bandwidth for migrating to a file: 1 TB/s, i.e. no throttle.
constexpr int64_t kUnthrottled = int64_t{1} << 40;

// The arguments of migrate-set-capabilities that leave RAM in shared files out of a saved state
// (on), or carry every byte of RAM in it (off). Saving and loading must agree.
nlohmann::json IgnoreSharedRam(bool on) {
  return {{"capabilities",
           nlohmann::json::array({{{"capability", "x-ignore-shared"}, {"state", on}}})}};
}

// Polls a migration (either direction) until it completes or fails. QEMU's reply is bounded
// by QmpClient and read without exceptions.
absl::Status WaitForMigration(QmpClient& qmp, absl::Time deadline) {
  for (;;) {
    absl::StatusOr<nlohmann::json> info =
        qmp.Execute("query-migrate", nlohmann::json::object(), deadline);
    if (!info.ok()) return info.status();
    auto text = [&](const char* key) { return JsonText(*info, key); };
    std::string status = text("status");
    if (status == "completed") return absl::OkStatus();
    if (status == "failed" || status == "cancelled") {
      std::string why = text("error-desc");
      return absl::InternalError(
          absl::StrCat("QEMU's migration ", status, why.empty() ? "" : ": ", why));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("QEMU's migration did not finish in time (status \"", status, "\")"));
    }
    usleep(1000);
  }
}

class QemuVm : public Vm {
 public:
  // child: this process started it (and reaps it). runtime_dir: where a VM that outlives us
  // keeps its sockets and record (vmm.log holds what QEMU printed); empty: none.
  QemuVm(pid_t pid, UniqueFd pidfd, UniqueFd console, UniqueFd stderr_pipe, bool child,
         std::string runtime_dir)
      : pid_(pid),
        pidfd_(std::move(pidfd)),
        console_(std::move(console)),
        stderr_(std::move(stderr_pipe)),
        child_(child),
        runtime_dir_(std::move(runtime_dir)) {
    logger_ = std::thread([this] { LogLoop(); });
  }

  ~QemuVm() override {
    if (detached_) {
      // The VM runs on: only this process's ends go (the channel without failing anything).
      if (channel_) channel_->Stop();
      if (cgroup_) cgroup_->Keep();
    } else {
      PidfdKill(pidfd_.get());
      if (channel_) channel_->Stop();
      if (child_) {
        int status;
        while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
      } else {
        WaitGone(pidfd_.get(), 5000);
      }
    }
    stop_logger_ = true;
    logger_.join();
    if (!detached_ && !runtime_dir_.empty() && StillOwnRuntimeDir()) {
      LogIfFailed(RemoveTree(runtime_dir_), "remove an ended VM's runtime directory");
    }
  }

  void Detach() override {
    if (!runtime_dir_.empty()) detached_ = true;
  }

  absl::Status Adopt(const std::string& runtime_dir, const std::string& host_cgroup, GuestSync sync,
                     absl::Time deadline) override {
    if (runtime_dir_.empty()) {
      return absl::FailedPreconditionError("only a VM with a runtime directory can be handed on");
    }
    absl::StatusOr<VmRecord> record = ReadRecord(runtime_dir_);
    if (!record.ok()) return record.status();
    // What a VM of the same session left.
    LogIfFailed(RemoveTree(runtime_dir), "remove an earlier VM's runtime directory");
    if (absl::Status s = MakeDirectories(DirName(runtime_dir), 0700); !s.ok()) return s;
    if (rename(runtime_dir_.c_str(), runtime_dir.c_str()) != 0) {
      return ErrnoStatus("move the VM's runtime directory to", runtime_dir);
    }
    runtime_dir_ = runtime_dir;
    if (cgroup_) {
      if (absl::Status s = cgroup_->Rename(host_cgroup); !s.ok()) return s;
      if (absl::Status s = cgroup_->SetBackground(false); !s.ok()) return s;
      record->cgroup = cgroup_->name();
    }
    sync.restored = true;
    record->sync = sync;
    sync_ = sync;
    if (absl::Status s = WriteFileAtomically(absl::StrCat(runtime_dir_, "/", kRecordFile),
                                             EncodeRecord(*record), 0600);
        !s.ok()) {
      return s;
    }
    return channel_->Handshake(deadline, sync);
  }

  void AttachQmp(std::unique_ptr<QmpClient> qmp) {
    vmm_version_ = absl::StrCat("qemu ", qmp->version());
    qmp_ = std::move(qmp);
  }
  void AttachChannel(std::shared_ptr<GuestChannel> channel) { channel_ = std::move(channel); }

  // A VM found again: runs the guest if a snapshot left it stopped (a migration still under way
  // is cancelled first). Fails for one that never finished starting.
  absl::Status EnsureRunning(absl::Time deadline) {
    absl::MutexLock lock(&qmp_mu_);
    auto field = [](const absl::StatusOr<nlohmann::json>& r, const char* key) {
      return r.ok() ? JsonText(*r, key) : std::string();
    };
    absl::StatusOr<nlohmann::json> status =
        qmp_->Execute("query-status", nlohmann::json::object(), deadline);
    if (!status.ok()) return status.status();
    std::string state = field(status, "status");
    if (state == "running") return absl::OkStatus();
    if (state != "paused" && state != "postmigrate" && state != "finish-migrate") {
      return absl::FailedPreconditionError(
          absl::StrCat("the VM was left in state \"", state, "\""));
    }
    LogIfFailed(qmp_->Execute("migrate_cancel", nlohmann::json::object(), deadline).status(),
                "cancel the migration of a VM left stopped");
    for (;;) {
      std::string migration =
          field(qmp_->Execute("query-migrate", nlohmann::json::object(), deadline), "status");
      if (migration != "active" && migration != "cancelling" && migration != "setup" &&
          migration != "device" && migration != "pre-switchover") {
        break;
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError("a snapshot of the VM did not stop in time");
      }
      usleep(1000);
    }
    return qmp_->Execute("cont", nlohmann::json::object(), deadline).status();
  }

  absl::Status WaitReady(absl::Time deadline) override {
    absl::Status status = channel_->Handshake(deadline, sync_);
    if (status.ok()) return status;
    Kill(status);
    return Explain(sync_.restored ? "the VM did not resume" : "the VM did not boot", status);
  }

  absl::Status SaveState(int state_fd, absl::Time deadline) override {
    absl::MutexLock lock(&qmp_mu_);
    for (auto [command, arguments] :
         {std::pair<const char*, nlohmann::json>{"stop", nlohmann::json::object()},
          // QEMU throttles migration to 128 MiB/s by default; a file takes what it gets.
          {"migrate-set-parameters", {{"max-bandwidth", kUnthrottled}}},
          // RAM that lives in a shared file is that file's: the state leaves it out.
          {"migrate-set-capabilities", IgnoreSharedRam(shared_memory_.valid())}}) {
      if (absl::StatusOr<nlohmann::json> r = qmp_->Execute(command, arguments, deadline); !r.ok()) {
        return r.status();
      }
    }
    if (absl::Status s = qmp_->PassFd("snapshot", state_fd, deadline); !s.ok()) return s;
    absl::StatusOr<nlohmann::json> r = qmp_->Execute("migrate", {{"uri", "fd:snapshot"}}, deadline);
    if (!r.ok()) return r.status();
    return WaitForMigration(*qmp_, deadline);
  }

  absl::StatusOr<bool> StoppedForDiskSpace(absl::Time deadline) override {
    absl::MutexLock lock(&qmp_mu_);
    absl::StatusOr<nlohmann::json> status =
        qmp_->Execute("query-status", nlohmann::json::object(), deadline);
    if (!status.ok()) return status.status();
    // The session disk's werror policy is QEMU's default, "enospc": only a full host disk stops
    // the guest; other write errors go to the guest as errors.
    return JsonText(*status, "status") == "io-error";
  }

  absl::Status Continue(absl::Time deadline) override {
    {
      absl::MutexLock lock(&qmp_mu_);
      absl::StatusOr<nlohmann::json> r = qmp_->Execute("cont", nlohmann::json::object(), deadline);
      if (!r.ok()) return r.status();
    }
    GuestSync sync = sync_;
    sync.restored = true;
    return channel_->Handshake(deadline, sync);
  }

  // Loads a saved state into a QEMU started with -incoming defer -S, and starts the guest
  // unless `hold`. ram_apart: the state leaves the RAM out (the VM maps it from
  // VmConfig::memory_fd).
  absl::Status Restore(int state_fd, bool ram_apart, bool hold, absl::Time deadline) {
    absl::MutexLock lock(&qmp_mu_);
    if (!runtime_dir_.empty()) {
      // The guest must find its port connected when its state loads, as it was when saved:
      // otherwise it sees the host go away and starts its side over.
      for (;;) {
        absl::StatusOr<nlohmann::json> chardevs =
            qmp_->Execute("query-chardev", nlohmann::json::object(), deadline);
        if (!chardevs.ok()) return chardevs.status();
        bool connected = false;
        for (const nlohmann::json& c : chardevs->is_array() ? *chardevs : nlohmann::json::array()) {
          if (JsonText(c, "label") == "channel") {
            connected = !absl::StartsWith(JsonText(c, "filename"), "disconnected:");
          }
        }
        if (connected) break;
        if (absl::Now() > deadline) {
          return absl::DeadlineExceededError("QEMU did not take the channel's connection");
        }
        usleep(500);
      }
    }
    if (absl::StatusOr<nlohmann::json> r =
            qmp_->Execute("migrate-set-capabilities", IgnoreSharedRam(ram_apart), deadline);
        !r.ok()) {
      return r.status();
    }
    if (absl::Status s = qmp_->PassFd("state", state_fd, deadline); !s.ok()) return s;
    absl::StatusOr<nlohmann::json> r =
        qmp_->Execute("migrate-incoming", {{"uri", "fd:state"}}, deadline);
    if (!r.ok()) return r.status();
    if (absl::Status s = WaitForMigration(*qmp_, deadline); !s.ok()) return s;
    if (hold) return absl::OkStatus();
    return qmp_->Execute("cont", nlohmann::json::object(), deadline).status();
  }

  absl::Status LoadState(int state_fd, absl::Time deadline) override {
    if (absl::Status s = Restore(state_fd, incoming_ram_apart_, hold_, deadline); !s.ok()) {
      return Explain("the snapshot could not be restored", s);
    }
    return absl::OkStatus();
  }
  // How LoadState loads (VmConfig::memory_fd and memory_shared, hold).
  void set_incoming(bool ram_apart, bool hold) {
    incoming_ram_apart_ = ram_apart;
    hold_ = hold;
  }

  GuestChannel& channel() override { return *channel_; }
  int shared_memory_fd() const override { return shared_memory_.get(); }
  void set_shared_memory(UniqueFd memory) { shared_memory_ = std::move(memory); }
  std::string accelerator() const override { return accelerator_; }
  std::string vmm_version() const override { return vmm_version_; }
  void set_accelerator(std::string accelerator) { accelerator_ = std::move(accelerator); }
  void set_sync(GuestSync sync) { sync_ = std::move(sync); }
  void set_cgroup(std::unique_ptr<HostCgroup> cgroup) { cgroup_ = std::move(cgroup); }
  // Given back once the process is gone (after ~QemuVm reaped it).
  void set_jail_uid(std::optional<JailUid> uid) { jail_uid_ = std::move(uid); }
  // The runtime directory itself, held open (its inode is then never another's).
  void set_run_dir(UniqueFd dir) { run_dir_ = std::move(dir); }
  // Whether runtime_dir_ is still the directory this VM ran in: a new VM of the same session
  // makes its own under the same name, maybe while this one is still going away (a reference
  // held a moment longer), and must keep it.
  bool StillOwnRuntimeDir() const {
    struct stat now, own;
    if (run_dir_.valid()) {
      return stat(runtime_dir_.c_str(), &now) == 0 && fstat(run_dir_.get(), &own) == 0 &&
             now.st_dev == own.st_dev && now.st_ino == own.st_ino;
    }
    absl::StatusOr<VmRecord> record = ReadRecord(runtime_dir_);
    return record.ok() && record->pid == pid_;
  }

  std::optional<std::string> ExitReason() override {
    if (!child_) {
      if (!WaitGone(pidfd_.get(), 0)) return std::nullopt;
      return std::string(
          "the VM process ended (an earlier airlockd started it, so how it ended is not known)");
    }
    siginfo_t info = {};
    // WNOWAIT: the destructor still reaps it.
    if (waitid(static_cast<idtype_t>(kPidfdIdType), static_cast<id_t>(pidfd_.get()), &info,
               WEXITED | WNOHANG | WNOWAIT) != 0 ||
        info.si_pid == 0) {
      return std::nullopt;
    }
    if (info.si_code == CLD_EXITED) {
      return absl::StrCat("the VM process exited with status ", info.si_status);
    }
    if (info.si_status == SIGKILL && cgroup_ != nullptr) {
      if (HostCgroup::OomRecord oom = cgroup_->Oom(); oom.kills > 0) {
        return absl::StrCat(
            "the host ended the VM: it passed its host memory limit",
            oom.limit_bytes > 0 ? absl::StrCat(" of ", oom.limit_bytes >> 20, " MiB") : "",
            " (the guest's RAM, plus what `airlockd --vmm-memory` gives QEMU beyond it)");
      }
    }
    return absl::StrCat("the VM process was killed by signal ", info.si_status, " (",
                        sigabbrev_np(info.si_status) ? sigabbrev_np(info.si_status) : "?", ")");
  }
  pid_t pid() const override { return pid_; }
  int pidfd() const { return pidfd_.get(); }

  void Kill(const absl::Status& reason) override {
    PidfdKill(pidfd_.get());
    if (channel_) channel_->Fail(reason);
  }

  std::string DiagnosticTail() const override {
    // Give the logger a moment to drain what a dying QEMU wrote last.
    usleep(50000);
    std::string out;
    std::string vmm = vmm_log_.LastLines(8);
    if (!runtime_dir_.empty()) {
      // QEMU writes to a file that outlives us; its tail is what it said last.
      LogTail tail;
      UniqueFd log(open(absl::StrCat(runtime_dir_, "/", kVmmLog).c_str(), O_RDONLY | O_CLOEXEC));
      off_t size = log.valid() ? lseek(log.get(), 0, SEEK_END) : 0;
      std::string buf(static_cast<size_t>(std::min<off_t>(size, kLogCap)), '\0');
      ssize_t n = buf.empty() ? 0 : pread(log.get(), buf.data(), buf.size(), size - buf.size());
      if (n > 0) tail.Append(buf.data(), static_cast<size_t>(n));
      vmm = tail.LastLines(8);
    }
    std::string console = console_log_.LastLines(12);
    if (!vmm.empty()) absl::StrAppend(&out, "\n--- QEMU said ---\n", vmm);
    if (!console.empty()) absl::StrAppend(&out, "\n--- guest console (last lines) ---\n", console);
    return out;
  }

  absl::Status Explain(absl::string_view what, const absl::Status& status) const {
    return absl::Status(status.code(),
                        absl::StrCat(what, ": ", status.message(), DiagnosticTail()));
  }

 private:
  void LogLoop() {
    char buf[4096];
    bool open[2] = {console_.valid(), stderr_.valid()};
    // Until stopped, or until QEMU has closed both (it exited: nothing more will come).
    while (!stop_logger_ && (open[0] || open[1])) {
      pollfd fds[2] = {{open[0] ? console_.get() : -1, POLLIN, 0},
                       {open[1] ? stderr_.get() : -1, POLLIN, 0}};
      if (poll(fds, 2, 100) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].revents == 0) continue;
        ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n > 0) {
          (i == 0 ? console_log_ : vmm_log_).Append(buf, static_cast<size_t>(n));
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          open[i] = false;  // the writer is gone
        }
      }
    }
  }

  pid_t pid_;
  UniqueFd pidfd_;
  UniqueFd console_;
  UniqueFd stderr_;
  const bool child_;
  std::string runtime_dir_;  // changes only in Adopt, before the VM is shared
  UniqueFd run_dir_;         // runtime_dir_, open (O_PATH)
  bool detached_ = false;
  LogTail console_log_;
  LogTail vmm_log_;
  std::atomic<bool> stop_logger_{false};
  std::thread logger_;
  absl::Mutex qmp_mu_;  // QmpClient is not thread-safe
  // Set before the VM is shared; the client itself is used under qmp_mu_.
  std::unique_ptr<QmpClient> qmp_ ABSL_PT_GUARDED_BY(qmp_mu_);
  std::shared_ptr<GuestChannel> channel_;
  std::string accelerator_;
  std::string vmm_version_;
  GuestSync sync_;
  std::unique_ptr<HostCgroup> cgroup_;  // removed after ~QemuVm has reaped the process
  std::optional<JailUid> jail_uid_;
  UniqueFd shared_memory_;  // the guest's RAM when it writes into a memfd
  bool incoming_ram_apart_ = false;
  bool hold_ = false;
};

// A guest that breaks the protocol (or whose channel dies) loses its VM at once. The callback
// holds its own pidfd, so it can never signal a recycled pid.
GuestChannel::FailureCallback KillerOf(const QemuVm& vm) {
  auto kill_fd = std::make_shared<UniqueFd>(fcntl(vm.pidfd(), F_DUPFD_CLOEXEC, 0));
  return [kill_fd](const absl::Status&) { PidfdKill(kill_fd->get()); };
}

// Everything the child needs, prepared by the parent: between fork and exec the child makes
// system calls only (no allocation, no locks).
struct SpawnPlan {
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  int sources[kSources] = {};  // become descriptors 3, 4, ...
  int stderr_fd = -1;
  int go[2] = {-1, -1};
  bool outlive = false;  // no parent-death signal: the VM outlives the process that starts it
  std::vector<int> cgroup_procs;
  // As root: one jail per VM (see Jail below).
  bool jail = false;
  uid_t uid = 0;  // the VM's own uid and gid
  gid_t kvm_gid = 0;
  bool kvm = false;
  // The host's top-level links into /usr ("lib" -> "usr/lib"), made again in the jail's root;
  // top-level directories that are no links are bound read-only instead.
  std::vector<std::pair<std::string, std::string>> root_links;
  std::vector<std::string> root_dirs;
};

// In the child, as root: a root of its own for QEMU that holds only what it needs to run (the
// host's /usr read-only, /dev/null, /dev/urandom, /dev/kvm for KVM, and a /proc of its own PID
// namespace); everything else it gets is a descriptor. Returns false on any failure.
bool Jail(const SpawnPlan& plan) {
  constexpr unsigned long kReadOnlyBind = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  // A tmpfs on /tmp of this mount namespace becomes the new root.
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") != 0 ||
      chdir("/tmp") != 0 || mkdir("usr", 0755) != 0 || mkdir("dev", 0755) != 0 ||
      mkdir("proc", 0555) != 0) {
    return false;
  }
  if (mount("/usr", "usr", nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
      mount(nullptr, "usr", nullptr, kReadOnlyBind, nullptr) != 0) {
    return false;
  }
  for (const auto& [name, target] : plan.root_links) {
    if (symlink(target.c_str(), name.c_str()) != 0) return false;
  }
  char from[64];
  for (const std::string& dir : plan.root_dirs) {
    if (dir.size() + 2 > sizeof(from)) return false;
    from[0] = '/';
    memcpy(from + 1, dir.c_str(), dir.size() + 1);
    if (mkdir(dir.c_str(), 0755) != 0 || mount(from, dir.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        mount(nullptr, dir.c_str(), nullptr, kReadOnlyBind, nullptr) != 0) {
      return false;
    }
  }
  for (const char* device : {"null", "urandom", "kvm"}) {
    if (device[0] == 'k' && !plan.kvm) continue;
    char host[32] = "/dev/", here[32] = "dev/";
    strcat(host, device);
    strcat(here, device);
    int fd = open(here, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    close(fd);
    if (mount(host, here, nullptr, MS_BIND, nullptr) != 0) return false;
  }
  if (syscall(SYS_pivot_root, ".", ".") != 0 || umount2(".", MNT_DETACH) != 0 || chdir("/") != 0) {
    return false;
  }
  return mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0 &&
         mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
               nullptr) == 0;
}

// In the child of a raw clone3: only system calls until execve (glibc's fork-time resets of its
// locks and thread list did not happen, so nothing that may lock or touch other threads).
[[noreturn]] void ExecQemu(const SpawnPlan& plan) {
  close(plan.go[1]);
  // A VM that dies with its parent gets the signal before anything else; one that outlives it
  // starts only once the parent has recorded it. Either way it waits for the parent's byte on
  // go: if the parent dies first, nothing knows of this process, so it must not run.
  if (!plan.outlive) prctl(PR_SET_PDEATHSIG, SIGKILL);
  char c;
  if (read(plan.go[0], &c, 1) != 1) _exit(126);
  // Into the host cgroup before anything is allocated ("0" is this process).
  for (int fd : plan.cgroup_procs) {
    if (write(fd, "0", 1) != 1) _exit(124);
  }
  setsid();
  if (plan.jail) {
    // New namespaces cut QEMU off from the host's network, mounts, IPC and hostname (its PID
    // namespace came with the clone), and a uid of its own from every other VM.
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET) != 0) _exit(125);
    if (!Jail(plan)) _exit(123);
    gid_t groups[1] = {plan.kvm_gid};
    // Raw system calls: glibc's wrappers would try to change every thread it believes this
    // process has (the parent's, after a raw clone3) and can wait for them forever.
    if (syscall(SYS_setgroups, plan.kvm && plan.kvm_gid != 0 ? 1 : 0, groups) != 0) _exit(125);
    if (syscall(SYS_setresgid, plan.uid, plan.uid, plan.uid) != 0 ||
        syscall(SYS_setresuid, plan.uid, plan.uid, plan.uid) != 0) {
      _exit(125);
    }
    if (!plan.outlive) {
      // Changing credentials cleared the parent-death signal: set it again, then make sure the
      // parent did not go in between (its end of go is then closed).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      pollfd p = {plan.go[0], 0, 0};
      if (poll(&p, 1, 0) != 0 && (p.revents & POLLHUP)) _exit(126);
    }
  }
  int high[kSources + 1];
  // (A source of -1 is a descriptor the VM does not get.)
  for (int i = 0; i < kSources; ++i) {
    high[i] = plan.sources[i] < 0 ? -1 : fcntl(plan.sources[i], F_DUPFD, 64);
  }
  high[kSources] = fcntl(plan.stderr_fd, F_DUPFD, 64);
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(high[kSources], 1) < 0 ||
      dup2(high[kSources], 2) < 0) {
    _exit(126);
  }
  for (int i = 0; i < kSources; ++i) {
    if (plan.sources[i] < 0) {
      close(3 + i);
    } else if (high[i] < 0 || dup2(high[i], 3 + i) < 0) {
      _exit(126);
    }
  }
  close_range(3 + kSources, ~0U, 0);
  // The binary itself, by descriptor (the jail has no path to it unless it is under /usr).
  fcntl(kExecFd, F_SETFD, FD_CLOEXEC);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  syscall(SYS_execveat, kExecFd, "", plan.argv, plan.envp, AT_EMPTY_PATH);
  _exit(127);
}

// The parent-death signal fires when the *thread* that forked exits, not the process. Server
// threads come and go, so every VM is forked from one thread that lives as long as the process.
pid_t RunOnSpawnerThread(const std::function<pid_t()>& spawn) {
  struct Spawner {
    absl::Mutex serial;  // one request at a time
    absl::Mutex mu;
    absl::CondVar cv;
    const std::function<pid_t()>* request ABSL_GUARDED_BY(mu) = nullptr;
    pid_t result ABSL_GUARDED_BY(mu) = 0;
    int result_errno ABSL_GUARDED_BY(mu) = 0;
    bool done ABSL_GUARDED_BY(mu) = false;
  };
  // Never destroyed: the thread waits on it until the process ends.
  static Spawner* spawner = [] {
    auto* s = new Spawner;
    std::thread([s] {
      absl::MutexLock lock(&s->mu);
      for (;;) {
        while (s->request == nullptr || s->done) s->cv.Wait(&s->mu);
        s->result = (*s->request)();
        s->result_errno = errno;
        s->done = true;
        s->cv.SignalAll();
      }
    }).detach();
    return s;
  }();
  absl::MutexLock serial(&spawner->serial);
  absl::MutexLock lock(&spawner->mu);
  spawner->request = &spawn;
  spawner->done = false;
  spawner->cv.SignalAll();
  while (!spawner->done) spawner->cv.Wait(&spawner->mu);
  spawner->request = nullptr;
  errno = spawner->result_errno;
  return spawner->result;
}

}  // namespace

std::vector<std::string> QemuDriver::BuildArgv(const VmConfig& config, bool direct_disk,
                                               const std::vector<bool>& direct_volumes) const {
  bool kvm = config.accelerator == "kvm";
  // A VM that outlives us gets listening sockets: each connection (ours, or a later airlockd's)
  // is accepted in turn.
  std::string listen = config.runtime_dir.empty() ? "" : ",server=on,wait=off";
  std::string cmdline =
      absl::StrCat("console=ttyS0 quiet panic=-1 reboot=t airlock.hostname=", config.hostname);
  std::vector<std::string> argv = {
      qemu_path_,
      "-M",
      "microvm,acpi=off,x-option-roms=off,rtc=off,memory-backend=microvm.ram",
      "-accel",
      kvm ? "kvm" : "tcg,tb-size=256",
      "-cpu",
      kvm ? "host" : "max",
      "-m",
      absl::StrCat(config.memory_mib, "M"),
      // The RAM backend has the id QEMU gives its default one, so that the RAM of a state saved
      // from either kind (or by a QEMU given only -m) loads into the other.
      "-object",
      config.memory_fd < 0
          ? absl::StrCat("memory-backend-ram,id=microvm.ram,size=", config.memory_mib, "M")
          : absl::StrCat("memory-backend-file,id=microvm.ram,size=", config.memory_mib,
                         "M,mem-path=/proc/self/fd/", kMemoryFd,
                         ",share=", config.memory_shared ? "on" : "off",
                         config.prealloc_memory ? ",prealloc=on" : ""),
      "-smp",
      absl::StrCat(config.vcpus),
      "-nodefaults",
      "-no-user-config",
      "-nographic",
      "-no-reboot",
      "-sandbox",
      "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
      "-chardev",
      absl::StrCat("socket,id=console,fd=", kConsoleFd, listen),
      "-serial",
      "chardev:console",
      "-chardev",
      absl::StrCat("socket,id=qmp,fd=", kQmpFd, listen),
      "-mon",
      "chardev=qmp,mode=control",
      "-device",
      "virtio-rng-device",
      "-add-fd",
      absl::StrCat("fd=", kImageFd, ",set=3"),
      "-drive",
      "id=image,file=/dev/fdset/3,format=raw,if=none,readonly=on,file.locking=off",
      "-device",
      "virtio-blk-device,drive=image,serial=airlock-image",
      "-add-fd",
      absl::StrCat("fd=", kDiskFd, ",set=1"),
      "-add-fd",
      absl::StrCat("fd=", kDiskReadOnlyFd, ",set=1"),
      "-drive",
      // No image locking: the disk is this VM's alone, and QEMU's locks on its two
      // descriptors conflict when `cont` reactivates it after a snapshot.
      absl::StrCat("id=session,file=/dev/fdset/1,format=raw,if=none,discard=unmap,file.locking=off",
                   direct_disk ? ",cache.direct=on" : ""),
      "-device",
      "virtio-blk-device,drive=session,serial=airlock-rw",
      "-add-fd",
      absl::StrCat("fd=", kWorkspaceFd, ",set=2"),
      "-drive",
      "id=workspace,file=/dev/fdset/2,format=raw,if=none,readonly=on,file.locking=off",
      "-device",
      "virtio-blk-device,drive=workspace,serial=airlock-ws",
  };
  for (uint32_t slot = 0; slot < kVolumeSlots; ++slot) {
    std::string id = absl::StrCat("vol", slot);
    int fd = kVolumeFd + 2 * static_cast<int>(slot);
    int set = 4 + static_cast<int>(slot);
    std::vector<std::string> drive;
    if (slot >= config.volumes.size()) {
      // Reads as zeros, writes go nowhere: the guest of a template sees a disk of the size a
      // volume's has.
      drive = {"-blockdev", absl::StrCat("driver=null-co,node-name=", id,
                                         ",size=", kVolumeDiskBytes, ",read-zeroes=on")};
    } else if (config.volumes[slot].read_only) {
      drive = {"-add-fd", absl::StrCat("fd=", fd, ",set=", set), "-drive",
               absl::StrCat("id=", id, ",file=/dev/fdset/", set,
                            ",format=raw,if=none,readonly=on,file.locking=off")};
    } else {
      drive = {"-add-fd",
               absl::StrCat("fd=", fd, ",set=", set),
               "-add-fd",
               absl::StrCat("fd=", fd + 1, ",set=", set),
               "-drive",
               absl::StrCat(
                   "id=", id, ",file=/dev/fdset/", set,
                   ",format=raw,if=none,discard=unmap,file.locking=off",
                   slot < direct_volumes.size() && direct_volumes[slot] ? ",cache.direct=on" : "")};
    }
    for (std::string& a : drive) argv.push_back(std::move(a));
    argv.push_back("-device");
    argv.push_back(
        // The write cache is said the same way for a placeholder and a volume: the guest of a
        // template negotiated its features with the one, a restore loads them with the other.
        absl::StrCat("virtio-blk-device,drive=", id, ",serial=airlock-vol", slot,
                     ",write-cache=on"));
  }
  for (std::string a :
       {std::string("-device"), std::string("virtio-serial-device,max_ports=2"),
        std::string("-chardev"), absl::StrCat("socket,id=channel,fd=", kChannelFd, listen),
        std::string("-device"), std::string("virtserialport,chardev=channel,name=airlock.0")}) {
    argv.push_back(std::move(a));
  }
  if (config.incoming_state_fd < 0 && !config.await_state) {
    // Boot the kernel with the agent's initramfs. (A restored guest brings its kernel along in
    // its RAM, so loading one would be wasted.)
    for (const std::string& a :
         {std::string("-kernel"), absl::StrCat("/proc/self/fd/", kKernelFd), std::string("-initrd"),
          absl::StrCat("/proc/self/fd/", kInitrdFd), std::string("-append"), cmdline}) {
      argv.push_back(a);
    }
  } else {
    // Wait for the state over QMP (migrate-incoming with a passed descriptor, never a URI
    // that names a file or a command), and stay stopped until it has loaded.
    for (const char* a : {"-S", "-incoming", "defer"}) argv.push_back(a);
  }
  return argv;
}

absl::StatusOr<std::unique_ptr<Vm>> QemuDriver::Start(const VmConfig& config) {
  if (config.image_path.find(',') != std::string::npos) {
    return absl::InvalidArgumentError("image paths must not contain commas");
  }
  if (access(qemu_path_.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        qemu_path_,
        " is missing; install it with scripts/setup.sh (Debian package qemu-system-x86)"));
  }
  bool outlive = !config.runtime_dir.empty();
  // QEMU's ends of the channel, QMP and console (listening sockets in the runtime directory
  // for a VM that outlives us: a later airlockd connects again; socketpairs otherwise), and
  // where its stderr goes (a file beside them, or a pipe).
  UniqueFd channel_host, channel_vm, qmp_host, qmp_vm, console_host, console_vm, err_host, err_vm;
  UniqueFd run_dir;
  if (outlive) {
    // A VM that was here is gone.
    LogIfFailed(RemoveTree(config.runtime_dir), "remove a gone VM's runtime directory");
    if (absl::Status s = MakeDirectories(config.runtime_dir, 0700); !s.ok()) return s;
    run_dir.reset(open(config.runtime_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!run_dir.valid()) return ErrnoStatus("open", config.runtime_dir);
    for (auto [name, fd] : {std::pair{kChannelSocket, &channel_vm}, std::pair{kQmpSocket, &qmp_vm},
                            std::pair{kConsoleSocket, &console_vm}}) {
      absl::StatusOr<UniqueFd> listening = ListenAt(run_dir.get(), name);
      if (!listening.ok()) return listening.status();
      *fd = *std::move(listening);
    }
    err_vm.reset(
        openat(run_dir.get(), kVmmLog, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600));
    if (!err_vm.valid()) return ErrnoStatus("create", kVmmLog);
  } else {
    for (auto [host, vm] : {std::pair{&channel_host, &channel_vm}, std::pair{&qmp_host, &qmp_vm},
                            std::pair{&console_host, &console_vm}}) {
      int pair[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        return ErrnoStatus("socketpair");
      }
      host->reset(pair[0]);
      vm->reset(pair[1]);
    }
    int err[2];
    if (pipe2(err, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
    err_host.reset(err[0]);
    err_vm.reset(err[1]);
  }

  // QEMU gets descriptors of its own for the session disk (it sets O_DIRECT on them, which
  // would otherwise change ours too). Written through the host's page cache, a disk the guest
  // fills charges its dirty pages to the VM's cgroup faster than they can be written back: a
  // guest that wrote 700 MiB and then used its RAM was killed by the host (issue 44). Where
  // the filesystem under the disk refuses O_DIRECT (tmpfs before Linux 6.6), it stays cached.
  std::string disk_path = absl::StrCat("/proc/self/fd/", config.session_disk_fd);
  UniqueFd disk(open(disk_path.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC));
  bool direct_disk = disk.valid();
  if (!direct_disk) disk.reset(open(disk_path.c_str(), O_RDWR | O_CLOEXEC));
  if (!disk.valid()) return ErrnoStatus("reopen the session disk");
  if (config.volumes.size() > kVolumeSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("a VM has room for ", kVolumeSlots, " volumes, not ", config.volumes.size()));
  }
  // Each read-write volume as the session disk (O_DIRECT where the filesystem allows), and
  // read-only; a read-only one as it was opened.
  std::vector<UniqueFd> volume_fds(2 * kVolumeSlots);
  std::vector<bool> direct_volumes(kVolumeSlots, false);
  for (size_t slot = 0; slot < config.volumes.size(); ++slot) {
    const VmVolume& v = config.volumes[slot];
    std::string path = absl::StrCat("/proc/self/fd/", v.fd);
    if (v.read_only) {
      volume_fds[2 * slot].reset(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    } else {
      volume_fds[2 * slot].reset(open(path.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC));
      direct_volumes[slot] = volume_fds[2 * slot].valid();
      if (!direct_volumes[slot]) volume_fds[2 * slot].reset(open(path.c_str(), O_RDWR | O_CLOEXEC));
      volume_fds[2 * slot + 1].reset(open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!volume_fds[2 * slot + 1].valid()) return ErrnoStatus("reopen a volume's disk");
    }
    if (!volume_fds[2 * slot].valid()) return ErrnoStatus("reopen a volume's disk");
  }
  std::vector<std::string> args = BuildArgv(config, direct_disk, direct_volumes);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string env_path = "PATH=/usr/bin:/bin", env_lang = "LC_ALL=C";
  char* envp[] = {env_path.data(), env_lang.data(), nullptr};
  bool root = geteuid() == 0;
  SpawnPlan plan;
  plan.argv = argv.data();
  plan.envp = envp;
  plan.outlive = outlive;
  plan.kvm = config.accelerator == "kvm";
  if (plan.kvm) {
    if (group* g = getgrnam("kvm")) plan.kvm_gid = g->gr_gid;
  }
  UniqueFd disk_read_only(open(disk_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!disk_read_only.valid()) return ErrnoStatus("reopen the session disk");
  if (config.workspace_disk_fd < 0) {
    return absl::InvalidArgumentError("a VM needs a workspace disk (an empty one will do)");
  }
  UniqueFd image(open(config.image_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!image.valid()) return ErrnoStatus("open the image", config.image_path);
  UniqueFd kernel(open(config.kernel_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!kernel.valid()) return ErrnoStatus("open the guest kernel", config.kernel_path);
  UniqueFd initrd(open(config.initramfs_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!initrd.valid()) return ErrnoStatus("open the guest initramfs", config.initramfs_path);
  UniqueFd binary(open(qemu_path_.c_str(), O_PATH | O_CLOEXEC));
  if (!binary.valid()) return ErrnoStatus("open", qemu_path_);
  const int sources[11] = {channel_vm.get(), qmp_vm.get(),         console_vm.get(),
                           disk.get(),       disk_read_only.get(), config.workspace_disk_fd,
                           image.get(),      kernel.get(),         initrd.get(),
                           binary.get(),     config.memory_fd};
  std::copy(std::begin(sources), std::end(sources), plan.sources);
  for (size_t i = 0; i < volume_fds.size(); ++i) plan.sources[11 + i] = volume_fds[i].get();
  plan.stderr_fd = err_vm.get();
  std::optional<JailUid> jail_uid;
  if (root) {
    jail_uid = JailUid::Take();
    if (!jail_uid) return absl::ResourceExhaustedError("every VM uid is in use");
    plan.jail = true;
    plan.uid = jail_uid->uid();
    for (const char* top : {"bin", "lib", "lib32", "lib64", "libx32", "sbin"}) {
      std::string path = absl::StrCat("/", top);
      char target[256];
      ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
      struct stat st;
      if (n > 0) {
        plan.root_links.push_back({top, std::string(target, static_cast<size_t>(n))});
      } else if (lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        plan.root_dirs.push_back(top);
      }
    }
  }
  std::unique_ptr<HostCgroup> cgroup;
  if (!config.host_cgroup.empty() && root) {
    // TCG keeps translated code (tb-size) and QEMU its own structures beside the guest's RAM.
    uint64_t overhead = vmm_memory_bytes_ != 0        ? vmm_memory_bytes_
                        : config.accelerator == "kvm" ? 128ull << 20
                                                      : 384ull << 20;
    absl::StatusOr<std::unique_ptr<HostCgroup>> created = HostCgroup::Create(
        config.host_cgroup, {.vcpus = config.vcpus,
                             .memory_bytes = (uint64_t{config.memory_mib} << 20) + overhead,
                             .max_tasks = 64 + 4 * config.vcpus,
                             .background = config.background});
    if (!created.ok()) return created.status();
    cgroup = *std::move(created);
    plan.cgroup_procs = cgroup->procs_fds();
  }
  if (pipe2(plan.go, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  UniqueFd go_read(plan.go[0]), go_write(plan.go[1]);
  // A jailed VM is PID 1 of a PID namespace of its own.
  auto spawn = [&] {
    clone_args args = {};
    args.flags = plan.jail ? CLONE_NEWPID : 0;
    args.exit_signal = SIGCHLD;
    pid_t child = static_cast<pid_t>(syscall(SYS_clone3, &args, sizeof(args)));
    if (child == 0) ExecQemu(plan);
    return child;
  };
  // (The parent-death signal follows the thread that forked.)
  pid_t pid = outlive ? spawn() : RunOnSpawnerThread(spawn);
  if (pid < 0) return ErrnoStatus("start the VM process");
  go_read.reset();
  if (!outlive && write(go_write.get(), "g", 1) != 1) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return ErrnoStatus("start the VM process");
  }
  UniqueFd pidfd(PidfdOpen(pid));
  GuestSync sync = {.pids_max = config.guest_pids_max,
                    .hostname = config.hostname,
                    .restored = config.incoming_state_fd >= 0 || config.await_state,
                    .mount_workspace = config.mount_workspace};
  for (size_t slot = 0; slot < config.volumes.size(); ++slot) {
    sync.volumes.push_back({.slot = static_cast<uint32_t>(slot),
                            .flags = config.volumes[slot].read_only ? kVolumeReadOnly : 0u,
                            .path = config.volumes[slot].mount_point});
  }
  absl::Status started = pidfd.valid() ? absl::OkStatus() : ErrnoStatus("pidfd_open");
  if (outlive && started.ok()) {
    // Recorded before it may run, so that a later airlockd finds it (or ends it).
    VmRecord record{.pid = pid,
                    .start_time = ProcessStartTime(pid).value_or(0),
                    .accelerator = config.accelerator,
                    .cgroup = cgroup ? cgroup->name() : config.host_cgroup,
                    .uid = jail_uid ? jail_uid->uid() : 0,
                    .sync = sync};
    struct stat disk_stat;
    if (fstat(disk.get(), &disk_stat) == 0) {
      record.disk_dev = disk_stat.st_dev;
      record.disk_ino = disk_stat.st_ino;
    }
    struct stat memory_stat;
    if (config.memory_shared && fstat(config.memory_fd, &memory_stat) == 0) {
      record.memory_dev = memory_stat.st_dev;
      record.memory_ino = memory_stat.st_ino;
    }
    started = record.start_time == 0
                  ? absl::InternalError("the VM process vanished before it started")
                  : WriteFileAtomically(absl::StrCat(config.runtime_dir, "/", kRecordFile),
                                        EncodeRecord(record), 0600);
    if (started.ok() && write(go_write.get(), "g", 1) != 1) {
      started = ErrnoStatus("start the VM process");
    }
    go_write.reset();
    for (auto [name, fd] :
         {std::pair{kQmpSocket, &qmp_host}, std::pair{kChannelSocket, &channel_host},
          std::pair{kConsoleSocket, &console_host}}) {
      absl::StatusOr<UniqueFd> connected = started.ok() ? ConnectAt(run_dir.get(), name) : started;
      if (!connected.ok()) {
        started = connected.status();
        break;
      }
      *fd = *std::move(connected);
    }
  }
  if (!started.ok()) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    if (outlive) {
      LogIfFailed(RemoveTree(config.runtime_dir),
                  "remove a VM's runtime directory after a failed start");
    }
    return started;
  }
  auto vm = std::make_unique<QemuVm>(pid, std::move(pidfd), std::move(console_host),
                                     std::move(err_host), /*child=*/true, config.runtime_dir);
  vm->set_run_dir(std::move(run_dir));
  vm->set_accelerator(config.accelerator);
  vm->set_cgroup(std::move(cgroup));
  vm->set_jail_uid(std::move(jail_uid));
  vm->set_sync(sync);
  if (config.memory_fd >= 0 && config.memory_shared) {
    UniqueFd memory(fcntl(config.memory_fd, F_DUPFD_CLOEXEC, 0));
    if (!memory.valid()) return ErrnoStatus("keep the guest's memory");
    vm->set_shared_memory(std::move(memory));
  }
  channel_vm.reset();
  qmp_vm.reset();
  console_vm.reset();
  err_vm.reset();
  absl::StatusOr<std::unique_ptr<QmpClient>> client =
      QmpClient::Connect(std::move(qmp_host), absl::Now() + absl::Seconds(30));
  if (!client.ok()) return vm->Explain("QEMU did not start", client.status());
  vm->AttachQmp(*std::move(client));
  vm->AttachChannel(GuestChannel::Start(std::move(channel_host), KillerOf(*vm)));
  vm->set_incoming(
      /*ram_apart=*/config.memory_fd >= 0 && (!config.memory_shared || config.memory_holds_ram),
      config.hold);
  if (config.incoming_state_fd >= 0) {
    if (absl::Status s = vm->LoadState(config.incoming_state_fd, absl::Now() + absl::Seconds(60));
        !s.ok()) {
      return s;
    }
  }
  return vm;
}

absl::StatusOr<LaunchedVm> QemuDriver::Reattach(const std::string& runtime_dir,
                                                absl::Time deadline) {
  absl::StatusOr<VmRecord> record = ReadRecord(runtime_dir);
  if (!record.ok()) return record.status();
  absl::StatusOr<UniqueFd> pidfd = OpenRecordedProcess(*record);
  if (!pidfd.ok()) return pidfd.status();
  UniqueFd run_dir(open(runtime_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!run_dir.valid()) return ErrnoStatus("open", runtime_dir);
  absl::StatusOr<UniqueFd> qmp = ConnectAt(run_dir.get(), kQmpSocket);
  if (!qmp.ok()) return qmp.status();
  absl::StatusOr<UniqueFd> console = ConnectAt(run_dir.get(), kConsoleSocket);
  auto vm = std::make_unique<QemuVm>(record->pid, *std::move(pidfd),
                                     console.ok() ? *std::move(console) : UniqueFd(), UniqueFd(),
                                     /*child=*/false, runtime_dir);
  vm->set_run_dir(UniqueFd(fcntl(run_dir.get(), F_DUPFD_CLOEXEC, 0)));
  vm->set_accelerator(record->accelerator);
  if (!record->cgroup.empty()) vm->set_cgroup(HostCgroup::Adopt(record->cgroup));
  if (record->uid != 0) vm->set_jail_uid(JailUid::Adopt(record->uid));
  vm->set_sync(record->sync);
  absl::StatusOr<std::unique_ptr<QmpClient>> client = QmpClient::Connect(*std::move(qmp), deadline);
  if (!client.ok()) return client.status();
  vm->AttachQmp(*std::move(client));
  if (absl::Status s = vm->EnsureRunning(deadline); !s.ok()) return s;
  // The writable disk: the descriptor QEMU holds (a new session's disk has no name).
  UniqueFd disk = OpenHeldFile(record->pid, record->disk_dev, record->disk_ino);
  if (!disk.valid()) return absl::NotFoundError("the VM no longer holds its writable disk");
  if (record->memory_ino != 0) {
    UniqueFd memory = OpenHeldFile(record->pid, record->memory_dev, record->memory_ino);
    if (!memory.valid()) return absl::NotFoundError("the VM no longer holds its memory file");
    vm->set_shared_memory(std::move(memory));
  }
  // The agent starts over when the host end comes back, and says hello. If it did not notice
  // the old connection go (it came back too soon), drop the new one for a moment so it does.
  absl::Status handshake;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0) usleep(300000);
    absl::StatusOr<UniqueFd> channel = ConnectAt(run_dir.get(), kChannelSocket);
    if (!channel.ok()) return channel.status();
    std::shared_ptr<GuestChannel> guest =
        GuestChannel::Start(*std::move(channel), KillerOf(*vm), /*join_midway=*/true);
    handshake = guest->Handshake(std::min(deadline, absl::Now() + absl::Seconds(3)), record->sync);
    if (handshake.ok()) {
      vm->AttachChannel(std::move(guest));
      return LaunchedVm{std::move(vm), std::move(disk)};
    }
    guest->Stop();
    if (!absl::IsDeadlineExceeded(handshake) || absl::Now() > deadline) break;
  }
  return vm->Explain("the guest agent did not answer again", handshake);
}

void QemuDriver::Destroy(const std::string& runtime_dir) {
  absl::StatusOr<VmRecord> record = ReadRecord(runtime_dir);
  if (record.ok()) {
    if (absl::StatusOr<UniqueFd> pidfd = OpenRecordedProcess(*record); pidfd.ok()) {
      PidfdKill(pidfd->get());
      WaitGone(pidfd->get(), 5000);
    }
    if (!record->cgroup.empty()) HostCgroup::Adopt(record->cgroup).reset();
  }
  LogIfFailed(RemoveTree(runtime_dir), "remove a destroyed VM's runtime directory");
}

}  // namespace airlock
