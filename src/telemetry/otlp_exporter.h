// Sends OTLP/HTTP requests (protobuf bodies) to the collector an operator names: a bounded
// queue and one sending thread, so that whatever the collector does (down, slow, answering
// errors) the caller never waits. A full queue drops the new request; a request the collector
// refuses for good is dropped too; both are counted. Transient failures (no connection, a
// timeout, 429, 502, 503, 504) are retried with backoff (1 s, 2 s, 4 s) before the request is
// dropped. Thread-safe.
#ifndef AIRLOCK_TELEMETRY_OTLP_EXPORTER_H_
#define AIRLOCK_TELEMETRY_OTLP_EXPORTER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace airlock::telemetry {

enum class Signal { kTraces, kMetrics, kLogs };

class OtlpExporter {
 public:
  struct Options {
    std::string endpoint;  // http(s)://HOST:PORT[/PREFIX]; /v1/traces etc. are appended
    std::vector<std::pair<std::string, std::string>> headers;  // e.g. an API key
    size_t max_queued_bytes = 16 << 20;
    size_t max_queued_requests = 1024;
    absl::Duration timeout = absl::Seconds(10);  // per attempt
    absl::Duration first_backoff = absl::Seconds(1);
    int attempts = 4;
    absl::Duration drain = absl::Seconds(5);  // at the end, for what is still queued
  };
  struct Stats {
    uint64_t sent = 0;     // requests the collector accepted
    uint64_t dropped = 0;  // requests given up: queue full, refused, or out of retries
    uint64_t retries = 0;
    std::string last_error;  // why the last request was not accepted, if one was not
  };

  // INVALID_ARGUMENT for an endpoint that is not http:// or https://, or a header that is not
  // printable ASCII (they come from the operator's command line).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<OtlpExporter>> Create(Options options);
  // Gives what is queued up to `drain` (Options) to be sent, then stops; the rest is dropped
  // (and counted).
  ~OtlpExporter();

  // Queues a serialized Export*ServiceRequest; never waits. False (and counted) when full.
  bool Enqueue(Signal signal, std::string body);
  Stats stats() const;

 private:
  explicit OtlpExporter(Options options);
  void Run();
  // The collector's answer for one attempt: 0 for success, an HTTP status, or -1 (no answer).
  long Post(Signal signal, const std::string& body, std::string* error);

  const Options options_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<std::pair<Signal, std::string>> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool sending_ ABSL_GUARDED_BY(mu_) = false;  // a request is out (or waiting to be retried)
  std::atomic<bool> abort_{false};             // ends a request still out when the drain is over
  absl::CondVar idle_;                         // the queue is empty and nothing is out
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace airlock::telemetry

#endif  // AIRLOCK_TELEMETRY_OTLP_EXPORTER_H_
