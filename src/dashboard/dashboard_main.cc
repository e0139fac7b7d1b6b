// airlock-dashboard: the read-only web dashboard, its own process (`airlock dashboard` starts
// it). A gRPC client of airlockd, as a read-only operator: over TCP with its own client
// certificate, or over the Unix socket as a uid named by airlockd --operator (or root). It keeps
// the last four minutes of what airlockd reports in memory (DashboardState) and serves one page
// over HTTPS only; nothing is written to disk and nothing on the page changes anything.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/airlock/v1/airlock.grpc.pb.h"
#include "src/common/file_util.h"
#include "src/common/hex.h"
#include "src/common/sha256.h"
#include "src/dashboard/dashboard_page.h"
#include "src/dashboard/dashboard_state.h"

namespace airlock {
namespace {

constexpr char kUsage[] =
    "usage: airlock dashboard --listen HOST:PORT --tls-cert PEM --tls-key PEM\n"
    "           [--daemon HOST:PORT --client-cert PEM --client-key PEM --ca PEM\n"
    "            [--daemon-name NAME] | --socket PATH] [--token-file FILE] [--interval SECONDS]\n";
constexpr char kCookie[] = "airlock_dashboard";
constexpr int64_t kLoginMs = 12 * 3600 * 1000;
constexpr size_t kMaxLogins = 1000;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "localhost", or an address of 127.0.0.0/8 or ::1.
bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

int Fail(const std::string& message, int code = 1) {
  std::fprintf(stderr, "airlock dashboard: %s\n", message.c_str());
  return code;
}

struct Options {
  std::string listen, tls_cert, tls_key;
  std::string daemon, daemon_name, client_cert, client_key, ca;
  std::string socket;
  std::string token_file;
  int interval_seconds = 2;
};

// Signed-in browsers: random cookie values, each good for kLoginMs.
class Logins {
 public:
  std::string Add() {
    unsigned char raw[32];
    if (RAND_bytes(raw, sizeof(raw)) != 1) return "";
    std::string id = HexString(raw, sizeof(raw));
    int64_t now = NowMs();
    absl::MutexLock lock(&mu_);
    for (auto it = expiry_.begin(); it != expiry_.end();) {
      it = it->second < now ? expiry_.erase(it) : std::next(it);
    }
    if (expiry_.size() >= kMaxLogins) {
      auto oldest = expiry_.begin();
      for (auto it = expiry_.begin(); it != expiry_.end(); ++it) {
        if (it->second < oldest->second) oldest = it;
      }
      expiry_.erase(oldest);
    }
    expiry_[id] = now + kLoginMs;
    return id;
  }
  bool Valid(const std::string& cookie_header) {
    std::string prefix = std::string(kCookie) + "=";
    size_t at = 0;
    while ((at = cookie_header.find(prefix, at)) != std::string::npos) {
      bool starts = at == 0 || cookie_header[at - 1] == ' ' || cookie_header[at - 1] == ';';
      size_t begin = at + prefix.size();
      size_t end = cookie_header.find(';', begin);
      std::string value = cookie_header.substr(begin, end == std::string::npos ? end : end - begin);
      at = begin;
      if (!starts) continue;
      absl::MutexLock lock(&mu_);
      auto it = expiry_.find(value);
      if (it != expiry_.end() && it->second >= NowMs()) return true;
    }
    return false;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, int64_t> expiry_ ABSL_GUARDED_BY(mu_);
};

// Asks airlockd for every tenant's sessions and VMs every interval, and follows its events.
class Collector {
 public:
  Collector(std::shared_ptr<grpc::Channel> channel, DashboardState* state, int interval_seconds)
      : sessions_(v1::Sessions::NewStub(channel)),
        vms_(v1::Vms::NewStub(channel)),
        state_(state),
        interval_(interval_seconds) {}
  ~Collector() { Stop(); }

  void Start() {
    poller_ = std::thread([this] { Poll(); });
    watcher_ = std::thread([this] { Watch(); });
  }
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
      if (watch_context_ != nullptr) watch_context_->TryCancel();
    }
    cv_.SignalAll();
    if (poller_.joinable()) poller_.join();
    if (watcher_.joinable()) watcher_.join();
  }

