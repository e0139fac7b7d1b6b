// `airlock agent claude`: a coding agent in a session of its own image, against a copy of the
// project, reaching only its model's API with a key it never sees; its transcript goes into
// the session's timeline (airlock log).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/cli/cli_commands.h"
#include "src/cli/cli_flags.h"
#include "src/cli/daemon_client.h"
#include "src/cli/exec_client.h"
#include "src/cli/workspace_client.h"
#include "src/common/exit_codes.h"

namespace airlock {
namespace {

// What the CLI knows about an agent it can start.
struct AgentPreset {
  const char* name;
  const char* image;     // default image
  const char* recipe;    // how to build it
  const char* command;   // in the guest
  const char* preset;    // egress preset of its API
  const char* key_var;   // the variable the agent reads its key from
  const char* key_host;  // where that key may go
  std::vector<std::string> env;
};

const std::vector<AgentPreset>& Presets() {
  static const auto* presets = new std::vector<AgentPreset>{
      {"claude",
       "airlock/claude",
       "airlock image build --debian bookworm --packages git --npm @anthropic-ai/claude-code "
       "--tag airlock/claude",
       "claude",
       "anthropic",
       "ANTHROPIC_API_KEY",
       "api.anthropic.com",
       // No update checks, telemetry or error reports (egress would refuse them anyway), and
       // the agent may be told to skip its permission prompts: the VM is the sandbox.
       {"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "IS_SANDBOX=1"}},
  };
  return *presets;
}

constexpr char kAgentUsage[] =
    "usage: airlock agent claude [--workspace DIR] [--session ID] [--image NAME]\n"
    "                            [--allow RULE]... [--key-env VAR] [--memory SIZE] [--cpus N]\n"
    "                            [-- ARGS...]\n"
    "Runs Claude Code in a session: a new one from the agent's image (airlock/claude), or ID.\n"
    "The project DIR is copied in at /workspace (DIR itself is never touched); the session may\n"
    "reach only the agent's API (api.anthropic.com) and what --allow adds; ANTHROPIC_API_KEY\n"
    "(or VAR's value, from here) is a secret: the agent holds a placeholder and the key is put\n"
    "into its requests to the API on the way out. ARGS go to claude, e.g. -- -p \"fix the\n"
    "failing test\" --dangerously-skip-permissions. On a terminal it is interactive.\n"
    "When the agent exits the session keeps running: `airlock diff ID` shows its work,\n"
    "`airlock promote ID` takes its commits, `airlock log ID` shows what it did, `airlock rm\n"
    "ID` ends it (or its idle timeout pauses it).\n"
    "Build the image once with:\n"
    "  airlock image build --debian bookworm --packages git --npm @anthropic-ai/claude-code \\\n"
    "      --tag airlock/claude\n";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "airlock agent: %s\n%s", problem.c_str(), kAgentUsage);
  return kExitAirlockError;
}

}  // namespace

int AgentCommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kAgentUsage, args.empty() ? stderr : stdout);
    return args.empty() ? kExitAirlockError : 0;
  }
  const AgentPreset* agent = nullptr;
  for (const AgentPreset& p : Presets()) {
    if (args[0] == p.name) agent = &p;
  }
  if (agent == nullptr) return Usage("no agent \"" + args[0] + "\" (airlock knows: claude)");
  std::string workspace, session_id, image = agent->image, key_env = agent->key_var;
  uint64_t memory = 2ull << 30;
  uint32_t cpus = 2;
  std::vector<std::string> allow, agent_args;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has_value = i + 1 < args.size();
    if (a == "--") {
      agent_args.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    } else if (a == "--workspace" && has_value) {
      workspace = args[++i];
    } else if (a == "--session" && has_value) {
      session_id = args[++i];
    } else if (a == "--image" && has_value) {
      image = args[++i];
    } else if (a == "--allow" && has_value) {
      allow.push_back(args[++i]);
    } else if (a == "--key-env" && has_value) {
      key_env = args[++i];
    } else if (a == "--memory" && has_value) {
      absl::StatusOr<uint64_t> bytes = ParseSize(args[++i]);
      if (!bytes.ok()) return Usage(std::string(bytes.status().message()));
      memory = *bytes;
    } else if (a == "--cpus" && has_value) {
      if (!absl::SimpleAtoi(args[++i], &cpus) || cpus < 1 || cpus > 64) {
        return Usage("--cpus needs a number between 1 and 64");
      }
    } else {
      return Usage("unexpected argument " + a);
    }
  }
  if (!session_id.empty() && (!workspace.empty() || !allow.empty() || image != agent->image)) {
    return Usage(
        "--session reuses a session as it is: --workspace, --allow and --image are "
        "for a new one");
  }
  std::optional<DaemonClient> client = Connect();
  if (!client) return kExitAirlockError;
  if (session_id.empty()) {
    const char* key = std::getenv(key_env.c_str());
    if (key == nullptr || *key == '\0') {
      return Usage(absl::StrCat("set ", key_env,
                                " to the agent's API key (it stays on this side: "
                                "the agent gets a placeholder), or name another variable with "
                                "--key-env VAR"));
    }
    if (!PullIfMissing(image, "agent")) return kExitAirlockError;
    v1::CreateSessionRequest create;
    create.set_image(image);
    create.mutable_limits()->set_memory_bytes(memory);
    create.mutable_limits()->set_vcpus(cpus);
    create.mutable_limits()->set_disk_bytes(8ull << 30);
    create.add_allow_preset(agent->preset);
    for (const std::string& rule : allow) create.add_allow(rule);
    if (absl::Status s =
            AddSecretBinding(absl::StrCat(agent->key_var, "=env:", key_env, "@", agent->key_host),
                             create.mutable_secrets());
        !s.ok()) {
      return Usage(std::string(s.message()));
    }
    if (!workspace.empty()) {
      absl::StatusOr<std::string> token = UploadWorkspace(*client, workspace, 2ull << 30);
      if (!token.ok()) {
        std::fprintf(stderr, "airlock agent: %s\n", std::string(token.status().message()).c_str());
        return kExitAirlockError;
      }
      create.set_workspace(*token);
    }
    grpc::ClientContext context;
    v1::Session session;
    grpc::Status status = client->sessions->Create(&context, create, &session);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND && image == agent->image) {
      std::fprintf(stderr, "airlock agent: %s\nbuild it once with:\n  %s\n",
                   Describe(status).c_str(), agent->recipe);
      return kExitAirlockError;
    }
    if (!status.ok()) return DaemonError(status);
    session_id = session.id();
    std::fprintf(stderr, "airlock agent: session %s\n", session_id.c_str());
  }
  v1::ExecStart start;
  start.set_session_id(session_id);
  start.set_agent(agent->name);
  start.add_argv(agent->command);
  for (const std::string& a : agent_args) start.add_argv(a);
  for (const std::string& e : agent->env) start.add_env(e);
  if (!workspace.empty()) start.set_cwd("/workspace");
  // On a terminal the agent is interactive; otherwise (e.g. -p in a script) it reads nothing.
  if (isatty(STDIN_FILENO)) {
    start.set_stdin(true);
    if (absl::Status s = UseTerminal(&start); !s.ok()) return Usage(std::string(s.message()));
  }
  int code = StreamExec(*client, start);
  std::fprintf(stderr,
               "airlock agent: session %s keeps running (airlock ls). Its work: airlock diff %s; "
               "take it: airlock promote %s; what it did: airlock log %s; end it: airlock rm %s\n",
               session_id.c_str(), session_id.c_str(), session_id.c_str(), session_id.c_str(),
               session_id.c_str());
  return code;
}

}  // namespace airlock
