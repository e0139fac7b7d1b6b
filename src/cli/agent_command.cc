// `airlock agent claude` and `airlock agent opencode`: a coding agent in a session of its own
// image, against a copy of the project, reaching only its model's API with a key it never sees;
// its own record (transcript, store) goes into the session's timeline (airlock log).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/cli/cli_commands.h"
#include "src/cli/cli_flags.h"
#include "src/cli/daemon_client.h"
#include "src/cli/exec_client.h"
#include "src/cli/session_options.h"
#include "src/cli/workspace_client.h"
#include "src/common/exit_codes.h"

namespace airlock {
namespace {

// A model API an agent can use: the egress preset that reaches it, and its key.
struct Provider {
  const char* name;
  const char* preset;    // egress preset of its API
  const char* key_var;   // the variable the agent reads its key from
  const char* key_host;  // where that key may go
};

// What the CLI knows about an agent it can start.
struct AgentPreset {
  const char* name;
  const char* title;
  const char* image;                // default image
  const char* recipe;               // how to build it
  const char* command;              // in the guest
  std::vector<Provider> providers;  // the first is the default
  std::vector<std::string> env;
  const char* example;  // ARGS of a run without a terminal
};

const Provider kAnthropic{"anthropic", "anthropic", "ANTHROPIC_API_KEY", "api.anthropic.com"};

const std::vector<AgentPreset>& Presets() {
  static const auto* presets = new std::vector<AgentPreset>{
      {"claude",
       "Claude Code",
       "airlock/claude",
       "airlock image build --debian bookworm --packages git --npm @anthropic-ai/claude-code "
       "--tag airlock/claude",
       "claude",
       {kAnthropic},
       // No update checks, telemetry or error reports (egress would refuse them anyway), and
       // the agent may be told to skip its permission prompts: the VM is the sandbox.
       {"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "IS_SANDBOX=1"},
       "-p \"fix the failing test\" --dangerously-skip-permissions"},
      {"opencode",
       "OpenCode",
       "airlock/opencode",
       "airlock image build --debian bookworm --packages git,ripgrep --npm opencode-ai "
       "--tag airlock/opencode",
       "opencode",
       {kAnthropic,
        {"openai", "openai", "OPENAI_API_KEY", "api.openai.com"},
        {"openrouter", "openrouter", "OPENROUTER_API_KEY", "openrouter.ai"}},
       // No update checks, no fetch of the models' catalogue (its copy inside is used), no
       // language servers downloaded, no sharing: egress would refuse them all anyway.
       {"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_CONFIG_CONTENT={\"share\":\"disabled\"}"},
       "run \"fix the failing test\""},
  };
  return *presets;
}

std::string Footer(const AgentPreset& agent) {
  std::vector<std::string> providers;
  for (const Provider& p : agent.providers) {
    providers.push_back(absl::StrCat(p.name, " (", p.key_host, ", ", p.key_var, ")"));
  }
  std::string choice =
      agent.providers.size() > 1
          ? absl::StrCat("--provider picks its model API: ", absl::StrJoin(providers, ", "),
                         "; the default is the first.\n")
          : "";
  const Provider& first = agent.providers.front();
  return absl::StrCat(
      "Runs ", agent.title, " in a session: a new one from the agent's image (", agent.image,
      "), or ID. The project DIR is copied in at /workspace (DIR itself is never touched); the "
      "session may reach only the agent's API (",
      first.key_host, ") and what --allow adds; ", first.key_var,
      " (or VAR's value, from here) is a secret: the agent holds a placeholder and the key is "
      "put into its requests to the API on the way out.\n",
      choice, "ARGS go to ", agent.command, ", e.g. -- ", agent.example,
      ". On a terminal it is interactive.\n"
      "Defaults for a new session: 2 vCPUs, 2g memory, 8g disk.\n"
      "When the agent exits the session keeps running: `airlock diff ID` shows its work, "
      "`airlock promote ID` takes its commits, `airlock log ID` shows what it did, `airlock rm "
      "ID` ends it (or its idle timeout pauses it).\n"
      "Build the image once with: ",
      agent.recipe);
}

int Usage(const AgentPreset* agent, const std::string& problem) {
  std::fprintf(stderr, "airlock agent: %s\nsee: airlock agent %s --help\n", problem.c_str(),
               agent->name);
  return kExitAirlockError;
}

struct AgentArgs {
  SessionOptions session;
  std::string session_id, key_env, provider;
  std::vector<std::string> agent_args;
};

int Agent(const AgentPreset* agent, AgentArgs& args) {
  std::string session_id = args.session_id;
  const Provider* provider = &agent->providers.front();
  if (!args.provider.empty()) {
    provider = nullptr;
    std::vector<std::string> names;
    for (const Provider& p : agent->providers) {
      if (p.name == args.provider) provider = &p;
      names.push_back(p.name);
    }
    if (provider == nullptr) {
      return Usage(agent, absl::StrCat(agent->title, " has no provider \"", args.provider,
                                       "\"; choose one of: ", absl::StrJoin(names, ", ")));
    }
  }
  const std::string& key_env = args.key_env.empty() ? provider->key_var : args.key_env;
  SessionOptions& o = args.session;
  if (!session_id.empty() &&
      (!o.workspace.empty() || !o.allow.empty() || !o.image.empty() || !o.allow_presets.empty() ||
       !o.secrets.empty() || o.limits.ByteSizeLong() != 0 || !args.provider.empty())) {
    return Usage(
        agent,
        "--session reuses a session as it is: --workspace, --allow, --image, --provider and the "
        "limits are for a new one");
  }
  const std::string image = o.image.empty() ? agent->image : o.image;
  o.image = image;
  if (o.limits.memory_bytes() == 0) o.limits.set_memory_bytes(2ull << 30);
  if (o.limits.vcpus() == 0) o.limits.set_vcpus(2);
  if (o.limits.disk_bytes() == 0) o.limits.set_disk_bytes(8ull << 30);
  o.allow_presets.push_back(provider->preset);
  o.secrets.push_back(absl::StrCat(provider->key_var, "=env:", key_env, "@", provider->key_host));
  std::optional<DaemonClient> client = Connect();
  if (!client) return kExitAirlockError;
  if (session_id.empty()) {
    const char* key = std::getenv(key_env.c_str());
    if (key == nullptr || *key == '\0') {
      return Usage(agent,
                   absl::StrCat("set ", key_env,
                                " to the agent's API key (it stays on this side: "
                                "the agent gets a placeholder), or name another variable with "
                                "--key-env VAR"));
    }
    if (!PullIfMissing(image, "agent")) return kExitAirlockError;
    v1::CreateSessionRequest create;
    if (absl::Status s = ApplySessionOptions(*client, o, &create); !s.ok()) {
      return Usage(agent, std::string(s.message()));
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
    if (absl::Status s = UseTerminal(&start); !s.ok())
      return Usage(agent, std::string(s.message()));
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
  CLI::App* group = cli.Group("agent", "a coding agent in a session: agent claude, agent opencode");
  for (const AgentPreset& preset : Presets()) {
    auto args = std::make_shared<AgentArgs>();
    const AgentPreset* agent = &preset;
    CLI::App* app = cli.Add(
        group, preset.name,
        absl::StrCat(preset.title, " in a session: only its API, its key kept outside"),
        [agent, args] { return Agent(agent, *args); }, kExitAirlockError);
    app->footer(Footer(preset));
    app->add_option("--session", args->session_id, "run it in this session, as it is")
        ->type_name("ID");
    app->add_option("--image", args->session.image,
                    absl::StrCat("the image of a new session (default ", preset.image, ")"));
    app->add_option("--key-env", args->key_env,
                    absl::StrCat("the variable here that holds the API key (default ",
                                 preset.providers.front().key_var, ")"))
        ->type_name("VAR");
    if (preset.providers.size() > 1) {
      std::vector<std::string> names;
      for (const Provider& p : preset.providers) names.push_back(p.name);
      app->add_option("--provider", args->provider,
                      absl::StrCat("the model API: ", absl::StrJoin(names, ", "), " (default ",
                                   names.front(), ")"))
          ->type_name("NAME");
    }
    AddSessionOptions(app, &args->session, /*durable=*/true);
    cli.TakesCommand(app, &args->agent_args);
  }
}

}  // namespace airlock