 private:
  static std::string Describe(const grpc::Status& status) {
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      return "cannot reach airlockd (" + status.error_message() + ")";
    }
    return status.error_message();
  }
  bool Wait(std::chrono::seconds how_long) {
    absl::MutexLock lock(&mu_);
    absl::Time until = absl::Now() + absl::FromChrono(how_long);
    while (!stopping_ && !cv_.WaitWithDeadline(&mu_, until)) {
    }
    return !stopping_;
  }
  void Poll() {
    do {
      grpc::ClientContext list_context;
      list_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      v1::ListSessionsRequest every;
      every.set_all_tenants(true);
      v1::ListSessionsResponse listed;
      grpc::Status status = sessions_->List(&list_context, every, &listed);
      if (!status.ok()) {
        state_->SetDaemonError(Describe(status), NowMs());
        continue;
      }
      state_->SetSessions({listed.sessions().begin(), listed.sessions().end()}, NowMs());
      grpc::ClientContext vms_context;
      vms_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      v1::ListVmsRequest all_vms;
      all_vms.set_all_tenants(true);
      v1::ListVmsResponse vms;
      status = vms_->List(&vms_context, all_vms, &vms);
      if (!status.ok()) {
        state_->SetDaemonError(Describe(status), NowMs());
        continue;
      }
      state_->AddVmSamples({vms.vms().begin(), vms.vms().end()}, NowMs());
    } while (Wait(interval_));
  }
  void Watch() {
    do {
      grpc::ClientContext context;
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        watch_context_ = &context;
      }
      v1::WatchRequest request;
      request.set_all_tenants(true);
      std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> reader =
          sessions_->Watch(&context, request);
      v1::SessionEvent event;
      while (reader->Read(&event)) state_->AddEvent(event);
      grpc::Status status = reader->Finish();
      {
        absl::MutexLock lock(&mu_);
        watch_context_ = nullptr;
      }
      if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
        state_->SetDaemonError("events: " + Describe(status), NowMs());
      }
    } while (Wait(std::chrono::seconds(2)));  // then follow again
  }

  std::unique_ptr<v1::Sessions::Stub> sessions_;
  std::unique_ptr<v1::Vms::Stub> vms_;
  DashboardState* state_;
  const std::chrono::seconds interval_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* watch_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread poller_, watcher_;
};

std::string LoginPage(const std::string& message) {
  std::string page = kDashboardLoginHtml;
  page.replace(page.find("%MESSAGE%"), 9, message);  // only our own fixed messages
  return page;
}

