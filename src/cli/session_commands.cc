// Session commands: session create, exec, ls, ps, logs, metrics, rm, pause, resume, fork. All go
// through airlockd.
#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/cli/cli_app.h"
#include "src/cli/cli_commands.h"
#include "src/cli/cli_flags.h"
#include "src/cli/daemon_client.h"
#include "src/cli/exec_client.h"
#include "src/cli/run_args.h"
#include "src/cli/session_json.h"
#include "src/cli/session_options.h"
#include "src/cli/workspace_client.h"
#include "src/common/utf8.h"
#include "src/net/egress_rule.h"
#include "src/workspace/workspace_capture.h"

namespace airlock {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr char kCreateFooter[] =
    "Starts a session (a durable microVM) and prints its id. Sizes like 512m or 2g, durations\n"
    "like 90s, 30m or 1h. Defaults: 1 vCPU, 512m, 1024 processes, 1g disk, no ttl, paused\n"
    "after 5m idle.";

int SessionCreate(const SessionOptions& options) {
  if (!PullIfMissing(options.image, "session create")) return 1;
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  v1::CreateSessionRequest request;
  if (absl::Status s = ApplySessionOptions(*client, options, &request); !s.ok()) {
    std::fprintf(stderr, "airlock: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  grpc::ClientContext context;
  v1::Session session;
  grpc::Status status = client->sessions->Create(&context, request, &session);
  if (!status.ok()) return DaemonError(status);
  std::printf("%s\n", session.id().c_str());
  return 0;
}

constexpr char kExecFooter[] =
    "Runs COMMAND in session ID, streams its output and exits with its exit code.\n"
    "`airlock exec -it ID -- bash` is a shell: with -i and -t this terminal is raw while it\n"
    "runs (^C, ^Z and every other key go to the command; stdout and stderr come back\n"
    "together). `airlock exec -d ID -- python3 -m http.server 8000` starts a server and returns\n"
    "at once, saying its pid and where its output goes (/var/log/airlock/exec-N.log in the\n"
    "guest); `airlock expose ID 8000` then gives it a URL.";

struct ExecArgs {
  std::string id;
  std::vector<std::string> command;
  std::vector<std::string> env;
  std::string workdir, user, agent;
  double timeout_seconds = 0;
  bool interactive = false, tty = false, detach = false;
};

int Exec(const ExecArgs& args) {
  v1::ExecStart start;
  start.set_session_id(args.id);
  for (const std::string& a : args.command) start.add_argv(a);
  for (const std::string& e : args.env) start.add_env(e);
  start.set_cwd(args.workdir);
  start.set_user(args.user);
  start.set_agent(args.agent);
  start.set_stdin(args.interactive);
  start.set_timeout_seconds(args.timeout_seconds);
  start.set_detach(args.detach);
  if (start.argv().empty()) {
    std::fprintf(stderr,
                 "airlock exec: no command given; put it after --, e.g. airlock exec "
                 "ID -- ls\n");
    return 2;
  }
  bool tty = args.tty;
  if (tty) {
    if (absl::Status s = UseTerminal(&start); !s.ok()) {
      std::fprintf(stderr, "airlock exec: %s\n", std::string(s.message()).c_str());
      return kExitAirlockError;
    }
  }
  std::optional<DaemonClient> client = Connect();
  if (!client) return kExitAirlockError;
  return StreamExec(*client, start);
}

constexpr char kListFooter[] =
    "Your sessions, newest first: those that are creating, running or paused; with -a (--all)\n"
    "also the stopped and failed ones, whose records, logs and timelines are kept.\n"
    "--all-tenants (root and read-only operators) lists every tenant's, with a TENANT column.";

int List(bool all, bool quiet, bool json, bool all_tenants) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::ListSessionsRequest request;
  request.set_all_tenants(all_tenants);
  v1::ListSessionsResponse response;
  grpc::Status status = client->sessions->List(&context, request, &response);
  if (!status.ok()) return DaemonError(status);
  std::vector<const v1::Session*> shown;
  for (const v1::Session& s : response.sessions()) {
    bool live = s.state() == v1::SESSION_STATE_CREATING || s.state() == v1::SESSION_STATE_RUNNING ||
                s.state() == v1::SESSION_STATE_PAUSED;
    if (all || live) shown.push_back(&s);
  }
  if (quiet) {
    for (const v1::Session* s : shown) std::printf("%s\n", s->id().c_str());
    return 0;
  }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::Session* s : shown) out.push_back(SessionToJson(*s));
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  int64_t now = NowMs();
  // In a fleet, which host has each session.
  bool fleet = std::any_of(shown.begin(), shown.end(),
                           [](const v1::Session* s) { return !s->host().empty(); });
  if (all_tenants) std::printf("%-20s  ", "TENANT");
  std::printf("%-12s  ", "ID");
  if (fleet) std::printf("%-12s  ", "HOST");
  std::printf("%-24s  %-8s  %-8s  %-9s  %-4s  %-6s  %-5s  %-6s  %s\n", "IMAGE", "STATE", "CREATED",
              "LAST USED", "CPUS", "MEMORY", "PIDS", "DISK", "REASON");
  for (const v1::Session* sp : shown) {
    const v1::Session& s = *sp;
    if (all_tenants) std::printf("%-20s  ", s.tenant().c_str());
    std::printf("%-12s  ", s.id().c_str());
    if (fleet) std::printf("%-12s  ", EscapeForTerminal(s.host()).c_str());
    std::printf("%-24s  %-8s  %-8s  %-9s  %-4u  %-6s  %-5u  %-6s  %s\n", s.image().c_str(),
                StateName(s.state()), FormatAgo(s.created_unix_ms(), now).c_str(),
                FormatAgo(s.last_used_unix_ms(), now).c_str(), s.limits().vcpus(),
                FormatBytes(s.limits().memory_bytes()).c_str(), s.limits().pids(),
                FormatBytes(s.limits().disk_bytes()).c_str(), s.reason().c_str());
  }
  return 0;
}

int Hosts(bool json) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::ListHostsResponse response;
  grpc::Status status = client->vms->Hosts(&context, v1::ListHostsRequest(), &response);
  if (!status.ok()) return DaemonError(status);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::Host& host : response.hosts()) {
      out.push_back({{"id", host.id()},
                     {"this_host", host.this_host()},
                     {"up", host.up()},
                     {"draining", host.draining()},
                     {"vcpus", host.vcpus()},
                     {"memory_bytes", host.memory_bytes()},
                     {"sessions", host.session_ids()}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-24s  %-14s  %-5s  %-8s  %-8s  %s\n", "HOST", "STATE", "VCPUS", "MEMORY",
              "SESSIONS", "RUNNING");
  for (const v1::Host& host : response.hosts()) {
    std::string running;
    for (const std::string& id : host.session_ids())
      absl::StrAppend(&running, running.empty() ? "" : " ", id);
    std::string state = host.up() ? (host.draining() ? "draining" : "up")
                                  : (host.draining() ? "down, draining" : "down");
    std::printf("%-24s  %-14s  %-5u  %-8s  %-8d  %s\n",
                (host.id() + (host.this_host() ? " *" : "")).c_str(), state.c_str(), host.vcpus(),
                FormatBytes(host.memory_bytes()).c_str(), host.session_ids_size(), running.c_str());
  }
  if (!response.fleet()) std::printf("one host: airlockd runs without --blob-store and --etcd\n");
  return 0;
}

int DrainHost(const v1::DrainHostRequest& request) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::Host host;
  grpc::Status status = client->vms->DrainHost(&context, request, &host);
  if (!status.ok()) return DaemonError(status);
  if (request.undo()) {
    std::printf("host %s takes sessions again\n", host.id().c_str());
    return 0;
  }
  std::string running;
  for (const std::string& id : host.session_ids())
    absl::StrAppend(&running, running.empty() ? "" : " ", id);
  std::printf(
      "host %s is draining: it takes no new session, resume or fork, and pauses each running "
      "session once no command runs in it, for the other hosts to resume%s\n",
      host.id().c_str(),
      !host.up()        ? " (it is down now: it takes nothing when it comes back)"
      : running.empty() ? " (it runs none now)"
                        : absl::StrCat(" (running now: ", running, ")").c_str());
  std::printf("follow it with `airlock hosts`; end it with `airlock hosts drain --undo %s`\n",
              host.id().c_str());
  return 0;
}

