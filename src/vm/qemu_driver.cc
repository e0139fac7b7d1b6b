#include "src/vm/qemu_driver.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/common/errno_status.h"
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
constexpr int kSources = 7;
// How much console and VMM output is kept for error messages.
constexpr size_t kLogCap = 64 * 1024;
// The unprivileged identity QEMU runs as when we are root.
constexpr uid_t kNobody = 65534;

// A bounded tail of a byte stream.
class LogTail {
 public:
  void Append(const char* p, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    data_.append(p, n);
    if (data_.size() > kLogCap) data_.erase(0, data_.size() - kLogCap);
  }
  std::string LastLines(size_t lines) const {
    std::lock_guard<std::mutex> lock(mu_);
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
  mutable std::mutex mu_;
  std::string data_;
};

// waitid's P_PIDFD, which older headers lack.
constexpr int kPidfdIdType = 3;

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

int PidfdKill(int pidfd) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0));
}

// max-bandwidth for migrating to a file: 1 TB/s, i.e. no throttle.
constexpr int64_t kUnthrottled = int64_t{1} << 40;

// Polls a migration (either direction) until it completes or fails. QEMU's reply is bounded
// by QmpClient and read without exceptions.
absl::Status WaitForMigration(QmpClient& qmp, absl::Time deadline) {
  for (;;) {
    absl::StatusOr<nlohmann::json> info =
        qmp.Execute("query-migrate", nlohmann::json::object(), deadline);
    if (!info.ok()) return info.status();
    auto text = [&](const char* key) {
      auto it = info->is_object() ? info->find(key) : info->end();
      return it != info->end() && it->is_string() ? it->get<std::string>() : std::string();
    };
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
  QemuVm(pid_t pid, UniqueFd pidfd, UniqueFd console, UniqueFd stderr_pipe)
      : pid_(pid),
        pidfd_(std::move(pidfd)),
        console_(std::move(console)),
        stderr_(std::move(stderr_pipe)) {
    logger_ = std::thread([this] { LogLoop(); });
  }

  ~QemuVm() override {
    PidfdKill(pidfd_.get());
    if (channel_) channel_->Stop();
    int status;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    stop_logger_ = true;
    logger_.join();
  }

  void Attach(std::unique_ptr<QmpClient> qmp, std::shared_ptr<GuestChannel> channel) {
    vmm_version_ = absl::StrCat("qemu ", qmp->version());
    qmp_ = std::move(qmp);
    channel_ = std::move(channel);
  }

  absl::Status WaitReady(absl::Time deadline) override {
    absl::Status status = channel_->Handshake(deadline, sync_);
    if (status.ok()) return status;
    Kill(status);
    return Explain(sync_.restored ? "the VM did not resume" : "the VM did not boot", status);
  }

  absl::Status SaveState(int state_fd, absl::Time deadline) override {
    std::lock_guard<std::mutex> lock(qmp_mu_);
    for (auto [command, arguments] :
         {std::pair<const char*, nlohmann::json>{"stop", nlohmann::json::object()},
          // QEMU throttles migration to 128 MiB/s by default; a file takes what it gets.
          {"migrate-set-parameters", {{"max-bandwidth", kUnthrottled}}}}) {
      if (absl::StatusOr<nlohmann::json> r = qmp_->Execute(command, arguments, deadline); !r.ok()) {
        return r.status();
      }
    }
    if (absl::Status s = qmp_->PassFd("snapshot", state_fd, deadline); !s.ok()) return s;
    absl::StatusOr<nlohmann::json> r = qmp_->Execute("migrate", {{"uri", "fd:snapshot"}}, deadline);
    if (!r.ok()) return r.status();
    return WaitForMigration(*qmp_, deadline);
  }

  absl::Status Continue(absl::Time deadline) override {
    {
      std::lock_guard<std::mutex> lock(qmp_mu_);
      absl::StatusOr<nlohmann::json> r = qmp_->Execute("cont", nlohmann::json::object(), deadline);
      if (!r.ok()) return r.status();
    }
    GuestSync sync = sync_;
    sync.restored = true;
    return channel_->Handshake(deadline, sync);
  }

  // Loads a saved state into a QEMU started with -incoming defer -S, and starts the guest.
  absl::Status Restore(int state_fd, absl::Time deadline) {
    std::lock_guard<std::mutex> lock(qmp_mu_);
    if (absl::Status s = qmp_->PassFd("state", state_fd, deadline); !s.ok()) return s;
    absl::StatusOr<nlohmann::json> r =
        qmp_->Execute("migrate-incoming", {{"uri", "fd:state"}}, deadline);
    if (!r.ok()) return r.status();
    if (absl::Status s = WaitForMigration(*qmp_, deadline); !s.ok()) return s;
    return qmp_->Execute("cont", nlohmann::json::object(), deadline).status();
  }

  GuestChannel& channel() override { return *channel_; }
  std::string accelerator() const override { return accelerator_; }
  std::string vmm_version() const override { return vmm_version_; }
  void set_accelerator(std::string accelerator) { accelerator_ = std::move(accelerator); }
  void set_sync(GuestSync sync) { sync_ = std::move(sync); }
  void set_cgroup(std::unique_ptr<HostCgroup> cgroup) { cgroup_ = std::move(cgroup); }

  std::optional<std::string> ExitReason() override {
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
    bool open[2] = {true, true};
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
  LogTail console_log_;
  LogTail vmm_log_;
  std::atomic<bool> stop_logger_{false};
  std::thread logger_;
  std::mutex qmp_mu_;  // QmpClient is not thread-safe
  std::unique_ptr<QmpClient> qmp_;
  std::shared_ptr<GuestChannel> channel_;
  std::string accelerator_;
  std::string vmm_version_;
  GuestSync sync_;
  std::unique_ptr<HostCgroup> cgroup_;  // removed after ~QemuVm has reaped the process
};

// In the forked child: only async-signal-safe calls until execve.
[[noreturn]] void ExecQemu(pid_t parent, const char* path, char* const* argv, char* const* envp,
                           const int (&sources)[kSources], int stderr_fd, bool drop_privileges,
                           gid_t kvm_gid, const std::vector<int>& cgroup_procs) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(126);
  // Into the host cgroup before anything is allocated ("0" is this process).
  for (int fd : cgroup_procs) {
    if (write(fd, "0", 1) != 1) _exit(124);
  }
  setsid();
  int high[kSources + 1];
  for (int i = 0; i < kSources; ++i) high[i] = fcntl(sources[i], F_DUPFD, 64);
  high[kSources] = fcntl(stderr_fd, F_DUPFD, 64);
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(high[kSources], 1) < 0 ||
      dup2(high[kSources], 2) < 0) {
    _exit(126);
  }
  for (int i = 0; i < kSources; ++i) {
    if (high[i] < 0 || dup2(high[i], 3 + i) < 0) _exit(126);
  }
  close_range(3 + kSources, ~0U, 0);
  if (drop_privileges) {
    // New namespaces cut QEMU off from the host's network, mounts, IPC and hostname.
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET) != 0) _exit(125);
    gid_t groups[1] = {kvm_gid};
    if (setgroups(kvm_gid != 0 ? 1 : 0, groups) != 0) _exit(125);
    if (setresgid(kNobody, kNobody, kNobody) != 0 || setresuid(kNobody, kNobody, kNobody) != 0) {
      _exit(125);
    }
    // Changing credentials cleared the parent-death signal: set it again.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
  }
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  execve(path, argv, envp);
  _exit(127);
}

