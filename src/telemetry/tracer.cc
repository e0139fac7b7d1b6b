#include "src/telemetry/tracer.h"

#include <chrono>

#include "absl/synchronization/mutex.h"

namespace airlock::telemetry {

namespace {

constexpr size_t kBatchSpans = 512;
constexpr size_t kMaxWaitingSpans = 4096;

thread_local std::weak_ptr<const Span::State> current_span;

void Attribute(otlp::v1::Span* span, const std::string& key, const otlp::v1::AnyValue& value) {
  otlp::v1::KeyValue* kv = span->add_attributes();
  kv->set_key(key);
  *kv->mutable_value() = value;
}

}  // namespace

uint64_t NowUnixNanos() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

Tracer::Tracer(OtlpExporter* exporter, otlp::v1::Resource resource)
    : exporter_(exporter), resource_(std::move(resource)), thread_([this] { Run(); }) {}

Tracer::~Tracer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

void Tracer::Finish(otlp::v1::Span span) {
  {
    absl::MutexLock lock(&mu_);
    if (batch_.size() >= kMaxWaitingSpans) {
      ++dropped_;
      return;
    }
    batch_.push_back(std::move(span));
    if (batch_.size() < kBatchSpans) return;
  }
  cv_.Signal();
}

uint64_t Tracer::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

void Tracer::Run() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    absl::Time until = absl::Now() + absl::Seconds(1);
    while (!stopping_ && batch_.size() < kBatchSpans && !cv_.WaitWithDeadline(&mu_, until)) {
    }
    FlushLocked();
  }
  FlushLocked();
}

void Tracer::FlushLocked() {
  if (batch_.empty()) return;
  std::vector<otlp::v1::Span> spans;
  spans.swap(batch_);
  mu_.Unlock();
  otlp::v1::ExportTraceServiceRequest request;
  otlp::v1::ResourceSpans* rs = request.add_resource_spans();
  *rs->mutable_resource() = resource_;
  otlp::v1::ScopeSpans* scope = rs->add_scope_spans();
  scope->mutable_scope()->set_name("airlockd");
  for (otlp::v1::Span& s : spans) *scope->add_spans() = std::move(s);
  exporter_->Enqueue(Signal::kTraces, request.SerializeAsString());
  mu_.Lock();
}

Span::Span(std::string name) {
  std::shared_ptr<const State> parent = current_span.lock();
  if (parent == nullptr) return;
  Start(parent->tracer, std::move(name), parent->trace_id, parent->span_id,
        otlp::v1::Span::SPAN_KIND_INTERNAL);
}

Span::Span(Tracer* tracer, std::string name, const std::optional<SpanContext>& remote_parent) {
  if (tracer == nullptr) return;
  Start(tracer, std::move(name), remote_parent ? remote_parent->trace_id : NewTraceId(),
        remote_parent ? remote_parent->span_id : "", otlp::v1::Span::SPAN_KIND_SERVER);
}

void Span::Start(Tracer* tracer, std::string name, const std::string& trace_id,
                 const std::string& parent_span_id, otlp::v1::Span::SpanKind kind) {
  state_ = std::make_shared<const State>(State{tracer, trace_id, NewSpanId()});
  span_.set_trace_id(trace_id);
  span_.set_span_id(state_->span_id);
  span_.set_parent_span_id(parent_span_id);
  span_.set_name(std::move(name));
  span_.set_kind(kind);
  span_.set_start_time_unix_nano(NowUnixNanos());
  previous_ = current_span;
  current_span = state_;
}

Span::~Span() { End(); }

void Span::End() {
  if (state_ == nullptr) return;
  span_.set_end_time_unix_nano(NowUnixNanos());
  // Spans end in the reverse order they started on a thread; the one before is current again.
  if (current_span.lock() == state_) current_span = previous_;
  Tracer* tracer = state_->tracer;
  state_.reset();
  tracer->Finish(std::move(span_));
}

SpanContext Span::context() const {
  return state_ ? SpanContext{state_->trace_id, state_->span_id, true} : SpanContext{};
}

void Span::SetAttribute(const std::string& key, const std::string& value) {
  if (state_ == nullptr) return;
  otlp::v1::AnyValue v;
  v.set_string_value(value);
  Attribute(&span_, key, v);
}

void Span::SetAttribute(const std::string& key, int64_t value) {
  if (state_ == nullptr) return;
  otlp::v1::AnyValue v;
  v.set_int_value(value);
  Attribute(&span_, key, v);
}

void Span::SetError(const std::string& message) {
  if (state_ == nullptr) return;
  span_.mutable_status()->set_code(otlp::v1::Status::STATUS_CODE_ERROR);
  span_.mutable_status()->set_message(message);
}

}  // namespace airlock::telemetry
