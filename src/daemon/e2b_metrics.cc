#include "src/daemon/e2b_metrics.h"

#include <utility>

#include "src/daemon/session_events.h"

namespace airlock {

void E2bMetrics::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(kInterval)) SampleAll(absl::Now());
  });
}

void E2bMetrics::Stop() {
  if (!thread_.joinable()) return;
  if (!stop_.HasBeenNotified()) stop_.Notify();
  thread_.join();
}

void E2bMetrics::SampleAll(absl::Time now) {
  for (const std::shared_ptr<LiveSession>& live :
       sessions_->LiveSessions(SessionEventHub::kEveryTenant)) {
    const std::string& id = live->record.id;
    absl::StatusOr<std::optional<E2bSandboxRecord>> sandbox = store_->api_keys().FindSandbox(id);
    if (!sandbox.ok() || !sandbox->has_value() || (*sandbox)->is_snapshot()) continue;
    std::optional<GuestMetrics> sample =
        sessions_->SampleMetrics(live->record.tenant, id, absl::Seconds(2));
    if (!sample) continue;
    absl::MutexLock lock(&mu_);
    Series& s = series_[id];
    // CPU is what was used since the last sample; a first sample only starts the count.
    std::optional<gateway::e2b::Metric> metric =
        s.has_last ? Between(s.last, *sample, now) : std::nullopt;
    if (metric) {
      s.samples.push_back(*metric);
      if (s.samples.size() > kKept) s.samples.pop_front();
    }
    s.last = *sample;
    s.has_last = true;
    s.last_time = now;
  }
  // Histories of sandboxes that have not run for longer than a history lasts are dropped.
  absl::MutexLock lock(&mu_);
  for (auto it = series_.begin(); it != series_.end();) {
    if (now - it->second.last_time > kInterval * kKept) {
      it = series_.erase(it);
    } else {
      if (now - it->second.last_time > 2 * kInterval) it->second.has_last = false;
      ++it;
    }
  }
}

std::optional<gateway::e2b::Metric> E2bMetrics::Between(const GuestMetrics& before,
                                                        const GuestMetrics& after, absl::Time at) {
  if (after.cpu_total_ticks <= before.cpu_total_ticks ||
      after.cpu_busy_ticks < before.cpu_busy_ticks) {
    return std::nullopt;
  }
  uint64_t total = after.cpu_total_ticks - before.cpu_total_ticks;
  uint64_t busy = after.cpu_busy_ticks - before.cpu_busy_ticks;
  return gateway::e2b::Metric{
      .unix_ms = absl::ToUnixMillis(at),
      .cpu_count = static_cast<uint32_t>(after.vcpus),
      .cpu_used_pct = 100.0 * static_cast<double>(busy) / static_cast<double>(total),
      .mem_used = after.memory_total_bytes - after.memory_available_bytes,
      .mem_total = after.memory_total_bytes,
      .disk_used = after.disk_used_bytes,
      .disk_total = after.disk_total_bytes};
}

std::vector<gateway::e2b::Metric> E2bMetrics::History(const std::string& id, int64_t start_s,
                                                      int64_t end_s) {
  std::vector<gateway::e2b::Metric> out;
  absl::MutexLock lock(&mu_);
  auto it = series_.find(id);
  if (it == series_.end()) return out;
  for (const gateway::e2b::Metric& m : it->second.samples) {
    int64_t s = m.unix_ms / 1000;
    if (s >= start_s && s <= end_s) out.push_back(m);
  }
  return out;
}

}  // namespace airlock
