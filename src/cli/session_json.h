// Sessions and what is said of them as JSON: one shape for the CLI's --json and the MCP tools.
#ifndef AIRLOCK_CLI_SESSION_JSON_H_
#define AIRLOCK_CLI_SESSION_JSON_H_

#include "nlohmann/json.hpp"
#include "proto/airlock/v1/airlock.pb.h"

namespace airlock {

// "running", "paused", ...
const char* StateName(v1::SessionState state);

nlohmann::json SessionToJson(const v1::Session& s);
// One metrics sample (`airlock metrics --json`, the metrics tool).
nlohmann::json MetricsToJson(const v1::MetricsSample& s);
// One egress event (`airlock network log --json`, the network log tool).
nlohmann::json NetworkEventToJson(const v1::NetworkEvent& e);

}  // namespace airlock

#endif  // AIRLOCK_CLI_SESSION_JSON_H_
