// Session commands: session create, exec, ls, ps, logs, metrics, rm, pause, resume, fork. All go
// through airlockd.
#include <errno.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "src/cli/cli_commands.h"
#include "src/cli/cli_flags.h"
#include "src/cli/daemon_client.h"
#include "src/cli/exec_client.h"
#include "src/cli/session_json.h"
#include "src/cli/workspace_client.h"
#include "src/net/egress_rule.h"
#include "src/workspace/workspace_capture.h"

namespace airlock {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr char kCreateUsage[] =
    "usage: airlock session create [IMAGE] [--cpus N] [--memory SIZE] [--pids N] [--disk SIZE]\n"
    "                              [--ttl DURATION] [--idle-timeout DURATION]\n"
    "                              [--allow RULE]... [--allow-preset NAME]... [--net-rate SIZE]\n"
    "                              [--secret NAME=SOURCE@HOST[,HOST...][?body]]...\n"
    "                              [--workspace DIR [--workspace-max SIZE]]\n"
    "Starts a session (a durable microVM) and prints its id. Sizes like 512m or 2g, durations\n"
    "like 90s, 30m or 1h. Defaults: 1 vCPU, 512m, 1024 processes, 1g disk, no ttl.\n"
    "  --idle-timeout D  pause the session after D without a command or stream (default 5m;\n"
    "                    0: never). The next exec, logs -f or metrics resumes it.\n"
    "  --allow RULE      let the session reach a destination (repeatable; default: none):\n"
    "                    HOST, *.DOMAIN, IP or CIDR, each optionally :PORT (default 80\n"
    "                    and 443), e.g. --allow pypi.org --allow '*.example.com:8443'\n"
    "  --allow-preset P  the hosts of an ecosystem: pypi, npm, github, debian,\n"
    "                    huggingface, crates, golang, anthropic, openai\n"
    "  --net-rate SIZE   egress bandwidth per second, each way, all connections together\n"
    "                    (like 10m; default: no limit)\n"
    "  --secret SPEC     commands see NAME=<placeholder>; HTTPS requests to HOST carry the\n"
    "                    value instead, e.g. OPENAI_API_KEY=env:OPENAI_API_KEY@api.openai.com\n"
    "                    (SOURCE: env:VAR, file:PATH, op://VAULT/ITEM/FIELD; see airlock\n"
    "                    secret --help)\n"
    "  --workspace DIR   capture the project DIR (with its .git) into the session: commands\n"
    "                    see it at /workspace, writable, while DIR itself is never touched;\n"
    "                    bring work back with airlock diff / promote. A .airlockignore in DIR\n"
    "                    (patterns as in .gitignore) leaves paths out.\n"
    "  --workspace-max SIZE  refuse a project with more file content than this (default 2g)\n";

int SessionCreate(const std::vector<std::string>& args) {
  v1::CreateSessionRequest request;
  std::string workspace;
  uint64_t workspace_max = kDefaultWorkspaceMaxBytes;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has_value = i + 1 < args.size();
    if (a == "--cpus" && has_value) {
      uint32_t n;
      if (!absl::SimpleAtoi(args[++i], &n) || n == 0)
        return Usage(kCreateUsage, "--cpus needs a number");
      request.mutable_limits()->set_vcpus(n);
    } else if ((a == "--memory" || a == "--disk") && has_value) {
      absl::StatusOr<uint64_t> size = ParseSize(args[++i]);
      if (!size.ok()) return Usage(kCreateUsage, std::string(size.status().message()));
      if (a == "--memory") request.mutable_limits()->set_memory_bytes(*size);
      if (a == "--disk") request.mutable_limits()->set_disk_bytes(*size);
    } else if (a == "--pids" && has_value) {
      uint32_t n;
      if (!absl::SimpleAtoi(args[++i], &n)) return Usage(kCreateUsage, "--pids needs a number");
      request.mutable_limits()->set_pids(n);
    } else if (a == "--ttl" && has_value) {
      absl::StatusOr<uint64_t> ttl = ParseDurationSeconds(args[++i]);
      if (!ttl.ok()) return Usage(kCreateUsage, std::string(ttl.status().message()));
      request.mutable_limits()->set_ttl_seconds(*ttl);
    } else if (a == "--net-rate" && has_value) {
      absl::StatusOr<uint64_t> rate = ParseSize(args[++i]);
      if (!rate.ok()) return Usage(kCreateUsage, std::string(rate.status().message()));
      request.mutable_limits()->set_net_bytes_per_second(*rate);
    } else if (a == "--idle-timeout" && has_value) {
      absl::StatusOr<uint64_t> idle = ParseDurationSeconds(args[++i]);
      if (!idle.ok()) return Usage(kCreateUsage, std::string(idle.status().message()));
      request.mutable_limits()->set_idle_timeout_seconds(*idle);
    } else if (a == "--allow" && has_value) {
      absl::StatusOr<net::EgressRule> rule = net::ParseSessionRule(args[++i]);
      if (!rule.ok()) return Usage(kCreateUsage, std::string(rule.status().message()));
      request.add_allow(args[i]);
    } else if (a == "--allow-preset" && has_value) {
      if (absl::Status s = net::PresetRules(args[++i]).status(); !s.ok()) {
        return Usage(kCreateUsage, std::string(s.message()));
      }
      request.add_allow_preset(args[i]);
    } else if (a == "--secret" && has_value) {
      if (absl::Status s = AddSecretBinding(args[++i], request.mutable_secrets()); !s.ok()) {
        return Usage(kCreateUsage, std::string(s.message()));
      }
    } else if (a == "--workspace" && has_value) {
      workspace = args[++i];
    } else if (a == "--workspace-max" && has_value) {
      absl::StatusOr<uint64_t> size = ParseSize(args[++i]);
      if (!size.ok()) return Usage(kCreateUsage, std::string(size.status().message()));
      workspace_max = *size;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kCreateUsage, stdout);
      return 0;
    } else if (a[0] != '-' && request.image().empty()) {
      request.set_image(a);
    } else {
      return Usage(kCreateUsage, "unexpected argument " + a);
    }
  }
  if (!PullIfMissing(request.image(), "session create")) return 1;
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  if (!workspace.empty()) {
    absl::StatusOr<std::string> token = UploadWorkspace(*client, workspace, workspace_max);
    if (!token.ok()) {
      std::fprintf(stderr, "airlock: %s\n", std::string(token.status().message()).c_str());
      return 1;
    }
    request.set_workspace(*token);
  }
  grpc::ClientContext context;
  v1::Session session;
  grpc::Status status = client->sessions->Create(&context, request, &session);
  if (!status.ok()) return DaemonError(status);
  std::printf("%s\n", session.id().c_str());
  return 0;
}

