// Spans of airlockd's work, sent as OTLP traces. A Span starts when constructed and is sent when
// it ends (destroyed, or End()); while it lives it is the current span of its thread, so a Span
// made deeper in the same call (restore, boot, exec, snapshot, pull) becomes its child. A Span
// made where no span is current (no traced call above it, or telemetry off) records nothing and
// costs next to nothing. A call's span continues the caller's W3C trace (trace_context.h).
#ifndef AIRLOCK_TELEMETRY_TRACER_H_
#define AIRLOCK_TELEMETRY_TRACER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/otlp/v1/otlp.pb.h"
#include "src/telemetry/otlp_exporter.h"
#include "src/telemetry/trace_context.h"

namespace airlock::telemetry {

// Batches finished spans (up to 512, or every second) into ExportTraceServiceRequests.
// Thread-safe; finished spans beyond 4096 waiting are dropped.
class Tracer {
 public:
  Tracer(OtlpExporter* exporter, otlp::v1::Resource resource);
  ~Tracer();  // sends what is batched
  void Finish(otlp::v1::Span span);
  uint64_t dropped() const;

 private:
  void Run();
  // Sends the batch; lets go of mu_ while it does.
  void FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  OtlpExporter* const exporter_;
  const otlp::v1::Resource resource_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::vector<otlp::v1::Span> batch_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

class Span {
 public:
  // A child of this thread's current span; nothing if there is none.
  explicit Span(std::string name);
  // The span of a call airlockd serves (kind SERVER): a child of `remote_parent` when the caller
  // sent one, else the root of a new trace. Recorded only with a tracer.
  Span(Tracer* tracer, std::string name, const std::optional<SpanContext>& remote_parent);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  bool recording() const { return state_ != nullptr; }
  void SetAttribute(const std::string& key, const std::string& value);
  void SetAttribute(const std::string& key, int64_t value);
  // Marks the span failed, saying why.
  void SetError(const std::string& message);
  // Ends it now (the destructor then does nothing). May be called on another thread than the
  // one that made it: that thread then simply has no current span from this one.
  void End();
  // Its own context, for work it hands on (a command's TRACEPARENT); empty when not recording.
  SpanContext context() const;

  // What children need of a span; the thread's current span is held weakly, so a span that
  // ended anywhere is never reached again.
  struct State {
    Tracer* tracer;
    std::string trace_id, span_id;
  };

 private:
  void Start(Tracer* tracer, std::string name, const std::string& trace_id,
             const std::string& parent_span_id, otlp::v1::Span::SpanKind kind);

  std::shared_ptr<const State> state_;  // null when not recording, or ended
  otlp::v1::Span span_;
  std::weak_ptr<const State> previous_;  // the thread's current span before this one
};

// Nanoseconds since the epoch, as OTLP counts time.
uint64_t NowUnixNanos();

}  // namespace airlock::telemetry

#endif  // AIRLOCK_TELEMETRY_TRACER_H_