// The parent-death signal fires when the *thread* that forked exits, not the process. Server
// threads come and go, so every VM is forked from one thread that lives as long as the process.
pid_t RunOnSpawnerThread(const std::function<pid_t()>& spawn) {
  struct Spawner {
    std::mutex serial;  // one request at a time
    std::mutex mu;
    std::condition_variable cv;
    const std::function<pid_t()>* request = nullptr;
    pid_t result = 0;
    int result_errno = 0;
    bool done = false;
  };
  // Never destroyed: the thread waits on it until the process ends.
  static Spawner* spawner = [] {
    auto* s = new Spawner;
    std::thread([s] {
      std::unique_lock<std::mutex> lock(s->mu);
      for (;;) {
        s->cv.wait(lock, [s] { return s->request != nullptr && !s->done; });
        s->result = (*s->request)();
        s->result_errno = errno;
        s->done = true;
        s->cv.notify_all();
      }
    }).detach();
    return s;
  }();
  std::lock_guard<std::mutex> serial(spawner->serial);
  std::unique_lock<std::mutex> lock(spawner->mu);
  spawner->request = &spawn;
  spawner->done = false;
  spawner->cv.notify_all();
  spawner->cv.wait(lock, [] { return spawner->done; });
  spawner->request = nullptr;
  errno = spawner->result_errno;
  return spawner->result;
}

}  // namespace