constexpr char kExecUsage[] =
    "usage: airlock exec [-i] [-t] [-e KEY=VALUE] [-w DIR] [-u USER[:GROUP]] [--timeout SECONDS]\n"
    "       [--agent NAME] ID -- COMMAND [ARG...]\n"
    "Runs COMMAND in session ID, streams its output and exits with its exit code.\n"
    "  -i  pass stdin to the command (otherwise it reads /dev/null)\n"
    "  -t  run it on a terminal in the guest, the size of this one (with -i, this terminal is\n"
    "      raw while it runs: ^C, ^Z and every other key go to the command; stdout and stderr\n"
    "      come back together). `airlock exec -it ID -- bash` is a shell.\n"
    "  -u  run as this user of the image, by name or id (default: the image's User, else root)\n"
    "  --agent claude  COMMAND is (or starts) this coding agent: while it runs, its own\n"
    "      transcripts in the guest go into the session's timeline (airlock log ID)\n";

int Exec(const std::vector<std::string>& args) {
  v1::ExecStart start;
  bool tty = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has_value = i + 1 < args.size();
    if (a == "-i" || a == "--interactive") {
      start.set_stdin(true);
    } else if (a == "-t" || a == "--tty") {
      tty = true;
    } else if (a == "--agent" && has_value) {
      start.set_agent(args[++i]);
    } else if (a == "-it" || a == "-ti") {
      start.set_stdin(true);
      tty = true;
    } else if ((a == "-e" || a == "--env") && has_value) {
      const std::string& kv = args[++i];
      if (kv.find('=') == std::string::npos || kv[0] == '=') {
        return Usage(kExecUsage, "-e needs KEY=VALUE");
      }
      start.add_env(kv);
    } else if ((a == "-w" || a == "--workdir") && has_value) {
      start.set_cwd(args[++i]);
    } else if ((a == "-u" || a == "--user") && has_value) {
      start.set_user(args[++i]);
    } else if (a == "--timeout" && has_value) {
      double t;
      if (!absl::SimpleAtod(args[++i], &t) || !(t > 0)) {
        return Usage(kExecUsage, "--timeout needs a positive number of seconds");
      }
      start.set_timeout_seconds(t);
    } else if (a == "--help" || a == "-h") {
      std::fputs(kExecUsage, stdout);
      return 0;
    } else if (a == "--") {
      ++i;
      break;
    } else if (a[0] != '-' && start.session_id().empty()) {
      start.set_session_id(a);
    } else if (a[0] != '-') {
      break;  // the command, without a "--"
    } else {
      return Usage(kExecUsage, "unexpected argument " + a);
    }
  }
  for (; i < args.size(); ++i) start.add_argv(args[i]);
  if (start.session_id().empty()) return Usage(kExecUsage, "which session? give its ID");
  if (start.argv().empty()) return Usage(kExecUsage, "no command given; put it after --");
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

