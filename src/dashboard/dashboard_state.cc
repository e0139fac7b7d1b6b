#include "src/dashboard/dashboard_state.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "src/common/utf8.h"

namespace airlock {

namespace {

// "running" from SESSION_STATE_RUNNING.
std::string StateName(v1::SessionState state) {
  std::string name = v1::SessionState_Name(state);
  constexpr char kPrefix[] = "SESSION_STATE_";
  if (name.rfind(kPrefix, 0) == 0) name.erase(0, sizeof(kPrefix) - 1);
  return name.empty() ? "unknown" : absl::AsciiStrToLower(name);
}

// Text from airlockd as the page may show it: valid UTF-8, at most `cap` bytes (cut on a
// character boundary, marked with an ellipsis).
std::string Shown(std::string_view text, size_t cap = DashboardState::kMaxTextBytes) {
  std::string out = EscapeInvalidUtf8(text.substr(0, cap + 4));
  if (out.size() <= cap) return out;
  size_t cut = cap;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  out.resize(cut);
  return out + "…";
}

}  // namespace

void DashboardState::SetSessions(const std::vector<v1::Session>& sessions, int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  sessions_.assign(sessions.begin(), sessions.begin() + static_cast<ptrdiff_t>(std::min(
                                                            sessions.size(), kMaxSessions)));
  updated_ms_ = now_ms;
  daemon_error_.clear();
  // Samples of sessions that are gone go with them.
  std::map<std::string, std::deque<Sample>> kept;
  for (const v1::Session& s : sessions_) {
    auto it = samples_.find(s.id());
    if (it != samples_.end()) kept[s.id()] = std::move(it->second);
  }
  samples_ = std::move(kept);
  TrimLocked(now_ms);
}

void DashboardState::AddVmSamples(const std::vector<v1::Vm>& vms, int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  for (const v1::Vm& vm : vms) {
    auto it = samples_.find(vm.session_id());
    if (it == samples_.end()) {
      if (samples_.size() >= kMaxSessions) continue;
      it = samples_.emplace(vm.session_id(), std::deque<Sample>()).first;
    }
    it->second.push_back({now_ms, vm.host_cpu_percent(), vm.host_rss_bytes()});
    if (it->second.size() > kMaxSamplesPerSession) it->second.pop_front();
  }
  TrimLocked(now_ms);
}

void DashboardState::AddEvent(const v1::SessionEvent& e) {
  Event out{.ms = e.unix_ms(),
            .tenant = Shown(e.tenant(), 256),
            .session_id = Shown(e.session_id(), 64),
            .kind = "",
            .text = "",
            .failed = false};
  switch (e.kind()) {
    case v1::SessionEvent::KIND_STATE:
      out.kind = "state";
      out.text = absl::StrCat(StateName(e.state()), e.reason().empty() ? "" : ": ", e.reason());
      out.failed = e.state() == v1::SESSION_STATE_FAILED;
      break;
    case v1::SessionEvent::KIND_EXEC_START:
      out.kind = "exec";
      out.text = absl::StrJoin(e.argv(), " ");
      break;
    case v1::SessionEvent::KIND_EXEC_EXIT:
      out.kind = "exit";
      out.text = absl::StrCat("exit ", e.exit_code(), e.reason().empty() ? "" : ": ", e.reason());
      out.failed = e.exit_code() != 0 || !e.reason().empty();
      break;
    case v1::SessionEvent::KIND_DENIED:
      out.kind = "denied";
      out.text = absl::StrCat(e.destination(), ": ", e.reason());
      out.failed = true;
      break;
    case v1::SessionEvent::KIND_REMOVED:
      out.kind = "removed";
      break;
    default:
      out.kind = "other";
  }
  out.text = Shown(out.text);
  absl::MutexLock lock(&mu_);
  events_.push_back(std::move(out));
  if (events_.size() > kMaxEvents) events_.pop_front();
}

void DashboardState::SetDaemonError(const std::string& error, int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  daemon_error_ = Shown(error);
  TrimLocked(now_ms);
}

void DashboardState::TrimLocked(int64_t now_ms) {
  int64_t oldest = now_ms - kWindowMs;
  while (!events_.empty() && events_.front().ms < oldest) events_.pop_front();
  for (auto it = samples_.begin(); it != samples_.end();) {
    while (!it->second.empty() && it->second.front().ms < oldest) it->second.pop_front();
    it = it->second.empty() ? samples_.erase(it) : std::next(it);
  }
}

nlohmann::json DashboardState::ToJson(int64_t now_ms) const {
  absl::MutexLock lock(&mu_);
  nlohmann::json out = {{"now_ms", now_ms},
                        {"window_ms", kWindowMs},
                        {"updated_ms", updated_ms_},
                        {"daemon_error", daemon_error_}};
  nlohmann::json by_state = nlohmann::json::object(), by_tenant = nlohmann::json::object();
  nlohmann::json sessions = nlohmann::json::array();
  int64_t oldest = now_ms - kWindowMs;
  for (const v1::Session& s : sessions_) {
    std::string state = StateName(s.state());
    std::string tenant = Shown(s.tenant(), 256);
    by_state[state] = by_state.value(state, 0) + 1;
    nlohmann::json& counts = by_tenant[tenant];
    if (!counts.is_object()) counts = nlohmann::json::object();
    counts[state] = counts.value(state, 0) + 1;
    nlohmann::json samples = nlohmann::json::array();
    if (auto it = samples_.find(s.id()); it != samples_.end()) {
      for (const Sample& x : it->second) {
        if (x.ms >= oldest) samples.push_back({x.ms, x.cpu_percent, x.rss_bytes});
      }
    }
    sessions.push_back({{"id", Shown(s.id(), 64)},
                        {"tenant", tenant},
                        {"image", Shown(s.image(), 256)},
                        {"state", state},
                        {"reason", Shown(s.reason())},
                        {"created_ms", s.created_unix_ms()},
                        {"last_used_ms", s.last_used_unix_ms()},
                        {"vcpus", s.limits().vcpus()},
                        {"memory_bytes", s.limits().memory_bytes()},
                        {"samples", std::move(samples)}});
  }
  out["by_state"] = std::move(by_state);
  out["by_tenant"] = std::move(by_tenant);
  out["sessions"] = std::move(sessions);
  nlohmann::json events = nlohmann::json::array();
  for (const Event& e : events_) {
    if (e.ms < oldest) continue;
    events.push_back({{"ms", e.ms},
                      {"tenant", e.tenant},
                      {"session_id", e.session_id},
                      {"kind", e.kind},
                      {"text", e.text},
                      {"failed", e.failed}});
  }
  out["events"] = std::move(events);
  return out;
}

}  // namespace airlock
