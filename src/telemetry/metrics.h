// airlockd's metrics as OTLP: histograms recorded as things happen (exec durations, restore
// and boot latency), and a batch that gathers every metric's current value into one
// ExportMetricsServiceRequest at each interval. Counters are cumulative from airlockd's start.
#ifndef AIRLOCK_TELEMETRY_METRICS_H_
#define AIRLOCK_TELEMETRY_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/otlp/v1/otlp.pb.h"

namespace airlock::telemetry {

using Attributes = std::vector<std::pair<std::string, std::string>>;

// Counts of values in fixed buckets, with their sum, min and max. Thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // ascending upper bounds
  void Record(double value);
  void AppendTo(otlp::v1::HistogramDataPoint* point) const;

 private:
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // bounds_.size() + 1
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
  double min_ ABSL_GUARDED_BY(mu_) = 0;
  double max_ ABSL_GUARDED_BY(mu_) = 0;
};

// Bounds in milliseconds for latencies from 1 ms to 10 minutes.
std::vector<double> LatencyBoundsMs();

class MetricsBatch {
 public:
  MetricsBatch(const otlp::v1::Resource& resource, uint64_t start_unix_nanos,
               uint64_t now_unix_nanos);
  // A value now (sessions in a state, a VM's memory): a gauge point.
  void Gauge(const std::string& name, const std::string& unit, const std::string& description,
             double value, const Attributes& attributes = {});
  // A count since airlockd started: a cumulative, monotonic sum point.
  void Counter(const std::string& name, const std::string& unit, const std::string& description,
               int64_t value, const Attributes& attributes = {});
  void Histogram(const std::string& name, const std::string& unit, const std::string& description,
                 const telemetry::Histogram& histogram);
  const otlp::v1::ExportMetricsServiceRequest& request() const { return request_; }

 private:
  otlp::v1::Metric* Named(const std::string& name, const std::string& unit,
                          const std::string& description);
  otlp::v1::ExportMetricsServiceRequest request_;
  otlp::v1::ScopeMetrics* scope_;
  std::map<std::string, otlp::v1::Metric*> by_name_;
  const uint64_t start_, now_;
};

// The resource every signal names: service.name airlockd, its version, the host.
otlp::v1::Resource AirlockdResource(const std::string& version);

}  // namespace airlock::telemetry

#endif  // AIRLOCK_TELEMETRY_METRICS_H_
