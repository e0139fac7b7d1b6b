#include "src/daemon/daemon_telemetry.h"

#include <unistd.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "src/common/log.h"
#include "src/common/process_stats.h"
#include "src/telemetry/metrics.h"
#include "src/telemetry/trace_context.h"

namespace airlock {

namespace {

constexpr size_t kAuditRecordsPerExport = 1000;

// The span of one call: from its metadata (which may carry the caller's traceparent) until its
// status is sent. The sync server runs both hooks and the handler on the call's thread, so the
// span is current there and what the handler does becomes its children.
class CallSpan : public grpc::experimental::Interceptor {
 public:
  CallSpan(grpc::experimental::ServerRpcInfo* info, telemetry::Tracer* tracer)
      : info_(info), tracer_(tracer) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using Hook = grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(Hook::POST_RECV_INITIAL_METADATA)) {
      std::optional<telemetry::SpanContext> parent;
      if (auto* metadata = methods->GetRecvInitialMetadata()) {
        auto it = metadata->find("traceparent");
        if (it != metadata->end()) {
          parent =
              telemetry::ParseTraceparent(absl::string_view(it->second.data(), it->second.size()));
        }
      }
      // "/airlock.v1.Sessions/Create" -> "airlock.v1.Sessions/Create", as OpenTelemetry's RPC
      // conventions name a span.
      absl::string_view method = info_->method() != nullptr ? info_->method() : "";
      absl::ConsumePrefix(&method, "/");
      span_.emplace(tracer_, std::string(method), parent);
      span_->SetAttribute("rpc.system", "grpc");
      size_t slash = method.find('/');
      if (slash != absl::string_view::npos) {
        span_->SetAttribute("rpc.service", std::string(method.substr(0, slash)));
        span_->SetAttribute("rpc.method", std::string(method.substr(slash + 1)));
      }
    }
    if (methods->QueryInterceptionHookPoint(Hook::PRE_SEND_STATUS) && span_) {
      grpc::Status status = methods->GetSendStatus();
      span_->SetAttribute("rpc.grpc.status_code", static_cast<int64_t>(status.error_code()));
      if (!status.ok()) span_->SetError(status.error_message());
      span_->End();
    }
    methods->Proceed();
  }

 private:
  grpc::experimental::ServerRpcInfo* info_;
  telemetry::Tracer* tracer_;
  std::optional<telemetry::Span> span_;
};

class CallSpanFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CallSpanFactory(telemetry::Tracer* tracer) : tracer_(tracer) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CallSpan(info, tracer_);
  }

 private:
  telemetry::Tracer* tracer_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonTelemetry>> DaemonTelemetry::Create(Options options,
                                                                         StateStore* store,
                                                                         SessionManager* sessions) {
  telemetry::OtlpExporter::Options exporter_options;
  exporter_options.endpoint = options.endpoint;
  exporter_options.headers = options.headers;
  absl::StatusOr<std::unique_ptr<telemetry::OtlpExporter>> exporter =
      telemetry::OtlpExporter::Create(std::move(exporter_options));
  if (!exporter.ok()) return exporter.status();
  if (options.interval < absl::Seconds(1) || options.interval > absl::Hours(1)) {
    return absl::InvalidArgumentError("--otlp-interval is 1s to 1h");
  }
  absl::StatusOr<int64_t> last = store->audit().LastSeq();
  if (!last.ok()) return last.status();
  std::unique_ptr<DaemonTelemetry> t(new DaemonTelemetry(std::move(options), store, sessions));
  t->exporter_ = *std::move(exporter);
  t->tracer_ = std::make_unique<telemetry::Tracer>(t->exporter_.get(), t->resource_);
  t->audit_seq_ = *last;  // records from now on; the log before is airlock audit's
  t->thread_ = std::thread([p = t.get()] { p->Run(); });
  return t;
}

