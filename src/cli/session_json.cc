#include "src/cli/session_json.h"

namespace airlock {

const char* StateName(v1::SessionState state) {
  switch (state) {
    case v1::SESSION_STATE_CREATING:
      return "creating";
    case v1::SESSION_STATE_RUNNING:
      return "running";
    case v1::SESSION_STATE_STOPPED:
      return "stopped";
    case v1::SESSION_STATE_FAILED:
      return "failed";
    case v1::SESSION_STATE_PAUSED:
      return "paused";
    default:
      return "unknown";
  }
}

nlohmann::json SessionToJson(const v1::Session& s) {
  nlohmann::json out = {{"id", s.id()},
                        {"image", s.image()},
                        {"state", StateName(s.state())},
                        {"reason", s.reason()},
                        {"hostname", s.hostname()},
                        {"tenant", s.tenant()},
                        {"created_unix_ms", s.created_unix_ms()},
                        {"last_used_unix_ms", s.last_used_unix_ms()},
                        {"limits",
                         {{"vcpus", s.limits().vcpus()},
                          {"memory_bytes", s.limits().memory_bytes()},
                          {"pids", s.limits().pids()},
                          {"disk_bytes", s.limits().disk_bytes()},
                          {"ttl_seconds", s.limits().ttl_seconds()},
                          {"idle_timeout_seconds", s.limits().idle_timeout_seconds()},
                          {"net_bytes_per_second", s.limits().net_bytes_per_second()}}}};
  if (!s.host().empty()) out["host"] = s.host();  // in a fleet
  if (s.has_workspace()) {
    out["workspace"] = {
        {"path", s.workspace().path()},     {"head", s.workspace().head()},
        {"branch", s.workspace().branch()}, {"tree_digest", s.workspace().tree_digest()},
        {"files", s.workspace().files()},   {"bytes", s.workspace().bytes()}};
  }
  return out;
}

nlohmann::json MetricsToJson(const v1::MetricsSample& s) {
  return {{"session_id", s.session_id()},
          {"cpu_percent", s.cpu_percent()},
          {"memory_used_bytes", s.memory_used_bytes()},
          {"memory_total_bytes", s.memory_total_bytes()},
          {"processes", s.processes()},
          {"disk_used_bytes", s.disk_used_bytes()},
          {"disk_total_bytes", s.disk_total_bytes()},
          {"net_bytes_out", s.net_bytes_out()},
          {"net_bytes_in", s.net_bytes_in()},
          {"net_denied", s.net_denied()}};
}

nlohmann::json NetworkEventToJson(const v1::NetworkEvent& e) {
  return {{"unix_ms", e.unix_ms()},   {"kind", e.kind()},       {"name", e.name()},
          {"address", e.address()},   {"port", e.port()},       {"allowed", e.allowed()},
          {"rule", e.rule()},         {"reason", e.reason()},   {"bytes_out", e.bytes_out()},
          {"bytes_in", e.bytes_in()}, {"repeats", e.repeats()}, {"last_unix_ms", e.last_unix_ms()}};
}

}  // namespace airlock
