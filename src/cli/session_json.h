// A session as JSON, one shape for `airlock ls --json` and the MCP tools.
#ifndef AIRLOCK_CLI_SESSION_JSON_H_
#define AIRLOCK_CLI_SESSION_JSON_H_

#include "nlohmann/json.hpp"
#include "proto/airlock/v1/airlock.pb.h"

namespace airlock {

// "running", "paused", ...
const char* StateName(v1::SessionState state);

nlohmann::json SessionToJson(const v1::Session& s);

}  // namespace airlock

#endif  // AIRLOCK_CLI_SESSION_JSON_H_