constexpr char kListUsage[] =
    "usage: airlock ls [-a] [--json|-q]\n"
    "Your sessions, newest first: those that are creating, running or paused; with -a (--all)\n"
    "also the stopped and failed ones, whose records, logs and timelines are kept. -q prints\n"
    "only their ids, --json all their fields.\n";

int List(const std::vector<std::string>& args) {
  bool json = false, quiet = false, all = false;
  for (const std::string& a : args) {
    if (a == "--json") {
      json = true;
    } else if (a == "-q" || a == "--quiet") {
      quiet = true;
    } else if (a == "-a" || a == "--all") {
      all = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kListUsage, stdout);
      return 0;
    } else {
      return Usage(kListUsage, "unexpected argument " + a);
    }
  }
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::ListSessionsResponse response;
  grpc::Status status = client->sessions->List(&context, {}, &response);
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
  std::printf("%-12s  %-24s  %-8s  %-8s  %-9s  %-4s  %-6s  %-5s  %-6s  %s\n", "ID", "IMAGE",
              "STATE", "CREATED", "LAST USED", "CPUS", "MEMORY", "PIDS", "DISK", "REASON");
  for (const v1::Session* sp : shown) {
    const v1::Session& s = *sp;
    std::printf("%-12s  %-24s  %-8s  %-8s  %-9s  %-4u  %-6s  %-5u  %-6s  %s\n", s.id().c_str(),
                s.image().c_str(), StateName(s.state()),
                FormatAgo(s.created_unix_ms(), now).c_str(),
                FormatAgo(s.last_used_unix_ms(), now).c_str(), s.limits().vcpus(),
                FormatBytes(s.limits().memory_bytes()).c_str(), s.limits().pids(),
                FormatBytes(s.limits().disk_bytes()).c_str(), s.reason().c_str());
  }
  return 0;
}