int CollectBlobs(const v1::CollectBlobsRequest& request, bool json) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::BlobCollection run;
  grpc::Status status = client->vms->CollectBlobs(&context, request, &run);
  if (!status.ok()) return DaemonError(status);
  if (json) {
    nlohmann::json removed = nlohmann::json::array();
    for (const v1::BlobCollection::Removed& r : run.removed()) {
      removed.push_back({{"digest", r.digest()}, {"bytes", r.bytes()}});
    }
    nlohmann::json out = {{"dry_run", request.dry_run()},
                          {"grace_seconds", run.grace_seconds()},
                          {"blobs", run.blobs()},
                          {"records", run.records()},
                          {"referenced", run.referenced()},
                          {"pinned", run.pinned()},
                          {"waiting", run.waiting()},
                          {"marked", run.marked()},
                          {"removed", removed},
                          {"removed_bytes", run.removed_bytes()}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  const char* would = request.dry_run() ? "would be " : "";
  for (const v1::BlobCollection::Removed& r : run.removed()) {
    std::printf("%sremoved  %s  %s\n", would, r.digest().c_str(), FormatBytes(r.bytes()).c_str());
  }
  for (const std::string& digest : run.marked())
    std::printf("%smarked   %s\n", would, digest.c_str());
  std::printf(
      "%llu blobs, %llu named by %llu published sessions; %d %smarked (removed by a run %s "
      "from now, if still named by none), %llu waiting for their grace, %llu kept for pauses "
      "uploading them; %d %sremoved, %s freed\n",
      static_cast<unsigned long long>(run.blobs()),
      static_cast<unsigned long long>(run.referenced()),
      static_cast<unsigned long long>(run.records()), run.marked_size(), would,
      absl::FormatDuration(absl::Seconds(run.grace_seconds())).c_str(),
      static_cast<unsigned long long>(run.waiting()), static_cast<unsigned long long>(run.pinned()),
      run.removed_size(), would, FormatBytes(run.removed_bytes()).c_str());
  return 0;
}

int Ps(bool json, bool all_tenants) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::ListVmsRequest request;
  request.set_all_tenants(all_tenants);
  v1::ListVmsResponse response;
  grpc::Status status = client->vms->List(&context, request, &response);
  if (!status.ok()) return DaemonError(status);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::Vm& vm : response.vms()) {
      out.push_back({{"session_id", vm.session_id()},
                     {"tenant", vm.tenant()},
                     {"pid", vm.pid()},
                     {"accelerator", vm.accelerator()},
                     {"vcpus", vm.vcpus()},
                     {"host_cpu_percent", vm.host_cpu_percent()},
                     {"host_rss_bytes", vm.host_rss_bytes()}});
    }
    for (const v1::PooledVm& vm : response.pooled()) {
      out.push_back({{"pool", true},
                     {"image", vm.image()},
                     {"pid", vm.pid()},
                     {"accelerator", vm.accelerator()},
                     {"vcpus", vm.vcpus()},
                     {"memory_bytes", vm.memory_bytes()},
                     {"host_rss_bytes", vm.host_rss_bytes()}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (all_tenants) std::printf("%-20s  ", "TENANT");
  std::printf("%-12s  %-8s  %-5s  %-5s  %-8s  %s\n", "SESSION", "PID", "ACCEL", "VCPUS", "CPU%",
              "RSS");
  for (const v1::Vm& vm : response.vms()) {
    if (all_tenants) std::printf("%-20s  ", vm.tenant().c_str());
    std::printf("%-12s  %-8d  %-5s  %-5u  %-8.1f  %s\n", vm.session_id().c_str(), vm.pid(),
                vm.accelerator().c_str(), vm.vcpus(), vm.host_cpu_percent(),
                FormatBytes(vm.host_rss_bytes()).c_str());
  }
  // The warm pool (shown to root and operators): VMs waiting for a session.
  for (const v1::PooledVm& vm : response.pooled()) {
    if (all_tenants) std::printf("%-20s  ", "-");
    std::printf("%-12s  %-8d  %-5s  %-5u  %-8s  %-8s  warm pool: %s, %s\n", "(pool)", vm.pid(),
                vm.accelerator().c_str(), vm.vcpus(), "-", FormatBytes(vm.host_rss_bytes()).c_str(),
                vm.image().c_str(), FormatBytes(vm.memory_bytes()).c_str());
  }
  std::printf(
      "since airlockd started: %llu boots, %llu restores, %llu snapshots, %llu from the pool\n",
      static_cast<unsigned long long>(response.boots()),
      static_cast<unsigned long long>(response.restores()),
      static_cast<unsigned long long>(response.snapshots()),
      static_cast<unsigned long long>(response.pool_takes()));
  return 0;
}

constexpr char kQuotaFooter[] =
    "Shows what your sessions may hold at once on this host and what they use now. A create,\n"
    "resume or fork over a quota fails and names it; the operator sets them (airlockd\n"
    "--quota-file).";

int Quota(bool json) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::QuotaReport report;
  grpc::Status status = client->sessions->Quota(&context, {}, &report);
  if (!status.ok()) return DaemonError(status);
  if (json) {
    nlohmann::json items = nlohmann::json::array();
    for (const v1::QuotaItem& q : report.items()) {
      nlohmann::json item = {{"name", q.name()}, {"limit", q.limit()}, {"what", q.what()}};
      if (!q.per_request()) item["used"] = q.used();
      items.push_back(item);
    }
    std::printf("%s\n",
                nlohmann::json({{"tenant", report.tenant()}, {"quotas", items}}).dump(2).c_str());
    return 0;
  }
  auto show = [](const v1::QuotaItem& q, uint64_t n) {
    return q.bytes() ? FormatBytes(n) : std::to_string(n);
  };
  std::printf("tenant %s\n%-9s  %-10s  %-10s  %s\n", report.tenant().c_str(), "QUOTA", "USED",
              "LIMIT", "WHAT");
  for (const v1::QuotaItem& q : report.items()) {
    std::printf("%-9s  %-10s  %-10s  %s\n", q.name().c_str(),
                q.per_request() ? "-" : show(q, q.used()).c_str(), show(q, q.limit()).c_str(),
                q.what().c_str());
  }
  return 0;
}

int Logs(const v1::LogsRequest& request) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::LogEntry>> reader =
      client->sessions->Logs(&context, request);
  v1::LogEntry entry;
  const bool tty = isatty(STDOUT_FILENO);
  while (reader->Read(&entry)) {
    time_t t = static_cast<time_t>(entry.unix_ms() / 1000);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", gmtime(&t));
    const char* tag = entry.stream() == v1::LogEntry::STREAM_STDOUT   ? "out"
                      : entry.stream() == v1::LogEntry::STREAM_STDERR ? "err"
                                                                      : "---";
    std::string data = entry.data();
    if (!data.empty() && data.back() == '\n') data.pop_back();
    size_t start = 0;
    do {
      size_t end = data.find('\n', start);
      std::string line = data.substr(start, end == std::string::npos ? end : end - start);
      // airlockd's own entries quote what a guest chose (a DNS name): always escaped. Command
      // output is escaped on a terminal, where it could drive it or forge a line, and kept as
      // it was otherwise (a file, a pipe).
      bool escape = tty || (entry.stream() != v1::LogEntry::STREAM_STDOUT &&
                            entry.stream() != v1::LogEntry::STREAM_STDERR);
      std::printf("%s.%03dZ %s %s\n", when, static_cast<int>(entry.unix_ms() % 1000), tag,
                  escape ? EscapeForTerminal(line).c_str() : line.c_str());
      start = end == std::string::npos ? end : end + 1;
    } while (start != std::string::npos);
    std::fflush(stdout);
  }
  grpc::Status status = reader->Finish();
  return status.ok() ? 0 : DaemonError(status);
}

