#include "src/cli/daemon_client.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/client_interceptor.h"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/common/unique_fd.h"
#include "src/telemetry/trace_context.h"

namespace airlock {
namespace {

bool Answers(const std::shared_ptr<grpc::Channel>& channel, int millis) {
  return channel->WaitForConnected(std::chrono::system_clock::now() +
                                   std::chrono::milliseconds(millis));
}

// Starts airlockd in the background, detached from us and our terminal.
absl::Status StartDaemon() {
  std::string daemon = ExecutableDir() + "/airlockd";
  if (access(daemon.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(daemon, " is missing; run scripts/setup.sh"));
  }
  HostPaths paths = DefaultHostPaths();
  if (absl::Status s = MakeDirectories(paths.home, 0755); !s.ok()) return s;
  std::string log = paths.home + "/airlockd.log";
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    setsid();
    if (fork() != 0) _exit(0);  // the daemon is reparented away from us
    // As packaging/airlockd.service starts it: umask 022 and 65536 open files (more where the
    // hard limit allows; airlockd takes the hard limit).
    umask(022);
    if (rlimit files; getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_max < 65536) {
      rlimit raised = {65536, 65536};
      setrlimit(RLIMIT_NOFILE, &raised);  // only root may raise the hard limit; else as it was
    }
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (null_fd < 0 || log_fd < 0) _exit(127);
    dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    close_range(3, ~0U, 0);
    char* argv[] = {daemon.data(), nullptr};
    execv(daemon.c_str(), argv);
    _exit(127);
  }
  int status;
  waitpid(pid, &status, 0);
  return absl::OkStatus();
}

// Sends $TRACEPARENT (W3C Trace Context, as CI systems and tracing wrappers set it) with every
// call, so that airlockd's spans join the caller's trace. Only a value that parses is sent;
// airlockd parses it again.
class TraceparentFromEnvironment : public grpc::experimental::Interceptor {
 public:
  explicit TraceparentFromEnvironment(std::string value) : value_(std::move(value)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("traceparent", value_);
    }
    methods->Proceed();
  }

 private:
  std::string value_;
};

class TraceparentInterceptors : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TraceparentInterceptors(std::string value) : value_(std::move(value)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TraceparentFromEnvironment(value_);
  }

 private:
  std::string value_;
};

}  // namespace

std::string DaemonSocketPath() {
  const char* env = std::getenv("AIRLOCK_SOCKET");
  return env && *env ? env : "/run/airlock/airlockd.sock";
}

namespace {

std::shared_ptr<grpc::Channel> ChannelTo(const std::string& socket) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(4 << 20);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> traced;
  const char* traceparent = std::getenv("TRACEPARENT");
  if (traceparent != nullptr && telemetry::ParseTraceparent(traceparent).has_value()) {
    traced.push_back(std::make_unique<TraceparentInterceptors>(traceparent));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      "unix:" + socket, grpc::InsecureChannelCredentials(), args, std::move(traced));
}

// Whether the airlockd of this home's pid file is a live process.
bool DaemonAlive() {
  absl::StatusOr<std::string> text =
      ReadFileToString(DefaultHostPaths().home + "/airlockd.pid", 64);
  int pid = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid) || pid <= 1) {
    return false;
  }
  std::string exe;
  exe.resize(4096);
  ssize_t n = readlink(absl::StrCat("/proc/", pid, "/exe").c_str(), exe.data(), exe.size());
  if (n <= 0) return false;
  exe.resize(static_cast<size_t>(n));
  // The pid may have been reused by another program since that airlockd ended.
  return absl::StrContains(exe, "airlockd");
}

