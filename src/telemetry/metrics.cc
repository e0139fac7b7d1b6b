#include "src/telemetry/metrics.h"

#include <unistd.h>

#include <algorithm>

#include "absl/synchronization/mutex.h"

namespace airlock::telemetry {

namespace {

void SetAttributes(const Attributes& attributes,
                   google::protobuf::RepeatedPtrField<otlp::v1::KeyValue>* out) {
  for (const auto& [key, value] : attributes) {
    otlp::v1::KeyValue* kv = out->Add();
    kv->set_key(key);
    kv->mutable_value()->set_string_value(value);
  }
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Record(double value) {
  size_t bucket = std::upper_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  // A value equal to a bound belongs to that bound's bucket (upper bounds are inclusive).
  if (bucket > 0 && value == bounds_[bucket - 1]) --bucket;
  absl::MutexLock lock(&mu_);
  ++counts_[bucket];
  min_ = count_ == 0 ? value : std::min(min_, value);
  max_ = count_ == 0 ? value : std::max(max_, value);
  ++count_;
  sum_ += value;
}

void Histogram::AppendTo(otlp::v1::HistogramDataPoint* point) const {
  absl::MutexLock lock(&mu_);
  point->set_count(count_);
  point->set_sum(sum_);
  if (count_ > 0) {
    point->set_min(min_);
    point->set_max(max_);
  }
  for (uint64_t c : counts_) point->add_bucket_counts(c);
  for (double b : bounds_) point->add_explicit_bounds(b);
}

std::vector<double> LatencyBoundsMs() {
  return {1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 600000};
}

MetricsBatch::MetricsBatch(const otlp::v1::Resource& resource, uint64_t start_unix_nanos,
                           uint64_t now_unix_nanos)
    : start_(start_unix_nanos), now_(now_unix_nanos) {
  otlp::v1::ResourceMetrics* rm = request_.add_resource_metrics();
  *rm->mutable_resource() = resource;
  scope_ = rm->add_scope_metrics();
  scope_->mutable_scope()->set_name("airlockd");
}

otlp::v1::Metric* MetricsBatch::Named(const std::string& name, const std::string& unit,
                                      const std::string& description) {
  auto [it, added] = by_name_.emplace(name, nullptr);
  if (added) {
    it->second = scope_->add_metrics();
    it->second->set_name(name);
    it->second->set_unit(unit);
    it->second->set_description(description);
  }
  return it->second;
}

void MetricsBatch::Gauge(const std::string& name, const std::string& unit,
                         const std::string& description, double value,
                         const Attributes& attributes) {
  otlp::v1::NumberDataPoint* p = Named(name, unit, description)->mutable_gauge()->add_data_points();
  p->set_time_unix_nano(now_);
  p->set_as_double(value);
  SetAttributes(attributes, p->mutable_attributes());
}

void MetricsBatch::Counter(const std::string& name, const std::string& unit,
                           const std::string& description, int64_t value,
                           const Attributes& attributes) {
  otlp::v1::Sum* sum = Named(name, unit, description)->mutable_sum();
  sum->set_aggregation_temporality(otlp::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
  sum->set_is_monotonic(true);
  otlp::v1::NumberDataPoint* p = sum->add_data_points();
  p->set_start_time_unix_nano(start_);
  p->set_time_unix_nano(now_);
  p->set_as_int(value);
  SetAttributes(attributes, p->mutable_attributes());
}

void MetricsBatch::Histogram(const std::string& name, const std::string& unit,
                             const std::string& description,
                             const telemetry::Histogram& histogram) {
  otlp::v1::Histogram* h = Named(name, unit, description)->mutable_histogram();
  h->set_aggregation_temporality(otlp::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
  otlp::v1::HistogramDataPoint* p = h->add_data_points();
  p->set_start_time_unix_nano(start_);
  p->set_time_unix_nano(now_);
  histogram.AppendTo(p);
}

otlp::v1::Resource AirlockdResource(const std::string& version) {
  otlp::v1::Resource r;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  Attributes attributes = {
      {"service.name", "airlockd"}, {"service.version", version}, {"host.name", host}};
  SetAttributes(attributes, r.mutable_attributes());
  return r;
}

}  // namespace airlock::telemetry