int Metrics(const std::vector<std::string>& ids, bool watch, bool json) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  bool tty = isatty(STDOUT_FILENO);
  for (bool first = true; first || watch; first = false) {
    std::vector<std::string> targets = ids;
    if (targets.empty()) {
      grpc::ClientContext context;
      v1::ListVmsResponse vms;
      grpc::Status status = client->vms->List(&context, {}, &vms);
      if (!status.ok()) return DaemonError(status);
      for (const v1::Vm& vm : vms.vms()) targets.push_back(vm.session_id());
    }
    std::vector<v1::MetricsSample> samples;
    for (const std::string& id : targets) {
      grpc::ClientContext context;
      v1::MetricsRequest request;
      request.set_session_id(id);
      request.set_interval_ms(500);
      std::unique_ptr<grpc::ClientReader<v1::MetricsSample>> reader =
          client->sessions->Metrics(&context, request);
      v1::MetricsSample sample;
      // One sample is all this needs; without one, Finish says why (not cancelled by us).
      if (reader->Read(&sample)) {
        samples.push_back(sample);
        context.TryCancel();
      }
      grpc::Status status = reader->Finish();
      if (samples.empty() || samples.back().session_id() != id) {
        if (!ids.empty()) return DaemonError(status);
      }
    }
    if (json) {
      nlohmann::json out = nlohmann::json::array();
      for (const v1::MetricsSample& s : samples) {
        out.push_back(MetricsToJson(s));
      }
      // --watch: one array per line, a stream a program can read line by line.
      std::printf("%s\n", out.dump(watch ? -1 : 2).c_str());
      std::fflush(stdout);
      if (watch) std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    if (watch && tty) std::printf("\033[H\033[2J");
    std::printf("%-12s  %6s  %-17s  %5s  %-17s  %-19s  %s\n", "SESSION", "CPU%", "MEMORY", "PROCS",
                "DISK", "NET OUT / IN", "DENIED");
    for (const v1::MetricsSample& s : samples) {
      std::printf(
          "%-12s  %6.1f  %-17s  %5llu  %-17s  %-19s  %llu\n", s.session_id().c_str(),
          s.cpu_percent(),
          absl::StrCat(FormatBytes(s.memory_used_bytes()), " / ",
                       FormatBytes(s.memory_total_bytes()))
              .c_str(),
          static_cast<unsigned long long>(s.processes()),
          absl::StrCat(FormatBytes(s.disk_used_bytes()), " / ", FormatBytes(s.disk_total_bytes()))
              .c_str(),
          absl::StrCat(FormatBytes(s.net_bytes_out()), " / ", FormatBytes(s.net_bytes_in()))
              .c_str(),
          static_cast<unsigned long long>(s.net_denied()));
    }
    std::fflush(stdout);
    if (watch) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return 0;
}

int Remove(const std::vector<std::string>& args) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  int code = 0;
  for (const std::string& id : args) {
    grpc::ClientContext context;
    v1::RemoveSessionRequest request;
    request.set_id(id);
    v1::RemoveSessionResponse response;
    grpc::Status status = client->sessions->Remove(&context, request, &response);
    if (!status.ok()) {
      std::fprintf(stderr, "airlock rm: %s\n", Describe(status).c_str());
      code = 1;
    } else {
      std::printf("%s\n", id.c_str());
    }
  }
  return code;
}

