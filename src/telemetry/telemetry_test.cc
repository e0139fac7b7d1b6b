#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "src/telemetry/metrics.h"
#include "src/telemetry/otlp_exporter.h"
#include "src/telemetry/trace_context.h"
#include "src/telemetry/tracer.h"

namespace airlock::telemetry {
namespace {

TEST(TraceContextTest, ReadsTraceparentAndRefusesEverythingElse) {
  std::optional<SpanContext> c =
      ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->trace_id.size(), 16u);
  EXPECT_EQ(c->span_id.size(), 8u);
  EXPECT_TRUE(c->sampled);
  EXPECT_EQ(FormatTraceparent(*c), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  EXPECT_FALSE(
      ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")->sampled);
  // A later version may add fields after its own dash.
  EXPECT_TRUE(
      ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more").has_value());
  for (const char* bad : {
           "",
           "garbage",
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    // uppercase
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    // zero trace
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    // zero span
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // version ff
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // 00 has no more
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",    // not hex
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
       }) {
    EXPECT_FALSE(ParseTraceparent(bad).has_value()) << bad;
  }
  EXPECT_NE(NewTraceId(), NewTraceId());
}

// A collector on loopback: records each request's path, headers and body, and answers with
// whatever status `answer` says.
class Collector {
 public:
  Collector() {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      absl::MutexLock lock(&mu_);
      requests_.push_back({req.path, req.get_header_value("x-api-key"), req.body});
      res.status = answer_.load();
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~Collector() {
    server_.stop();
    thread_.join();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void Answer(int status) { answer_ = status; }
  struct Request {
    std::string path, api_key, body;
  };
  std::vector<Request> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  bool WaitFor(size_t n) {
    for (int i = 0; i < 500; ++i) {
      if (requests().size() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  absl::Mutex mu_;
  std::vector<Request> requests_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> answer_{200};
};

OtlpExporter::Options Fast(const std::string& endpoint) {
  OtlpExporter::Options o;
  o.endpoint = endpoint;
  o.first_backoff = absl::Milliseconds(10);
  o.timeout = absl::Seconds(2);
  return o;
}

TEST(OtlpExporterTest, SendsEachSignalToItsPathWithTheHeaders) {
  Collector collector;
  OtlpExporter::Options o = Fast(collector.endpoint() + "/");
  o.headers = {{"x-api-key", "secret"}};
  auto exporter = OtlpExporter::Create(o);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  EXPECT_TRUE((*exporter)->Enqueue(Signal::kMetrics, "m"));
  ASSERT_TRUE(collector.WaitFor(1));
  EXPECT_TRUE((*exporter)->Enqueue(Signal::kTraces, "t"));
  ASSERT_TRUE(collector.WaitFor(2));
  EXPECT_TRUE((*exporter)->Enqueue(Signal::kLogs, "l"));
  ASSERT_TRUE(collector.WaitFor(3));
  std::vector<Collector::Request> got = collector.requests();
  EXPECT_EQ(got[0].path, "/v1/metrics");
  EXPECT_EQ(got[1].path, "/v1/traces");
  EXPECT_EQ(got[2].path, "/v1/logs");
  EXPECT_EQ(got[2].body, "l");
  EXPECT_EQ(got[0].api_key, "secret");
  for (int i = 0; i < 100 && (*exporter)->stats().sent < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ((*exporter)->stats().sent, 3u);
}

TEST(OtlpExporterTest, RetriesWhatMayPassAndCountsWhatIsDropped) {
  Collector collector;
  collector.Answer(503);
  auto exporter = OtlpExporter::Create(Fast(collector.endpoint()));
  ASSERT_TRUE(exporter.ok());
  (*exporter)->Enqueue(Signal::kMetrics, "m");
  ASSERT_TRUE(collector.WaitFor(4));  // the first try and three more
  for (int i = 0; i < 200 && (*exporter)->stats().dropped < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  OtlpExporter::Stats stats = (*exporter)->stats();
  EXPECT_EQ(stats.dropped, 1u);
  EXPECT_EQ(stats.retries, 3u);
  EXPECT_NE(stats.last_error.find("HTTP 503"), std::string::npos) << stats.last_error;
  // A refusal for good (400) is not retried.
  collector.Answer(400);
  (*exporter)->Enqueue(Signal::kMetrics, "m");
  ASSERT_TRUE(collector.WaitFor(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(collector.requests().size(), 5u);
  EXPECT_EQ((*exporter)->stats().dropped, 2u);
}

TEST(OtlpExporterTest, ACollectorThatIsDownNeverBlocksTheCaller) {
  OtlpExporter::Options o = Fast("http://127.0.0.1:9");  // discard port: nothing listens
  o.max_queued_requests = 4;
  auto exporter = OtlpExporter::Create(o);
  ASSERT_TRUE(exporter.ok());
  auto started = std::chrono::steady_clock::now();
  int accepted = 0;
  for (int i = 0; i < 100; ++i) accepted += (*exporter)->Enqueue(Signal::kLogs, "x") ? 1 : 0;
  // 100 requests queue or drop at once; at most the queue's 4 (plus the one being sent) wait.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
  EXPECT_LE(accepted, 5);
  EXPECT_GE((*exporter)->stats().dropped, 95u);
}

TEST(OtlpExporterTest, WhatIsQueuedAtTheEndIsStillSent) {
  Collector collector;
  {
    auto exporter = OtlpExporter::Create(Fast(collector.endpoint()));
    ASSERT_TRUE(exporter.ok());
    for (int i = 0; i < 5; ++i) (*exporter)->Enqueue(Signal::kLogs, "last words");
  }  // airlockd stopping: its last audit records go out before it does
  EXPECT_EQ(collector.requests().size(), 5u);
}

TEST(OtlpExporterTest, RefusesEndpointsAndHeadersItCannotSend) {
  EXPECT_FALSE(OtlpExporter::Create(Fast("collector:4318")).ok());
  EXPECT_FALSE(OtlpExporter::Create(Fast("ftp://collector")).ok());
  OtlpExporter::Options o = Fast("http://127.0.0.1:9");
  o.headers = {{"bad:name", "v"}};
  EXPECT_FALSE(OtlpExporter::Create(o).ok());
  o.headers = {{"name", "line\nbreak"}};
  EXPECT_FALSE(OtlpExporter::Create(o).ok());
}

TEST(TracerTest, ChildSpansNameTheirParentAndContinueTheCallersTrace) {
  Collector collector;
  auto exporter = OtlpExporter::Create(Fast(collector.endpoint()));
  ASSERT_TRUE(exporter.ok());
  std::optional<SpanContext> caller =
      ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  {
    Tracer tracer(exporter->get(), AirlockdResource("test"));
    {
      Span rpc(&tracer, "airlock.v1.Sessions/Create", caller);
      {
        Span restore("restore");
        restore.SetAttribute("session.id", "abc");
        Span verify("verify");  // a grandchild
      }
      Span boot("boot");
      boot.SetError("no kernel");
    }
    Span orphan("nothing");  // no span current: records nothing
    EXPECT_FALSE(orphan.recording());
  }  // the tracer sends its batch
  ASSERT_TRUE(collector.WaitFor(1));
  otlp::v1::ExportTraceServiceRequest request;
  ASSERT_TRUE(request.ParseFromString(collector.requests()[0].body));
  ASSERT_EQ(request.resource_spans_size(), 1);
  const auto& spans = request.resource_spans(0).scope_spans(0).spans();
  ASSERT_EQ(spans.size(), 4);
  std::map<std::string, const otlp::v1::Span*> by_name;
  for (const otlp::v1::Span& s : spans) by_name[s.name()] = &s;
  const otlp::v1::Span& rpc = *by_name["airlock.v1.Sessions/Create"];
  EXPECT_EQ(rpc.trace_id(), caller->trace_id);
  EXPECT_EQ(rpc.parent_span_id(), caller->span_id);
  EXPECT_EQ(rpc.kind(), otlp::v1::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(by_name["restore"]->parent_span_id(), rpc.span_id());
  EXPECT_EQ(by_name["verify"]->parent_span_id(), by_name["restore"]->span_id());
  EXPECT_EQ(by_name["boot"]->parent_span_id(), rpc.span_id());
  EXPECT_EQ(by_name["boot"]->status().code(), otlp::v1::Status::STATUS_CODE_ERROR);
  for (const otlp::v1::Span& s : spans) {
    EXPECT_EQ(s.trace_id(), caller->trace_id);
    EXPECT_LE(s.start_time_unix_nano(), s.end_time_unix_nano());
  }
}

TEST(MetricsTest, HistogramsAndCountersAsOtlp) {
  Histogram h({10, 100});
  for (double v : {1.0, 10.0, 50.0, 1000.0}) h.Record(v);
  MetricsBatch batch(AirlockdResource("test"), 1, 2);
  batch.Histogram("airlock.exec.duration", "ms", "how long commands ran", h);
  batch.Counter("airlock.exec.count", "{command}", "commands run", 4);
  batch.Gauge("airlock.sessions", "{session}", "sessions by state", 2, {{"state", "running"}});
  batch.Gauge("airlock.sessions", "{session}", "sessions by state", 1, {{"state", "paused"}});
  const auto& metrics = batch.request().resource_metrics(0).scope_metrics(0).metrics();
  ASSERT_EQ(metrics.size(), 3);
  const otlp::v1::HistogramDataPoint& p = metrics[0].histogram().data_points(0);
  EXPECT_EQ(p.count(), 4u);
  EXPECT_EQ(std::vector<uint64_t>(p.bucket_counts().begin(), p.bucket_counts().end()),
            (std::vector<uint64_t>{2, 1, 1}));
  EXPECT_EQ(p.sum(), 1061.0);
  EXPECT_EQ(p.min(), 1.0);
  EXPECT_EQ(p.max(), 1000.0);
  EXPECT_TRUE(metrics[1].sum().is_monotonic());
  EXPECT_EQ(metrics[1].sum().data_points(0).as_int(), 4);
  EXPECT_EQ(metrics[2].gauge().data_points_size(), 2);
}

}  // namespace
}  // namespace airlock::telemetry