// A channel to the airlockd just started, once it answers (it may recover many sessions
// first). Each try is a new channel: one that failed backs off for seconds between attempts
// and would miss a daemon that comes up between them.
std::shared_ptr<grpc::Channel> AwaitStartedDaemon(const std::string& socket) {
  constexpr int kTries = 600;  // 60 s
  for (int i = 0; i < kTries; ++i) {
    struct stat st;
    if (stat(socket.c_str(), &st) == 0) {
      std::shared_ptr<grpc::Channel> channel = ChannelTo(socket);
      if (Answers(channel, 500)) return channel;
    }
    usleep(100000);
  }
  return nullptr;
}

// 0 if a connection to the Unix socket is taken (whether or not anything answers on it), else
// connect(2)'s errno.
int SocketConnectError(const std::string& socket) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (socket.size() >= sizeof(addr.sun_path)) return ENAMETOOLONG;
  std::memcpy(addr.sun_path, socket.data(), socket.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno;
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return errno;
  return 0;
}

// A client whose stubs use channel.
DaemonClient ClientOn(std::shared_ptr<grpc::Channel> channel) {
  DaemonClient client;
  client.channel = channel;
  client.sessions = v1::Sessions::NewStub(channel);
  client.vms = v1::Vms::NewStub(channel);
  client.images = v1::Images::NewStub(channel);
  client.network = v1::Network::NewStub(channel);
  client.secrets = v1::Secrets::NewStub(channel);
  client.workspaces = v1::Workspaces::NewStub(channel);
  client.audit = v1::Audit::NewStub(channel);
  client.api_keys = v1::ApiKeys::NewStub(channel);
  client.volumes = v1::Volumes::NewStub(channel);
  return client;
}

}  // namespace

absl::StatusOr<DaemonClient> ConnectToDaemon() {
  std::string socket = DaemonSocketPath();
  std::shared_ptr<grpc::Channel> channel = ChannelTo(socket);
  if (!Answers(channel, 300)) {
    if (geteuid() != 0) {
      // Why it did not answer: a socket this user may not use, no daemon, or one that is busy
      // (a loaded host), which is waited for as root waits.
      int error = SocketConnectError(socket);
      if (error == EACCES || error == EPERM) {
        return absl::PermissionDeniedError(absl::StrCat(
            "airlockd at ", socket,
            " does not answer you; to use it, join the airlock group (usermod -aG airlock $USER)"));
      }
      if (error != 0) {
        return absl::UnavailableError(absl::StrCat("airlockd is not running (", socket, ": ",
                                                   strerror(error),
                                                   "); start it as root: airlockd &"));
      }
      channel = AwaitStartedDaemon(socket);
      if (channel == nullptr) {
        return absl::UnavailableError(absl::StrCat("airlockd at ", socket,
                                                   " takes connections but does not answer; see ",
                                                   DefaultHostPaths().home, "/airlockd.log"));
      }
      return ClientOn(channel);
    }
    // A daemon that is alive but busy (recovering sessions, a loaded host) is waited for; a
    // second one would only be refused (airlockd holds its home's lock).
    if (!DaemonAlive()) {
      if (absl::Status s = StartDaemon(); !s.ok()) return s;
    }
    channel = AwaitStartedDaemon(socket);
    if (channel == nullptr) {
      return absl::UnavailableError(absl::StrCat("started airlockd, but it does not answer at ",
                                                 socket, "; see ", DefaultHostPaths().home,
                                                 "/airlockd.log"));
    }
  }
  return ClientOn(channel);
}

std::string Describe(const grpc::Status& status) {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE && status.error_message().empty()) {
    return "lost the connection to airlockd";
  }
  return status.error_message();
}

std::optional<DaemonClient> Connect() {
  absl::StatusOr<DaemonClient> client = ConnectToDaemon();
  if (client.ok()) return std::move(*client);
  std::fprintf(stderr, "airlock: %s\n", std::string(client.status().message()).c_str());
  return std::nullopt;
}

int DaemonError(const grpc::Status& status) {
  std::fprintf(stderr, "airlock: %s\n", Describe(status).c_str());
  return 1;
}

}  // namespace airlock
