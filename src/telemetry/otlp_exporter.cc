#include "src/telemetry/otlp_exporter.h"

#include <curl/curl.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace airlock::telemetry {

namespace {

const char* PathOf(Signal signal) {
  switch (signal) {
    case Signal::kTraces:
      return "/v1/traces";
    case Signal::kMetrics:
      return "/v1/metrics";
    case Signal::kLogs:
      return "/v1/logs";
  }
  return "/";
}

bool Printable(const std::string& s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

// Non-zero ends the transfer: the exporter is stopping and the drain is over.
int Aborted(void* abort, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<std::atomic<bool>*>(abort)->load() ? 1 : 0;
}

bool Transient(long code) {
  return code < 0 || code == 429 || code == 502 || code == 503 || code == 504;
}

}  // namespace

absl::StatusOr<std::unique_ptr<OtlpExporter>> OtlpExporter::Create(Options options) {
  if (!absl::StartsWith(options.endpoint, "http://") &&
      !absl::StartsWith(options.endpoint, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--otlp-endpoint ", options.endpoint,
                     ": give the collector's OTLP/HTTP address, like http://collector:4318"));
  }
  if (!Printable(options.endpoint)) {
    return absl::InvalidArgumentError("--otlp-endpoint: not printable ASCII");
  }
  while (absl::EndsWith(options.endpoint, "/")) options.endpoint.pop_back();
  for (const auto& [name, value] : options.headers) {
    if (name.empty() || !Printable(name) || !Printable(value) ||
        name.find(':') != std::string::npos) {
      return absl::InvalidArgumentError(
          "--otlp-header: write NAME=VALUE in printable ASCII (NAME without a colon)");
    }
  }
  std::unique_ptr<OtlpExporter> exporter(new OtlpExporter(std::move(options)));
  exporter->thread_ = std::thread([e = exporter.get()] { e->Run(); });
  return exporter;
}

OtlpExporter::OtlpExporter(Options options) : options_(std::move(options)) {}

OtlpExporter::~OtlpExporter() {
  {
    absl::MutexLock lock(&mu_);
    absl::Time until = absl::Now() + options_.drain;
    while ((!queue_.empty() || sending_) && !idle_.WaitWithDeadline(&mu_, until)) {
    }
    stopping_ = true;
    abort_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  stats_.dropped += queue_.size();
}

bool OtlpExporter::Enqueue(Signal signal, std::string body) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || queue_.size() >= options_.max_queued_requests ||
        queued_bytes_ + body.size() > options_.max_queued_bytes) {
      ++stats_.dropped;
      stats_.last_error = "the queue was full (the collector is slower than airlockd)";
      return false;
    }
    queued_bytes_ += body.size();
    queue_.emplace_back(signal, std::move(body));
  }
  cv_.Signal();
  return true;
}

OtlpExporter::Stats OtlpExporter::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void OtlpExporter::Run() {
  mu_.Lock();
  for (;;) {
    while (!stopping_ && queue_.empty()) cv_.Wait(&mu_);
    if (stopping_) break;
    auto [signal, body] = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= body.size();
    sending_ = true;
    mu_.Unlock();
    std::string error;
    long code = -1;
    absl::Duration backoff = options_.first_backoff;
    int attempt = 0;
    for (;;) {
      code = Post(signal, body, &error);
      if (code == 0 || !Transient(code) || ++attempt >= options_.attempts) break;
      mu_.Lock();
      ++stats_.retries;
      absl::Time until = absl::Now() + backoff;
      while (!stopping_ && !cv_.WaitWithDeadline(&mu_, until)) {
      }
      bool stop = stopping_;
      mu_.Unlock();
      if (stop) break;
      backoff *= 2;
    }
    mu_.Lock();
    sending_ = false;
    if (code == 0) {
      ++stats_.sent;
    } else {
      ++stats_.dropped;
      stats_.last_error = error;
    }
    if (queue_.empty()) idle_.SignalAll();
  }
  mu_.Unlock();
}

long OtlpExporter::Post(Signal signal, const std::string& body, std::string* error) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) {
    *error = "curl_easy_init failed";
    return -1;
  }
  std::string url = options_.endpoint + PathOf(signal);
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(options_.timeout)));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(options_.timeout)));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Discard);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, Aborted);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &abort_);
  struct curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/x-protobuf");
  for (const auto& [name, value] : options_.headers) {
    headers = curl_slist_append(headers, absl::StrCat(name, ": ", value).c_str());
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  CURLcode result = curl_easy_perform(c);
  curl_slist_free_all(headers);
  if (result != CURLE_OK) {
    *error = absl::StrCat(url, ": ", curl_easy_strerror(result));
    return -1;
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status < 300) return 0;
  *error = absl::StrCat(url, " answered HTTP ", status);
  return status;
}

}  // namespace airlock::telemetry