int Ps(const std::vector<std::string>& args) {
  bool json = args.size() == 1 && args[0] == "--json";
  if (!args.empty() && !json) return Usage("usage: airlock ps [--json]\n", "unexpected argument");
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::ListVmsResponse response;
  grpc::Status status = client->vms->List(&context, {}, &response);
  if (!status.ok()) return DaemonError(status);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::Vm& vm : response.vms()) {
      out.push_back({{"session_id", vm.session_id()},
                     {"pid", vm.pid()},
                     {"accelerator", vm.accelerator()},
                     {"vcpus", vm.vcpus()},
                     {"host_cpu_percent", vm.host_cpu_percent()},
                     {"host_rss_bytes", vm.host_rss_bytes()}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-12s  %-8s  %-5s  %-5s  %-8s  %s\n", "SESSION", "PID", "ACCEL", "VCPUS", "CPU%",
              "RSS");
  for (const v1::Vm& vm : response.vms()) {
    std::printf("%-12s  %-8d  %-5s  %-5u  %-8.1f  %s\n", vm.session_id().c_str(), vm.pid(),
                vm.accelerator().c_str(), vm.vcpus(), vm.host_cpu_percent(),
                FormatBytes(vm.host_rss_bytes()).c_str());
  }
  std::printf("since airlockd started: %llu boots, %llu restores, %llu snapshots\n",
              static_cast<unsigned long long>(response.boots()),
              static_cast<unsigned long long>(response.restores()),
              static_cast<unsigned long long>(response.snapshots()));
  return 0;
}

int Quota(const std::vector<std::string>& args) {
  bool json = args.size() == 1 && args[0] == "--json";
  if (!args.empty() && !json) {
    return Usage(
        "usage: airlock quota [--json]\n"
        "Shows what your sessions may hold at once on this host and what they use now. A\n"
        "create, resume or fork over a quota fails and names it; the operator sets them\n"
        "(airlockd --quota-file).\n",
        "unexpected argument");
  }
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

constexpr char kLogsUsage[] =
    "usage: airlock logs [-f] [-n N] [--since DURATION] ID\n"
    "Prints the output of every command of session ID with timestamps (also after it stopped).\n"
    "  -f          keep printing new output until the session stops\n"
    "  -n N        only the last N entries\n"
    "  --since D   only entries from the last D (like 10m or 1h)\n";

int Logs(const std::vector<std::string>& args) {
  v1::LogsRequest request;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has_value = i + 1 < args.size();
    if (a == "-f" || a == "--follow") {
      request.set_follow(true);
    } else if ((a == "-n" || a == "--tail") && has_value) {
      uint32_t n;
      if (!absl::SimpleAtoi(args[++i], &n)) return Usage(kLogsUsage, "-n needs a number");
      request.set_tail(n);
    } else if (a == "--since" && has_value) {
      absl::StatusOr<uint64_t> d = ParseDurationSeconds(args[++i]);
      if (!d.ok()) return Usage(kLogsUsage, std::string(d.status().message()));
      request.set_since_unix_ms(NowMs() - static_cast<int64_t>(*d) * 1000);
    } else if (a[0] != '-' && request.session_id().empty()) {
      request.set_session_id(a);
    } else {
      return Usage(kLogsUsage, "unexpected argument " + a);
    }
  }
  if (request.session_id().empty()) return Usage(kLogsUsage, "which session? give its ID");
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::LogEntry>> reader =
      client->sessions->Logs(&context, request);
  v1::LogEntry entry;
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
      std::printf("%s.%03dZ %s %s\n", when, static_cast<int>(entry.unix_ms() % 1000), tag,
                  line.c_str());
      start = end == std::string::npos ? end : end + 1;
    } while (start != std::string::npos);
    std::fflush(stdout);
  }
  grpc::Status status = reader->Finish();
  return status.ok() ? 0 : DaemonError(status);
}