DaemonTelemetry::DaemonTelemetry(Options options, StateStore* store, SessionManager* sessions)
    : options_(std::move(options)),
      store_(store),
      sessions_(sessions),
      resource_(telemetry::AirlockdResource(options_.version)),
      start_unix_nanos_(telemetry::NowUnixNanos()) {}

DaemonTelemetry::~DaemonTelemetry() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  tracer_.reset();  // its last batch goes to the exporter, which then stops
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
DaemonTelemetry::CallSpans() {
  return std::make_unique<CallSpanFactory>(tracer_.get());
}

void DaemonTelemetry::Run() {
  for (;;) {
    bool stop;
    {
      absl::MutexLock lock(&mu_);
      absl::Time until = absl::Now() + options_.interval;
      while (!stopping_ && !cv_.WaitWithDeadline(&mu_, until)) {
      }
      stop = stopping_;
    }
    ExportAudit();
    ExportMetrics();
    if (stop) return;
  }
}

void DaemonTelemetry::ExportAudit() {
  for (;;) {
    absl::StatusOr<std::vector<AuditRecord>> records =
        store_->audit().After(audit_seq_, kAuditRecordsPerExport);
    if (!records.ok()) {
      LogWarning(absl::StrCat("telemetry: the audit log not read: ", records.status().message()));
      return;
    }
    if (records->empty()) return;
    otlp::v1::ExportLogsServiceRequest request;
    otlp::v1::ResourceLogs* rl = request.add_resource_logs();
    *rl->mutable_resource() = resource_;
    otlp::v1::ScopeLogs* scope = rl->add_scope_logs();
    scope->mutable_scope()->set_name("airlockd.audit");
    uint64_t now = telemetry::NowUnixNanos();
    for (const AuditRecord& r : *records) {
      otlp::v1::LogRecord* log = scope->add_log_records();
      log->set_time_unix_nano(static_cast<uint64_t>(r.unix_ms) * 1000000);
      log->set_observed_time_unix_nano(now);
      bool refused = r.outcome.rfind("denied", 0) == 0 || r.outcome.rfind("failed", 0) == 0 ||
                     r.outcome.rfind("refused", 0) == 0;
      log->set_severity_number(refused ? otlp::v1::SEVERITY_NUMBER_WARN
                                       : otlp::v1::SEVERITY_NUMBER_INFO);
      log->set_severity_text(refused ? "WARN" : "INFO");
      log->mutable_body()->set_string_value(
          absl::StrCat(r.principal, " ", r.action, " ", r.target, ": ", r.outcome));
      for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
               {"airlock.audit.principal", r.principal},
               {"airlock.audit.tenant", r.tenant},
               {"airlock.audit.action", r.action},
               {"airlock.audit.target", r.target},
               {"airlock.audit.outcome", r.outcome},
               {"airlock.audit.hash", r.hash}}) {
        otlp::v1::KeyValue* kv = log->add_attributes();
        kv->set_key(key);
        kv->mutable_value()->set_string_value(value);
      }
      otlp::v1::KeyValue* seq = log->add_attributes();
      seq->set_key("airlock.audit.seq");
      seq->mutable_value()->set_int_value(r.seq);
      audit_seq_ = r.seq;
    }
    exporter_->Enqueue(telemetry::Signal::kLogs, request.SerializeAsString());
    if (records->size() < kAuditRecordsPerExport) return;
  }
}