// pause and resume: one RPC per id, which it prints on success.
int PauseOrResume(const std::vector<std::string>& args, bool pause) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  int code = 0;
  for (const std::string& id : args) {
    grpc::ClientContext context;
    v1::Session session;
    grpc::Status status;
    if (pause) {
      v1::PauseSessionRequest request;
      request.set_id(id);
      status = client->sessions->Pause(&context, request, &session);
    } else {
      v1::ResumeSessionRequest request;
      request.set_id(id);
      status = client->sessions->Resume(&context, request, &session);
    }
    if (!status.ok()) {
      std::fprintf(stderr, "airlock %s: %s\n", pause ? "pause" : "resume",
                   Describe(status).c_str());
      code = 1;
    } else {
      std::printf("%s\n", id.c_str());
    }
  }
  return code;
}

constexpr char kForkFooter[] =
    "Makes N independent copies of session ID, running or paused, from one snapshot of it:\n"
    "each with its own disk, id and hostname and a reseeded RNG. Prints the new ids, one per\n"
    "line. The source session goes on as it was.";

int Fork(const v1::ForkSessionRequest& request) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::ForkSessionResponse response;
  grpc::Status status = client->sessions->Fork(&context, request, &response);
  if (!status.ok()) return DaemonError(status);
  for (const v1::Session& s : response.sessions()) std::printf("%s\n", s.id().c_str());
  return 0;
}

