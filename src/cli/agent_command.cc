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
#include "src/cli/session_options.h"
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

constexpr char kAgentFooter[] =
    "Runs Claude Code in a session: a new one from the agent's image (airlock/claude), or ID.\n"
    "The project DIR is copied in at /workspace (DIR itself is never touched); the session may\n"
    "reach only the agent's API (api.anthropic.com) and what --allow adds; ANTHROPIC_API_KEY\n"
    "(or VAR's value, from here) is a secret: the agent holds a placeholder and the key is put\n"
    "into its requests to the API on the way out. ARGS go to claude, e.g. -- -p \"fix the\n"
    "failing test\" --dangerously-skip-permissions. On a terminal it is interactive.\n"
    "Defaults for a new session: 2 vCPUs, 2g memory, 8g disk.\n"
    "When the agent exits the session keeps running: `airlock diff ID` shows its work,\n"
    "`airlock promote ID` takes its commits, `airlock log ID` shows what it did, `airlock rm\n"
    "ID` ends it (or its idle timeout pauses it).\n"
    "Build the image once with:\n"
    "  airlock image build --debian bookworm --packages git --npm @anthropic-ai/claude-code \\\n"
    "      --tag airlock/claude";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "airlock agent: %s\nsee: airlock agent claude --help\n", problem.c_str());
  return kExitAirlockError;
}

struct AgentArgs {
  SessionOptions session;
  std::string session_id, key_env;
  std::vector<std::string> agent_args;
};

int Agent(const AgentPreset* agent, AgentArgs& args) {
  std::string session_id = args.session_id;
  const std::string& key_env = args.key_env.empty() ? agent->key_var : args.key_env;
  SessionOptions& o = args.session;
  if (!session_id.empty() &&
      (!o.workspace.empty() || !o.allow.empty() || !o.image.empty() || !o.allow_presets.empty() ||
       !o.secrets.empty() || o.limits.ByteSizeLong() != 0)) {
    return Usage(
        "--session reuses a session as it is: --workspace, --allow, --image and the limits are "
        "for a new one");
  }
  const std::string image = o.image.empty() ? agent->image : o.image;
  o.image = image;
  if (o.limits.memory_bytes() == 0) o.limits.set_memory_bytes(2ull << 30);
  if (o.limits.vcpus() == 0) o.limits.set_vcpus(2);
  if (o.limits.disk_bytes() == 0) o.limits.set_disk_bytes(8ull << 30);
  o.allow_presets.push_back(agent->preset);
  o.secrets.push_back(absl::StrCat(agent->key_var, "=env:", key_env, "@", agent->key_host));
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
    if (absl::Status s = ApplySessionOptions(*client, o, &create); !s.ok()) {
      return Usage(std::string(s.message()));
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
  for (const std::string& a : args.agent_args) start.add_argv(a);
  for (const std::string& e : agent->env) start.add_env(e);
  if (!o.workspace.empty()) start.set_cwd("/workspace");
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

}  // namespace

void AddAgentCommand(Cli& cli) {
  CLI::App* group = cli.Group("agent", "a coding agent in a session: agent claude");
  for (const AgentPreset& preset : Presets()) {
    auto args = std::make_shared<AgentArgs>();
    const AgentPreset* agent = &preset;
    CLI::App* app = cli.Add(
        group, preset.name,
        absl::StrCat("Claude Code in a session: only its API, its key kept outside"),
        [agent, args] { return Agent(agent, *args); }, kExitAirlockError);
    app->footer(kAgentFooter);
    app->add_option("--session", args->session_id, "run it in this session, as it is")
        ->type_name("ID");
    app->add_option("--image", args->session.image,
                    absl::StrCat("the image of a new session (default ", preset.image, ")"));
    app->add_option(
           "--key-env", args->key_env,
           absl::StrCat("the variable here that holds the API key (default ", preset.key_var, ")"))
        ->type_name("VAR");
    AddSessionOptions(app, &args->session, /*durable=*/true);
    cli.TakesCommand(app, &args->agent_args);
  }
}

}  // namespace airlock
