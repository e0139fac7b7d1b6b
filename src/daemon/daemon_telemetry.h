// airlockd's OpenTelemetry export (airlockd --otlp-endpoint): over OTLP/HTTP to the operator's
// collector,
// - traces: a span for every call (its name the gRPC method, continuing the caller's W3C
//   `traceparent`), with children for restore, verify, boot, exec, snapshot and pull;
// - metrics, every interval: sessions by state, each running VM's host CPU and memory, commands
//   run and their durations, boot and restore latency, snapshot bytes, each session's network
//   bytes and denials, image pulls, and what the export itself dropped;
// - logs: each audit record, as it is committed.
// Nothing here ever waits for the collector (src/telemetry/otlp_exporter.h): a collector that
// is down, slow or failing costs dropped telemetry, counted, and never a session.
#ifndef AIRLOCK_DAEMON_DAEMON_TELEMETRY_H_
#define AIRLOCK_DAEMON_DAEMON_TELEMETRY_H_

#include <grpcpp/support/server_interceptor.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/telemetry/otlp_exporter.h"
#include "src/telemetry/tracer.h"

namespace airlock {

class DaemonTelemetry {
 public:
  struct Options {
    std::string endpoint;                                      // http(s)://HOST:PORT
    std::vector<std::pair<std::string, std::string>> headers;  // --otlp-header NAME=VALUE
    absl::Duration interval = absl::Seconds(10);               // metrics and logs
    std::string version;                                       // service.version
  };
  // INVALID_ARGUMENT for a bad endpoint or header (saying how to write it).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DaemonTelemetry>> Create(
      Options options, StateStore* store, SessionManager* sessions);
  // Queues the last metrics and logs, and gives the collector up to 5 s to take what is queued.
  ~DaemonTelemetry();

  // For ServerBuilder::experimental().SetInterceptorCreators: a span for every call.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> CallSpans();

 private:
  DaemonTelemetry(Options options, StateStore* store, SessionManager* sessions);
  void Run();
  void ExportMetrics();
  void ExportAudit();

  const Options options_;
  StateStore* const store_;
  SessionManager* const sessions_;
  const otlp::v1::Resource resource_;
  const uint64_t start_unix_nanos_;
  std::unique_ptr<telemetry::OtlpExporter> exporter_;
  std::unique_ptr<telemetry::Tracer> tracer_;
  int64_t audit_seq_ = 0;                                 // the last audit record sent
  uint64_t reported_dropped_ = 0;                         // drops airlockd's log has told of
  std::map<pid_t, std::pair<uint64_t, absl::Time>> cpu_;  // VM pid -> CPU ticks, when
  absl::Mutex mu_;
  absl::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_DAEMON_TELEMETRY_H_