constexpr char kFileFooter[] =
    "PATH is absolute in the guest. The file is created or replaced (missing directories are\n"
    "made) once all of stdin is in: an interrupted write leaves the old file.";

int File(bool write, const std::string& id, const std::string& path, uint32_t mode) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  if (write) {
    v1::WriteFileResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::WriteFileChunk>> stream =
        client->sessions->WriteFileStream(&context, &response);
    v1::WriteFileChunk chunk;
    chunk.set_session_id(id);
    chunk.set_path(path);
    chunk.set_mode(mode);
    grpc::Status status = UploadFd(STDIN_FILENO, chunk, *stream, context);
    return status.ok() ? 0 : DaemonError(status);
  }
  v1::ReadFileStreamRequest request;
  request.set_session_id(id);
  request.set_path(path);
  std::unique_ptr<grpc::ClientReader<v1::ReadFileChunk>> stream =
      client->sessions->ReadFileStream(&context, request);
  v1::ReadFileChunk chunk;
  while (stream->Read(&chunk)) {
    if (std::fwrite(chunk.data().data(), 1, chunk.data().size(), stdout) != chunk.data().size()) {
      std::fprintf(stderr, "airlock file read: write stdout: %s\n", std::strerror(errno));
      context.TryCancel();
      stream->Finish().IgnoreError();  // cancelled by us: the error above is the one to show
      return 1;
    }
  }
  grpc::Status status = stream->Finish();
  if (!status.ok()) return DaemonError(status);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

constexpr char kWatchFooter[] =
    "What happens to your sessions (or to session ID) from now on, one line each, until\n"
    "interrupted: state changes with their reason, commands starting and ending, egress\n"
    "denials, removals. --json prints each event as a JSON object on its own line.\n"
    "--all-tenants (root and read-only operators): every tenant's sessions, each line naming\n"
    "the tenant after the session. In a fleet, sessions other hosts have too: their state\n"
    "changes and their end there, each line saying (on host NAME), within about a second.";