std::vector<std::string> QemuDriver::BuildArgv(const VmConfig& config) const {
  bool kvm = config.accelerator == "kvm";
  std::string cmdline =
      absl::StrCat("console=ttyS0 quiet panic=-1 reboot=t airlock.hostname=", config.hostname);
  std::vector<std::string> argv = {
      qemu_path_,
      "-M",
      "microvm,acpi=off,x-option-roms=off,rtc=off",
      "-accel",
      kvm ? "kvm" : "tcg,tb-size=256",
      "-cpu",
      kvm ? "host" : "max",
      "-m",
      absl::StrCat(config.memory_mib, "M"),
      "-smp",
      absl::StrCat(config.vcpus),
      "-nodefaults",
      "-no-user-config",
      "-nographic",
      "-no-reboot",
      "-sandbox",
      "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
      "-chardev",
      absl::StrCat("socket,id=console,fd=", kConsoleFd),
      "-serial",
      "chardev:console",
      "-chardev",
      absl::StrCat("socket,id=qmp,fd=", kQmpFd),
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
      "id=session,file=/dev/fdset/1,format=raw,if=none,discard=unmap,file.locking=off",
      "-device",
      "virtio-blk-device,drive=session,serial=airlock-rw",
      "-add-fd",
      absl::StrCat("fd=", kWorkspaceFd, ",set=2"),
      "-drive",
      "id=workspace,file=/dev/fdset/2,format=raw,if=none,readonly=on,file.locking=off",
      "-device",
      "virtio-blk-device,drive=workspace,serial=airlock-ws",
      "-device",
      "virtio-serial-device,max_ports=2",
      "-chardev",
      absl::StrCat("socket,id=channel,fd=", kChannelFd),
      "-device",
      "virtserialport,chardev=channel,name=airlock.0",
  };
  if (config.incoming_state_fd < 0) {
    // Boot the kernel with the agent's initramfs. (A restored guest brings its kernel along in
    // its RAM, so loading one would be wasted.)
    for (const std::string& a : {std::string("-kernel"), config.kernel_path, std::string("-initrd"),
                                 config.initramfs_path, std::string("-append"), cmdline}) {
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
  int channel[2], qmp[2], console[2], err[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) != 0)
    return ErrnoStatus("socketpair");
  UniqueFd channel_host(channel[0]), channel_vm(channel[1]);
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, qmp) != 0)
    return ErrnoStatus("socketpair");
  UniqueFd qmp_host(qmp[0]), qmp_vm(qmp[1]);
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, console) != 0)
    return ErrnoStatus("socketpair");
  UniqueFd console_host(console[0]), console_vm(console[1]);
  if (pipe2(err, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  UniqueFd err_host(err[0]), err_vm(err[1]);

  std::vector<std::string> args = BuildArgv(config);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string env_path = "PATH=/usr/bin:/bin", env_lang = "LC_ALL=C";
  char* envp[] = {env_path.data(), env_lang.data(), nullptr};
  bool root = geteuid() == 0;
  gid_t kvm_gid = 0;
  if (config.accelerator == "kvm") {
    if (group* g = getgrnam("kvm")) kvm_gid = g->gr_gid;
  }
  UniqueFd disk_read_only(
      open(absl::StrCat("/proc/self/fd/", config.session_disk_fd).c_str(), O_RDONLY | O_CLOEXEC));
  if (!disk_read_only.valid()) return ErrnoStatus("reopen the session disk");
  if (config.workspace_disk_fd < 0) {
    return absl::InvalidArgumentError("a VM needs a workspace disk (an empty one will do)");
  }
  UniqueFd image(open(config.image_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!image.valid()) return ErrnoStatus("open the image", config.image_path);
  const int sources[kSources] = {channel_vm.get(),     qmp_vm.get(),
                                 console_vm.get(),     config.session_disk_fd,
                                 disk_read_only.get(), config.workspace_disk_fd,
                                 image.get()};
  std::unique_ptr<HostCgroup> cgroup;
  std::vector<int> cgroup_procs;
  if (!config.host_cgroup.empty() && root) {
    // TCG keeps translated code (tb-size) and QEMU its own structures beside the guest's RAM.
    uint64_t overhead = (config.accelerator == "kvm" ? 128ull : 384ull) << 20;
    absl::StatusOr<std::unique_ptr<HostCgroup>> created = HostCgroup::Create(
        config.host_cgroup, {.vcpus = config.vcpus,
                             .memory_bytes = (uint64_t{config.memory_mib} << 20) + overhead,
                             .max_tasks = 64 + 4 * config.vcpus});
    if (!created.ok()) return created.status();
    cgroup = *std::move(created);
    cgroup_procs = cgroup->procs_fds();
  }
  pid_t parent = getpid();
  pid_t pid = RunOnSpawnerThread([&] {
    pid_t child = fork();
    if (child == 0) {
      ExecQemu(parent, qemu_path_.c_str(), argv.data(), envp, sources, err_vm.get(), root, kvm_gid,
               cgroup_procs);
    }
    return child;
  });
  if (pid < 0) return ErrnoStatus("fork");
  channel_vm.reset();
  qmp_vm.reset();
  console_vm.reset();
  err_vm.reset();
  UniqueFd pidfd(PidfdOpen(pid));
  if (!pidfd.valid()) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return ErrnoStatus("pidfd_open");
  }
  auto vm =
      std::make_unique<QemuVm>(pid, std::move(pidfd), std::move(console_host), std::move(err_host));
  vm->set_accelerator(config.accelerator);
  vm->set_cgroup(std::move(cgroup));
  vm->set_sync({.pids_max = config.guest_pids_max,
                .hostname = config.hostname,
                .restored = config.incoming_state_fd >= 0,
                .mount_workspace = config.mount_workspace});
  absl::StatusOr<std::unique_ptr<QmpClient>> client =
      QmpClient::Connect(std::move(qmp_host), absl::Now() + absl::Seconds(30));
  if (!client.ok()) return vm->Explain("QEMU did not start", client.status());
  // A guest that breaks the protocol (or whose channel dies) loses its VM at once. The
  // callback holds its own pidfd, so it can never signal a recycled pid.
  auto kill_fd = std::make_shared<UniqueFd>(fcntl(vm->pidfd(), F_DUPFD_CLOEXEC, 0));
  std::shared_ptr<GuestChannel> guest_channel = GuestChannel::Start(
      std::move(channel_host), [kill_fd](const absl::Status&) { PidfdKill(kill_fd->get()); });
  vm->Attach(*std::move(client), std::move(guest_channel));
  if (config.incoming_state_fd >= 0) {
    if (absl::Status s = vm->Restore(config.incoming_state_fd, absl::Now() + absl::Seconds(60));
        !s.ok()) {
      return vm->Explain("the snapshot could not be restored", s);
    }
  }
  return vm;
}

}  // namespace airlock