void DaemonTelemetry::ExportMetrics() {
  telemetry::MetricsBatch batch(resource_, start_unix_nanos_, telemetry::NowUnixNanos());
  absl::StatusOr<std::vector<SessionRecord>> sessions = store_->sessions().ListEveryTenant();
  if (sessions.ok()) {
    std::map<std::string, int> by_state;
    for (SessionState state :
         {SessionState::kCreating, SessionState::kRunning, SessionState::kPaused,
          SessionState::kStopped, SessionState::kFailed}) {
      by_state[SessionStateName(state)] = 0;
    }
    for (const SessionRecord& s : *sessions) ++by_state[SessionStateName(s.state)];
    for (const auto& [state, n] : by_state) {
      batch.Gauge("airlock.sessions", "{session}", "sessions by state", n, {{"state", state}});
    }
  }
  // Each running VM: host CPU since the last export, resident memory, and its egress.
  double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  absl::Time now = absl::Now();
  std::map<pid_t, std::pair<uint64_t, absl::Time>> cpu;
  for (const std::shared_ptr<LiveSession>& live :
       sessions_->LiveSessions(SessionEventHub::kEveryTenant)) {
    telemetry::Attributes who = {{"airlock.session.id", live->record.id},
                                 {"airlock.tenant", live->record.tenant}};
    pid_t pid = live->vm->pid();
    uint64_t ticks = ProcessTicks(pid);
    cpu[pid] = {ticks, now};
    if (auto before = cpu_.find(pid); before != cpu_.end() && ticks >= before->second.first) {
      double seconds = absl::ToDoubleSeconds(now - before->second.second);
      if (seconds > 0) {
        batch.Gauge("airlock.vm.cpu.utilization", "1",
                    "host CPU a session's VM used since the last export (1 = one core)",
                    static_cast<double>(ticks - before->second.first) / tick / seconds, who);
      }
    }
    batch.Gauge("airlock.vm.memory.usage", "By", "host memory resident for a session's VM",
                static_cast<double>(ProcessRss(pid)), who);
    net::EgressPath::Counters net = sessions_->EgressCounters(live->record.tenant, live->record.id);
    telemetry::Attributes out = who, in = who;
    out.push_back({"network.io.direction", "transmit"});
    in.push_back({"network.io.direction", "receive"});
    batch.Counter("airlock.network.io", "By", "egress bytes of a session's VM since it started",
                  static_cast<int64_t>(net.bytes_out), out);
    batch.Counter("airlock.network.io", "By", "egress bytes of a session's VM since it started",
                  static_cast<int64_t>(net.bytes_in), in);
    batch.Counter("airlock.network.denials", "{connection}",
                  "connections and lookups the egress policy refused",
                  static_cast<int64_t>(net.denied), who);
  }
  cpu_ = std::move(cpu);
  VmCounters& c = sessions_->counters();
  batch.Counter("airlock.vm.boots", "{vm}", "VMs booted from scratch", c.boots);
  batch.Counter("airlock.vm.restores", "{vm}", "VMs restored from a snapshot", c.restores);
  batch.Counter("airlock.vm.snapshots", "{snapshot}", "snapshots taken", c.snapshots);
  batch.Counter("airlock.snapshot.bytes", "By", "memory state written by snapshots",
                static_cast<int64_t>(c.snapshot_bytes.load()));
  batch.Counter("airlock.exec.count", "{command}", "commands run", c.execs);
  batch.Counter("airlock.image.pulls", "{pull}", "images pulled from registries", c.image_pulls);
  batch.Histogram("airlock.exec.duration", "ms", "how long commands ran", c.exec_ms);
  batch.Histogram("airlock.vm.boot.duration", "ms", "how long a cold boot took", c.boot_ms);
  batch.Histogram("airlock.vm.restore.duration", "ms", "how long a restore took", c.restore_ms);
  telemetry::OtlpExporter::Stats stats = exporter_->stats();
  batch.Counter("airlock.telemetry.dropped", "{request}",
                "telemetry requests given up (collector down, refusing, or too slow)",
                static_cast<int64_t>(stats.dropped + tracer_->dropped()));
  static_cast<void>(
      exporter_->Enqueue(telemetry::Signal::kMetrics, batch.request().SerializeAsString()));
  // Said in airlockd's log at most once per change, so that an operator sees what is lost.
  if (stats.dropped > reported_dropped_) {
    LogWarning(absl::StrCat("telemetry: ", stats.dropped, " request(s) to ", options_.endpoint,
                            " dropped so far; the last because ", stats.last_error));
    reported_dropped_ = stats.dropped;
  }
}

}  // namespace airlock