int Watch(const v1::WatchRequest& request, bool json) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> reader =
      client->sessions->Watch(&context, request);
  v1::SessionEvent e;
  while (reader->Read(&e)) {
    const char* kind = e.kind() == v1::SessionEvent::KIND_STATE        ? "state"
                       : e.kind() == v1::SessionEvent::KIND_EXEC_START ? "exec_start"
                       : e.kind() == v1::SessionEvent::KIND_EXEC_EXIT  ? "exec_exit"
                       : e.kind() == v1::SessionEvent::KIND_DENIED     ? "denied"
                       : e.kind() == v1::SessionEvent::KIND_REMOVED    ? "removed"
                                                                       : "unknown";
    std::string argv;
    for (const std::string& a : e.argv()) absl::StrAppend(&argv, argv.empty() ? "" : " ", a);
    if (json) {
      nlohmann::json out = {
          {"kind", kind}, {"unix_ms", e.unix_ms()}, {"session_id", e.session_id()}};
      if (request.all_tenants()) out["tenant"] = e.tenant();
      if (e.kind() == v1::SessionEvent::KIND_STATE) out["state"] = StateName(e.state());
      if (!e.reason().empty()) out["reason"] = e.reason();
      if (e.exec_id() != 0) out["exec_id"] = e.exec_id();
      if (e.kind() == v1::SessionEvent::KIND_EXEC_START) out["argv"] = e.argv();
      if (e.kind() == v1::SessionEvent::KIND_EXEC_EXIT) out["exit_code"] = e.exit_code();
      if (!e.destination().empty()) out["destination"] = e.destination();
      if (e.lost() != 0) out["lost"] = e.lost();
      if (!e.host().empty()) out["host"] = e.host();
      std::printf("%s\n",
                  out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      time_t t = static_cast<time_t>(e.unix_ms() / 1000);
      char when[32];
      strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", gmtime(&t));
      std::string what;
      switch (e.kind()) {
        case v1::SessionEvent::KIND_STATE:
          what = absl::StrCat(StateName(e.state()), e.reason().empty() ? "" : ": ", e.reason(),
                              e.host().empty() ? "" : " (on host ", e.host(),
                              e.host().empty() ? "" : ")");
          break;
        case v1::SessionEvent::KIND_EXEC_START:
          what = absl::StrCat("exec ", e.exec_id(), " started: ", argv);
          break;
        case v1::SessionEvent::KIND_EXEC_EXIT:
          what = absl::StrCat("exec ", e.exec_id(), " exited ", e.exit_code(),
                              e.reason().empty() ? "" : ": ", e.reason());
          break;
        case v1::SessionEvent::KIND_DENIED:
          what = absl::StrCat("denied ", e.destination(), ": ", e.reason());
          break;
        case v1::SessionEvent::KIND_REMOVED:
          what = absl::StrCat("removed", e.reason().empty() ? "" : ": ", e.reason(),
                              e.host().empty() ? "" : " (on host ", e.host(),
                              e.host().empty() ? "" : ")");
          break;
        default:
          what = "an event this airlock does not know (upgrade it)";
      }
      if (e.lost() != 0)
        std::printf("(%llu events lost here)\n", static_cast<unsigned long long>(e.lost()));
      std::printf("%s.%03dZ %s%s%s %s\n", when, static_cast<int>(e.unix_ms() % 1000),
                  e.session_id().c_str(), request.all_tenants() ? " " : "",
                  request.all_tenants() ? e.tenant().c_str() : "", what.c_str());
    }
    std::fflush(stdout);
  }
  grpc::Status status = reader->Finish();
  return status.ok() ? 0 : DaemonError(status);
}

}  // namespace