int Serve(const Options& o) {
  if (o.tls_cert.empty() || o.tls_key.empty()) {
    return Fail(
        "the dashboard serves HTTPS only: give --tls-cert and --tls-key (a certificate its "
        "users' browsers trust)",
        2);
  }
  size_t colon = o.listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(o.listen.substr(colon + 1), &port) ||
      port <= 0 || port > 65535) {
    return Fail("--listen HOST:PORT, like 127.0.0.1:8443 or 0.0.0.0:8443", 2);
  }
  std::string host = o.listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::string token;
  if (!o.token_file.empty()) {
    absl::StatusOr<std::string> read = ReadFileToString(o.token_file, 4096);
    if (!read.ok()) return Fail(absl::StrCat("--token-file: ", read.status().message()));
    token = std::string(absl::StripAsciiWhitespace(*read));
    if (token.size() < 16) {
      return Fail(
          "--token-file: the token must be at least 16 characters (e.g. openssl rand "
          "-hex 32)");
    }
    struct stat st;
    if (stat(o.token_file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
      std::fprintf(stderr, "airlock dashboard: warning: %s can be read by others; chmod 600 it\n",
                   o.token_file.c_str());
    }
  }

  // Without a token anyone who reaches the page sees every tenant's sessions: only this
  // machine may.
  if (token.empty() && !IsLoopback(host)) {
    return Fail(absl::StrCat("--listen ", o.listen,
                             " is an address others can reach: give --token-file FILE (a secret "
                             "of 16 or more characters that users sign in with), or listen on "
                             "127.0.0.1"),
                2);
  }

  std::shared_ptr<grpc::Channel> channel;
  std::string source;
  if (!o.daemon.empty()) {
    if (o.client_cert.empty() || o.client_key.empty() || o.ca.empty()) {
      return Fail(
          "--daemon needs --client-cert, --client-key (the dashboard's own, named by "
          "airlockd --operator cert:NAME) and --ca (what signed airlockd's certificate)",
          2);
    }
    grpc::SslCredentialsOptions tls;
    for (auto [path, out] :
         {std::pair{&o.ca, &tls.pem_root_certs}, std::pair{&o.client_key, &tls.pem_private_key},
          std::pair{&o.client_cert, &tls.pem_cert_chain}}) {
      absl::StatusOr<std::string> pem = ReadFileToString(*path, 1 << 20);
      if (!pem.ok()) return Fail(std::string(pem.status().message()));
      *out = *pem;
    }
    grpc::ChannelArguments args;
    if (!o.daemon_name.empty()) args.SetSslTargetNameOverride(o.daemon_name);
    channel = grpc::CreateCustomChannel(o.daemon, grpc::SslCredentials(tls), args);
    source = o.daemon;
  } else {
    const char* env_socket = std::getenv("AIRLOCK_SOCKET");
    std::string socket = !o.socket.empty() ? o.socket
                         : env_socket      ? env_socket
                                           : "/run/airlock/airlockd.sock";
    channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
    source = socket;
  }

  httplib::SSLServer server(o.tls_cert.c_str(), o.tls_key.c_str());
  if (!server.is_valid()) {
    return Fail("could not load --tls-cert and --tls-key (PEM certificate and its private key)");
  }
  server.set_payload_max_length(8192);
  server.set_read_timeout(10, 0);
  server.set_write_timeout(10, 0);
  server.set_keep_alive_max_count(100);
  server.set_default_headers(
      {{"Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"},
       {"X-Content-Type-Options", "nosniff"},
       {"Referrer-Policy", "no-referrer"},
       {"Cache-Control", "no-store"},
       {"Strict-Transport-Security", "max-age=31536000"}});

  DashboardState state;
  Logins logins;
  auto signed_in = [&](const httplib::Request& req) {
    return token.empty() || logins.Valid(req.get_header_value("Cookie"));
  };
  server.Get("/", [&](const httplib::Request& req, httplib::Response& res) {
    if (!signed_in(req)) {
      res.status = 303;
      res.set_header("Location", "/login");
      return;
    }
    res.set_content(kDashboardHtml, "text/html; charset=utf-8");
  });
  server.Get("/app.js", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kDashboardScript, "text/javascript; charset=utf-8");
  });
  server.Get("/style.css", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kDashboardStyle, "text/css; charset=utf-8");
  });
  server.Get("/api/state", [&](const httplib::Request& req, httplib::Response& res) {
    if (!signed_in(req)) {
      res.status = 401;
      res.set_content(R"({"error":"sign in at /login"})", "application/json");
      return;
    }
    res.set_content(
        state.ToJson(NowMs()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
        "application/json");
  });
  server.Get("/login", [&](const httplib::Request&, httplib::Response& res) {
    if (token.empty()) {
      res.status = 303;
      res.set_header("Location", "/");
      return;
    }
    res.set_content(LoginPage(""), "text/html; charset=utf-8");
  });
  server.Post("/login", [&](const httplib::Request& req, httplib::Response& res) {
    std::string given = req.get_param_value("token");
    bool same = SecretEquals(given, token);
    if (!same) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // slows guessing
      res.status = 401;
      res.set_content(LoginPage("That is not this dashboard's token."), "text/html; charset=utf-8");
      return;
    }
    std::string id = logins.Add();
    if (id.empty()) {
      res.status = 500;
      return;
    }
    res.status = 303;
    res.set_header("Set-Cookie",
                   absl::StrCat(kCookie, "=", id, "; Path=/; Secure; HttpOnly; SameSite=Strict"));
    res.set_header("Location", "/");
  });

  if (!server.bind_to_port(host.c_str(), port)) {
    return Fail(absl::StrCat("cannot listen on ", o.listen, " (in use, or not an address here)"));
  }
  Collector collector(channel, &state, o.interval_seconds);
  collector.Start();
  // SIGINT and SIGTERM stop the server from a thread of their own (blocked everywhere else).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  std::thread stopper([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    server.stop();
  });
  stopper.detach();
  std::fprintf(stderr, "airlock dashboard: https://%s/ (reading airlockd at %s)%s\n",
               o.listen.c_str(), source.c_str(), token.empty() ? "" : "; sign in with the token");
  bool served = server.listen_after_bind();
  collector.Stop();
  return served ? 0 : Fail("the HTTPS server stopped");
}

}  // namespace
}  // namespace airlock

int main(int argc, char** argv) {
  // Blocked before any thread starts, so that only the stopper receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  airlock::Options o;
  std::string interval;
  std::map<std::string, std::string*> flags = {
      {"--listen", &o.listen},           {"--tls-cert", &o.tls_cert},
      {"--tls-key", &o.tls_key},         {"--daemon", &o.daemon},
      {"--daemon-name", &o.daemon_name}, {"--client-cert", &o.client_cert},
      {"--client-key", &o.client_key},   {"--ca", &o.ca},
      {"--socket", &o.socket},           {"--token-file", &o.token_file},
      {"--interval", &interval}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(airlock::kUsage, stdout);
      return 0;
    }
    auto flag = flags.find(arg);
    if (flag == flags.end() || i + 1 >= argc) {
      std::fprintf(stderr, "airlock dashboard: bad argument %s\n%s", arg.c_str(), airlock::kUsage);
      return 2;
    }
    *flag->second = argv[++i];
  }
  if (!interval.empty() && (!absl::SimpleAtoi(interval, &o.interval_seconds) ||
                            o.interval_seconds < 1 || o.interval_seconds > 60)) {
    std::fprintf(stderr, "airlock dashboard: --interval is 1 to 60 seconds\n");
    return 2;
  }
  if (o.listen.empty()) o.listen = "127.0.0.1:8443";
  return airlock::Serve(o);
}