int Metrics(const std::vector<std::string>& args) {
  bool watch = false;
  std::vector<std::string> ids;
  for (const std::string& a : args) {
    if (a == "--watch" || a == "-w")
      watch = true;
    else if (a[0] != '-')
      ids.push_back(a);
    else
      return Usage("usage: airlock metrics [--watch] [ID...]\n", "unexpected argument " + a);
  }
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
      if (reader->Read(&sample)) samples.push_back(sample);
      context.TryCancel();
      grpc::Status status = reader->Finish();
      if (samples.empty() || samples.back().session_id() != id) {
        if (!ids.empty()) return DaemonError(status);
      }
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
  if (args.empty()) return Usage("usage: airlock rm ID...\n", "which session? give its ID");
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

constexpr char kPauseUsage[] =
    "usage: airlock pause ID...\n"
    "Snapshots each session to disk and ends its VM (no process, no host memory). Every\n"
    "process and file comes back with `airlock resume ID`, or on the next exec.\n";
constexpr char kResumeUsage[] =
    "usage: airlock resume ID...\n"
    "Restores paused sessions from their snapshots, every process and file as it was.\n";

// pause and resume: one RPC per id, which it prints on success.
int PauseOrResume(const std::vector<std::string>& args, bool pause) {
  const char* usage = pause ? kPauseUsage : kResumeUsage;
  if (args.empty()) return Usage(usage, "which session? give its ID");
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (a[0] == '-') return Usage(usage, "unexpected argument " + a);
  }
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

constexpr char kForkUsage[] =
    "usage: airlock fork ID [-n N]\n"
    "Makes N (default 1, at most 64) independent copies of session ID, running or paused,\n"
    "from one snapshot of it: each with its own disk, id and hostname and a reseeded RNG.\n"
    "Prints the new ids, one per line. The source session goes on as it was.\n";

int Fork(const std::vector<std::string>& args) {
  v1::ForkSessionRequest request;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if ((a == "-n" || a == "--count") && i + 1 < args.size()) {
      uint32_t n;
      if (!absl::SimpleAtoi(args[++i], &n) || n == 0 || n > 64) {
        return Usage(kForkUsage, "-n needs a number from 1 to 64");
      }
      request.set_count(n);
    } else if (a == "--help" || a == "-h") {
      std::fputs(kForkUsage, stdout);
      return 0;
    } else if (a[0] != '-' && request.id().empty()) {
      request.set_id(a);
    } else {
      return Usage(kForkUsage, "unexpected argument " + a);
    }
  }
  if (request.id().empty()) return Usage(kForkUsage, "which session? give its ID");
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::ForkSessionResponse response;
  grpc::Status status = client->sessions->Fork(&context, request, &response);
  if (!status.ok()) return DaemonError(status);
  for (const v1::Session& s : response.sessions()) std::printf("%s\n", s.id().c_str());
  return 0;
}

constexpr char kFileUsage[] =
    "usage: airlock file write [--mode 0644] ID PATH < DATA\n"
    "       airlock file read ID PATH > DATA\n"
    "Writes stdin to a file in session ID, of any size, or prints a file of it. PATH is\n"
    "absolute in the guest. The file is created or replaced (missing directories are made)\n"
    "once all of stdin is in: an interrupted write leaves the old file.\n";