void AddSessionCommands(Cli& cli) {
  CLI::App* root = &cli.app();

  CLI::App* session = cli.Group("session", "durable sessions: session create");
  auto create = std::make_shared<SessionOptions>();
  CLI::App* c = cli.Add(session, "create", "start a durable session; prints its id",
                        [create] { return SessionCreate(*create); });
  c->footer(kCreateFooter);
  c->add_option("IMAGE", create->image, "the image (default: airlock/bookworm-python)");
  AddSessionOptions(c, create.get(), /*durable=*/true);

  auto exec = std::make_shared<ExecArgs>();
  CLI::App* e = cli.Add(root, "exec", "run a command in a session: exec [-i] [-t] [-d] ID -- CMD",
                        [exec] { return Exec(*exec); });
  e->footer(kExecFooter);
  AddSessionId(e, &exec->id);
  e->add_flag("-i,--interactive", exec->interactive,
              "pass stdin to the command (otherwise it reads /dev/null)");
  CLI::Option* tty =
      e->add_flag("-t,--tty", exec->tty, "run it on a terminal in the guest, the size of this one");
  e->add_flag("-d,--detach", exec->detach,
              "start it and leave it running (a server): prints its pid and the file in the "
              "guest its output goes to; it runs on across pause and resume")
      ->excludes(tty)
      ->excludes("-i");
  AddEnvOption(e, &exec->env);
  AddWorkdirOption(e, &exec->workdir);
  AddUserOption(e, &exec->user);
  AddSecondsOption(e, "--timeout", &exec->timeout_seconds,
                   "end the command after this wall-clock time (exit 124)")
      ->excludes("-d");
  e->add_option("--agent", exec->agent,
                "COMMAND is (or starts) this coding agent (claude): while it runs, its own "
                "transcripts in the guest go into the session's timeline (airlock log ID)")
      ->type_name("NAME");
  cli.TakesCommand(e, &exec->command);

  struct ListArgs {
    bool all = false, quiet = false, json = false, all_tenants = false;
  };
  auto ls = std::make_shared<ListArgs>();
  CLI::App* l = cli.Add(root, "ls", "your live sessions (-a: stopped and failed ones too)",
                        [ls] { return List(ls->all, ls->quiet, ls->json, ls->all_tenants); });
  l->add_flag("--all-tenants", ls->all_tenants,
              "every tenant's sessions (root and read-only operators)");
  l->footer(kListFooter);
  l->add_flag("-a,--all", ls->all, "also stopped and failed sessions");
  l->add_flag("-q,--quiet", ls->quiet, "only their ids");
  AddJsonFlag(l, &ls->json)->excludes("-q");

  struct PsArgs {
    bool json = false, all_tenants = false;
  };
  auto ps = std::make_shared<PsArgs>();
  CLI::App* p = cli.Add(root, "ps", "live VM processes: pid, accelerator, host CPU and memory",
                        [ps] { return Ps(ps->json, ps->all_tenants); });
  p->add_flag("--all-tenants", ps->all_tenants,
              "every tenant's VMs (root and read-only operators)");
  AddJsonFlag(p, &ps->json);

  auto hosts_json = std::make_shared<bool>(false);
  CLI::App* h = cli.Add(root, "hosts", "the hosts of airlockd's fleet and the sessions each runs",
                        [hosts_json] { return Hosts(*hosts_json); });
  h->footer(
      "Lists the hosts that share sessions with this one (airlockd --blob-store and --etcd),\n"
      "with their state (up, draining, down), CPUs and memory and the sessions each runs now;\n"
      "without a fleet, this host alone. For root and read-only operators. A session paused on\n"
      "one host resumes on any other: `airlock resume ID` there.");
  AddJsonFlag(h, hosts_json.get());
  auto drain = std::make_shared<v1::DrainHostRequest>();
  CLI::App* dr = cli.Add(h, "drain", "move a host's sessions off it: it takes nothing new",
                         [drain] { return DrainHost(*drain); });
  dr->footer(
      "Marks HOST draining, in the fleet's etcd (it lasts across the host's restarts): it takes\n"
      "no new session, resume or fork (they are refused, naming the host), and pauses each of\n"
      "its running sessions once no command runs in it, publishing it to the blob store; the\n"
      "next resume, exec or request on another host runs it there. Sessions with volumes are\n"
      "paused but stay on HOST (volumes do not travel yet). `airlock hosts` shows the drain;\n"
      "--undo ends it. Root only; audited.");
  dr->add_option_function<std::string>(
        "HOST", [drain](const std::string& h) { drain->set_host(h); },
        "the host, as `airlock hosts` lists it")
      ->required();
  dr->add_flag_function(
      "--undo", [drain](int64_t) { drain->set_undo(true); },
      "end the drain: the host takes sessions again");

  CLI::App* blobs = cli.Group("blobs", "the fleet's blob store: blobs gc");
  struct GcArgs {
    v1::CollectBlobsRequest request;
    bool json = false;
  };
  auto gc = std::make_shared<GcArgs>();
  CLI::App* g = cli.Add(blobs, "gc", "remove blobs no published session names any more",
                        [gc] { return CollectBlobs(gc->request, gc->json); });
  g->footer(
      "Collects the blob store the fleet's hosts share (airlockd --blob-store and\n"
      "--etcd) in two phases: a run marks the blobs that no published session's\n"
      "snapshot names, and a run at least the grace later removes those still named\n"
      "by none. Run it from cron (every hour, say) on any one host; hosts take turns.\n"
      "A pause uploading a blob at the same time keeps it. Root only; read-only\n"
      "operators may --dry-run.");
  g->add_flag_function(
      "--dry-run", [gc](int64_t) { gc->request.set_dry_run(true); },
      "say what it would mark and remove; change nothing");
  AddDurationOption(
      g, "--grace", [gc](uint64_t d) { gc->request.set_grace_seconds(d == 0 ? 1 : d); },
      "how long a blob stays marked before it is removed (default 1h)");
  AddJsonFlag(g, &gc->json);

  auto quota_json = std::make_shared<bool>(false);
  CLI::App* q = cli.Add(root, "quota", "what your sessions may hold at once, and what they use",
                        [quota_json] { return Quota(*quota_json); });
  q->footer(kQuotaFooter);
  AddJsonFlag(q, quota_json.get());

  auto logs = std::make_shared<v1::LogsRequest>();
  CLI::App* lg = cli.Add(root, "logs", "output of a session's commands, with timestamps",
                         [logs] { return Logs(*logs); });
  lg->footer(
      "Prints the output of every command of session ID with timestamps (also after it\n"
      "stopped). On a terminal, control characters in it are shown as \\xNN, so that a\n"
      "guest's output cannot drive the terminal; into a file or a pipe it goes as it was.");
  AddSessionId(lg, [logs](const std::string& v) { logs->set_session_id(v); });
  lg->add_flag_function(
      "-f,--follow", [logs](int64_t) { logs->set_follow(true); },
      "keep printing new output until the session stops");
  AddCountOption(
      lg, "-n,--tail", [logs](uint32_t n) { logs->set_tail(n); }, 0, 1u << 30,
      "only the last N entries");
  AddDurationOption(
      lg, "--since",
      [logs](uint64_t d) { logs->set_since_unix_ms(NowMs() - static_cast<int64_t>(d) * 1000); },
      "only entries from the last D (like 10m or 1h)");

  struct MetricsArgs {
    std::vector<std::string> ids;
    bool watch = false, json = false;
  };
  auto metrics = std::make_shared<MetricsArgs>();
  CLI::App* m = cli.Add(root, "metrics", "guest CPU, memory, processes, disk and network",
                        [metrics] { return Metrics(metrics->ids, metrics->watch, metrics->json); });
  AddSessionIds(m, &metrics->ids, /*required=*/false)
      ->description("the sessions (default: every running one)");
  m->add_flag("-w,--watch", metrics->watch, "again every half second until interrupted");
  AddJsonFlag(m, &metrics->json);

  auto rm = std::make_shared<std::vector<std::string>>();
  CLI::App* r =
      cli.Add(root, "rm", "destroy sessions (their logs stay)", [rm] { return Remove(*rm); });
  AddSessionIds(r, rm.get());

  auto pause = std::make_shared<std::vector<std::string>>();
  CLI::App* pa = cli.Add(root, "pause", "snapshot sessions to disk and free their VMs",
                         [pause] { return PauseOrResume(*pause, true); });
  pa->footer(
      "Snapshots each session to disk and ends its VM (no process, no host memory). Every\n"
      "process and file comes back with `airlock resume ID`, or on the next exec.");
  AddSessionIds(pa, pause.get());
  auto resume = std::make_shared<std::vector<std::string>>();
  CLI::App* re = cli.Add(root, "resume", "bring paused sessions back (exec does it too)",
                         [resume] { return PauseOrResume(*resume, false); });
  re->footer("Restores paused sessions from their snapshots, every process and file as it was.");
  AddSessionIds(re, resume.get());

  auto fork = std::make_shared<v1::ForkSessionRequest>();
  CLI::App* f = cli.Add(root, "fork", "independent copies of a session; prints their ids",
                        [fork] { return Fork(*fork); });
  f->footer(kForkFooter);
  AddSessionId(f, [fork](const std::string& v) { fork->set_id(v); });
  AddCountOption(
      f, "-n,--count", [fork](uint32_t n) { fork->set_count(n); }, 1, UINT32_MAX,
      "how many copies (default 1)");

  struct FileArgs {
    std::string id, path;
    uint32_t mode = 0;
  };
  auto file = std::make_shared<FileArgs>();
  CLI::App* fi = cli.Group("file", "write a file into a session, or read one of it");
  CLI::App* fw =
      cli.Add(fi, "write", "write stdin to PATH in session ID: file write ID PATH < DATA",
              [file] { return File(true, file->id, file->path, file->mode); });
  CLI::App* fr = cli.Add(fi, "read", "print PATH of session ID: file read ID PATH > DATA",
                         [file] { return File(false, file->id, file->path, 0); });
  for (CLI::App* app : {fw, fr}) {
    app->footer(kFileFooter);
    AddSessionId(app, &file->id);
    app->add_option("PATH", file->path, "an absolute path in the guest")->required();
  }
  fw->add_option_function<std::string>(
        "--mode",
        [file](const std::string& text) {
          char* end = nullptr;
          unsigned long parsed = std::strtoul(text.c_str(), &end, 8);
          if (text.empty() || *end != '\0' || parsed > 07777) {
            throw CLI::ValidationError("--mode needs octal permission bits like 0755");
          }
          file->mode = static_cast<uint32_t>(parsed);
        },
        "the new file's permission bits, in octal (default 0644, or the old file's)")
      ->type_name("MODE");

  struct WatchArgs {
    v1::WatchRequest request;
    bool json = false;
  };
  auto watch = std::make_shared<WatchArgs>();
  CLI::App* w = cli.Add(root, "watch", "what happens to your sessions, as it happens",
                        [watch] { return Watch(watch->request, watch->json); });
  w->footer(kWatchFooter);
  AddSessionId(
      w, [watch](const std::string& v) { watch->request.set_session_id(v); }, /*required=*/false)
      ->description("only this session");
  w->add_flag_function(
      "--all-tenants", [watch](int64_t) { watch->request.set_all_tenants(true); },
      "every tenant's sessions (root and read-only operators)");
  AddJsonFlag(w, &watch->json);
}

}  // namespace airlock
