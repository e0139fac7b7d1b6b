// The twenty-one tools of `airlock mcp`: one-shot runs, sessions (create, exec, list, get,
// remove, pause, resume, fork, expose), live VMs, logs, metrics, file write/read, a session's
// network (allow, log) and its workspace (diff, promote, sync), and the volumes the user offers
// (list). Each calls
// airlockd through the same client the CLI uses (DaemonClient, RunExec); guest output is
// captured into capped buffers and returned as escaped UTF-8 with truncation flags.
#ifndef AIRLOCK_CLI_MCP_TOOLS_H_
#define AIRLOCK_CLI_MCP_TOOLS_H_

#include <cstddef>
#include <vector>

#include "src/cli/mcp_policy.h"
#include "src/mcp/mcp_server.h"

namespace airlock {

// Output kept per stream unless a call asks for another cap (up to the maximum).
inline constexpr size_t kDefaultOutputCap = 64 * 1024;
inline constexpr size_t kMaxOutputCap = 1024 * 1024;
// The most file_read returns: what a reply carries whole, escaped, within a message line.
inline constexpr size_t kMaxFileToolBytes = 4 * 1024 * 1024;

// The tools, asking only for what `policy` (the user's configuration) allows.
std::vector<mcp::Tool> AirlockTools(const McpPolicy& policy);

}  // namespace airlock

#endif  // AIRLOCK_CLI_MCP_TOOLS_H_