int File(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kFileUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  bool write = args[0] == "write";
  if (!write && args[0] != "read") return Usage(kFileUsage, "file write or file read?");
  uint32_t mode = 0;
  std::vector<std::string> rest;
  for (size_t i = 1; i < args.size(); ++i) {
    if (write && args[i] == "--mode" && i + 1 < args.size()) {
      const std::string& text = args[++i];
      char* end = nullptr;
      unsigned long parsed = std::strtoul(text.c_str(), &end, 8);
      mode = static_cast<uint32_t>(parsed);
      if (text.empty() || *end != '\0' || parsed > 07777) {
        return Usage(kFileUsage, "--mode needs octal permission bits like 0755");
      }
    } else if (args[i][0] == '-') {
      return Usage(kFileUsage, "unexpected argument " + args[i]);
    } else {
      rest.push_back(args[i]);
    }
  }
  if (rest.size() != 2) return Usage(kFileUsage, "give the session's ID and the file's PATH");
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  if (write) {
    v1::WriteFileResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::WriteFileChunk>> stream =
        client->sessions->WriteFileStream(&context, &response);
    v1::WriteFileChunk chunk;
    chunk.set_session_id(rest[0]);
    chunk.set_path(rest[1]);
    chunk.set_mode(mode);
    grpc::Status status = UploadFd(STDIN_FILENO, chunk, *stream, context);
    return status.ok() ? 0 : DaemonError(status);
  }
  v1::ReadFileStreamRequest request;
  request.set_session_id(rest[0]);
  request.set_path(rest[1]);
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

constexpr char kWatchUsage[] =
    "usage: airlock watch [ID] [--json]\n"
    "What happens to your sessions (or to session ID) from now on, one line each, until\n"
    "interrupted: state changes with their reason, commands starting and ending, egress\n"
    "denials, removals. --json prints each event as a JSON object on its own line.\n";

int Watch(const std::vector<std::string>& args) {
  v1::WatchRequest request;
  bool json = false;
  for (const std::string& a : args) {
    if (a == "--json") {
      json = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kWatchUsage, stdout);
      return 0;
    } else if (a[0] != '-' && request.session_id().empty()) {
      request.set_session_id(a);
    } else {
      return Usage(kWatchUsage, "unexpected argument " + a);
    }
  }
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
      if (e.kind() == v1::SessionEvent::KIND_STATE) out["state"] = StateName(e.state());
      if (!e.reason().empty()) out["reason"] = e.reason();
      if (e.exec_id() != 0) out["exec_id"] = e.exec_id();
      if (e.kind() == v1::SessionEvent::KIND_EXEC_START) out["argv"] = e.argv();
      if (e.kind() == v1::SessionEvent::KIND_EXEC_EXIT) out["exit_code"] = e.exit_code();
      if (!e.destination().empty()) out["destination"] = e.destination();
      if (e.lost() != 0) out["lost"] = e.lost();
      std::printf("%s\n",
                  out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      time_t t = static_cast<time_t>(e.unix_ms() / 1000);
      char when[32];
      strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", gmtime(&t));
      std::string what;
      switch (e.kind()) {
        case v1::SessionEvent::KIND_STATE:
          what = absl::StrCat(StateName(e.state()), e.reason().empty() ? "" : ": ", e.reason());
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
          what = "removed";
          break;
        default:
          what = "an event this airlock does not know (upgrade it)";
      }
      if (e.lost() != 0)
        std::printf("(%llu events lost here)\n", static_cast<unsigned long long>(e.lost()));
      std::printf("%s.%03dZ %s %s\n", when, static_cast<int>(e.unix_ms() % 1000),
                  e.session_id().c_str(), what.c_str());
    }
    std::fflush(stdout);
  }
  grpc::Status status = reader->Finish();
  return status.ok() ? 0 : DaemonError(status);
}

}  // namespace

int FileCommand(const std::vector<std::string>& args) { return File(args); }
int PauseCommand(const std::vector<std::string>& args) { return PauseOrResume(args, true); }
int ResumeCommand(const std::vector<std::string>& args) { return PauseOrResume(args, false); }
int ForkCommand(const std::vector<std::string>& args) { return Fork(args); }

int SessionCommand(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "create") {
    return SessionCreate(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  return Usage(kCreateUsage, "usage: airlock session create ...");
}
int ExecCommand(const std::vector<std::string>& args) { return Exec(args); }
int ListCommand(const std::vector<std::string>& args) { return List(args); }
int PsCommand(const std::vector<std::string>& args) { return Ps(args); }
int QuotaCommand(const std::vector<std::string>& args) { return Quota(args); }
int LogsCommand(const std::vector<std::string>& args) { return Logs(args); }
int MetricsCommand(const std::vector<std::string>& args) { return Metrics(args); }
int WatchCommand(const std::vector<std::string>& args) { return Watch(args); }
int RemoveCommand(const std::vector<std::string>& args) { return Remove(args); }

}  // namespace airlock
