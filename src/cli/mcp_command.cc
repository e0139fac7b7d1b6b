// `airlock mcp`: the MCP server over stdio. stdin carries one JSON-RPC message per line; stdout
// carries protocol messages only (guest output travels inside JSON results, never raw);
// diagnostics go to stderr. Bad input never ends it; the end of stdin does, after cancelling
// the calls in flight.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "src/cli/cli_app.h"
#include "src/cli/cli_commands.h"
#include "src/cli/mcp_policy.h"
#include "src/cli/mcp_tools.h"
#include "src/mcp/json_rpc.h"
#include "src/mcp/mcp_server.h"

namespace airlock {
namespace {

constexpr char kMcpFooter[] =
    "Serves the Model Context Protocol on stdin/stdout for an AI agent: run code in a fresh\n"
    "sandbox, manage sessions (create, exec, pause, resume, fork, remove), read logs, metrics\n"
    "and files. Configure a client with\n"
    "  {\"mcpServers\": {\"airlock\": {\"command\": \"airlock\", \"args\": [\"mcp\",\n"
    "    \"--allow\", \"pypi.org\", \"--secret\", \"GH_TOKEN=env:GH_TOKEN@api.github.com\",\n"
    "    \"--workspace-root\", \"/home/me/src\"]}}}\n"
    "The model is not trusted with your machine: it may bind only the secrets named here (by\n"
    "name; their sources and hosts are yours), ask only for egress within --allow and the\n"
    "secrets' hosts, use as workspaces only directories under --workspace-root, and attach only\n"
    "the volumes named by --volume (NAME, or NAME:ro for read-only). With none given it has no\n"
    "secrets, no network, no workspaces and no volumes; its refusals say which flag to add.\n"
    "stdout carries protocol messages only; diagnostics go to stderr. When stdin ends, calls in\n"
    "flight are cancelled and it exits.";

constexpr char kVersion[] = "0.4.0";

void WriteLine(const std::string& line) {
  std::string out = line + "\n";
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = write(STDOUT_FILENO, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client is gone; stdin's end will follow
    done += static_cast<size_t>(n);
  }
}

// What the user allows the model (McpPolicy), as given on the command line.
struct McpFlags {
  std::vector<std::string> secrets;
  std::vector<std::string> allow;
  std::vector<std::string> workspace_roots;
  std::vector<std::string> volumes;
};

int Mcp(const McpFlags& flags) {
  absl::StatusOr<McpPolicy> policy =
      McpPolicy::Create(flags.secrets, flags.allow, flags.workspace_roots, flags.volumes);
  if (!policy.ok()) {
    std::fprintf(stderr, "airlock mcp: %s\n", std::string(policy.status().message()).c_str());
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  std::vector<mcp::Tool> tools = AirlockTools(*policy);
  size_t count = tools.size();
  mcp::McpServer server(std::move(tools), WriteLine, kVersion);
  server.set_log(
      [](const std::string& line) { std::fprintf(stderr, "airlock mcp: %s\n", line.c_str()); });
  std::fprintf(stderr, "airlock mcp: serving %zu tools on stdio\n", count);
  std::string line;
  bool oversized = false;
  char buf[65536];
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        if (line.size() < mcp::kMaxLineBytes) {
          line.push_back(buf[i]);
        } else {
          oversized = true;  // keep reading to the newline, then refuse it
        }
        continue;
      }
      if (oversized) {
        WriteLine(mcp::RpcErrorReply({mcp::kInvalidRequest, "message too large", nullptr}));
      } else {
        server.HandleLine(line);
      }
      line.clear();
      oversized = false;
    }
  }
  if (!line.empty() && !oversized) server.HandleLine(line);
  // The client has gone: stop what it asked for rather than keep it waiting.
  server.CancelAllAndWait();
  return 0;
}

}  // namespace

void AddMcpCommand(Cli& cli) {
  auto flags = std::make_shared<McpFlags>();
  CLI::App* mcp = cli.Add(&cli.app(), "mcp", "serve the Model Context Protocol on stdio",
                          [flags] { return Mcp(*flags); });
  mcp->footer(kMcpFooter);
  mcp->add_option("--secret", flags->secrets,
                  "a secret the model may bind by NAME: NAME=SOURCE@HOST[,HOST...] as for "
                  "session create --secret (repeatable)")
      ->allow_extra_args(false);
  mcp->add_option("--allow", flags->allow,
                  "the widest egress the model may ask for: a rule as for --allow, or * for any "
                  "name (repeatable; default none)")
      ->allow_extra_args(false);
  mcp->add_option("--workspace-root", flags->workspace_roots,
                  "a directory under which the model may name a project as a workspace "
                  "(repeatable; default none)")
      ->allow_extra_args(false);
  mcp->add_option("--volume", flags->volumes,
                  "a volume of yours the model may attach to its sessions: NAME, or NAME:ro for "
                  "read-only only (repeatable; default none). It never creates, fills, exports "
                  "or removes volumes")
      ->allow_extra_args(false);
}

}  // namespace airlock
