#include "src/cli/mcp_tools.h"

#include <unistd.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "src/cli/daemon_client.h"
#include "src/cli/exec_client.h"
#include "src/cli/session_json.h"
#include "src/cli/session_options.h"
#include "src/cli/workspace_client.h"
#include "src/common/utf8.h"
#include "src/mcp/json_rpc.h"
#include "src/workspace/workspace_capture.h"

namespace airlock {
namespace {

// Limits are airlockd's to check: its message comes back as the tool's error. These bounds only
// keep a number inside the field it travels in.
constexpr uint64_t kAnyMib = UINT64_MAX >> 20;
constexpr uint64_t kAnyU32 = UINT32_MAX;

using json = nlohmann::json;
using mcp::Tool;
using mcp::ToolCall;
using mcp::ToolError;
using mcp::ToolResult;

// One connection to airlockd for the server's lifetime, made on first use (starting the daemon
// when we are root, as the CLI does).
absl::StatusOr<DaemonClient*> Client() {
  ABSL_CONST_INIT static absl::Mutex mu(absl::kConstInit);
  static std::optional<DaemonClient>* client = new std::optional<DaemonClient>;
  absl::MutexLock lock(&mu);
  if (!*client) {
    absl::StatusOr<DaemonClient> connected = ConnectToDaemon();
    if (!connected.ok()) return connected.status();
    client->emplace(std::move(*connected));
  }
  return &**client;
}

ToolResult RpcFailed(const grpc::Status& status) { return ToolError(Describe(status)); }

// ---- arguments --------------------------------------------------------------------------

// Typed access to a call's arguments; the first problem is kept in error(), naming the argument.
class Args {
 public:
  Args(const json& args, const json& schema) : args_(args) {
    const json& props = schema["properties"];
    for (auto it = args.begin(); it != args.end(); ++it) {
      if (!props.contains(it.key())) {
        std::string known;
        for (auto p = props.begin(); p != props.end(); ++p) {
          absl::StrAppend(&known, known.empty() ? "" : ", ", p.key());
        }
        Fail(absl::StrCat("unknown argument \"", it.key().substr(0, 64),
                          "\"; this tool takes: ", known));
        break;
      }
    }
  }
  const std::string& error() const { return error_; }
  bool Has(const char* key) const { return args_.contains(key) && !args_[key].is_null(); }

  std::string Str(const char* key, bool required = false) {
    if (!Has(key)) {
      if (required) Fail(absl::StrCat("\"", key, "\" is required"));
      return "";
    }
    if (!args_[key].is_string()) {
      Fail(absl::StrCat("\"", key, "\" must be a string"));
      return "";
    }
    return args_[key].get<std::string>();
  }
  uint64_t Uint(const char* key, uint64_t fallback, uint64_t min, uint64_t max) {
    if (!Has(key)) return fallback;
    const json& v = args_[key];
    bool negative = v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0;
    uint64_t n = v.is_number_integer() && !negative ? v.get<uint64_t>() : 0;
    if (!v.is_number_integer() || negative || n < min || n > max) {
      Fail(absl::StrCat("\"", key, "\" must be a whole number from ", min, " to ", max));
      return fallback;
    }
    return n;
  }
  double Seconds(const char* key, double fallback, double max) {
    if (!Has(key)) return fallback;
    const json& v = args_[key];
    if (!v.is_number() || v.get<double>() <= 0 || v.get<double>() > max) {
      Fail(absl::StrCat("\"", key, "\" must be a number of seconds above 0, at most ", max));
      return fallback;
    }
    return v.get<double>();
  }
  bool Bool(const char* key, bool fallback) {
    if (!Has(key)) return fallback;
    if (!args_[key].is_boolean()) {
      Fail(absl::StrCat("\"", key, "\" must be true or false"));
      return fallback;
    }
    return args_[key].get<bool>();
  }
  std::vector<std::string> StrList(const char* key) {
    std::vector<std::string> out;
    if (!Has(key)) return out;
    const json& v = args_[key];
    if (!v.is_array() || v.empty() || v.size() > 4096) {
      Fail(absl::StrCat("\"", key, "\" must be a non-empty array of strings"));
      return out;
    }
    for (const json& item : v) {
      if (!item.is_string()) {
        Fail(absl::StrCat("\"", key, "\" must be a non-empty array of strings"));
        return {};
      }
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  // {"KEY": "VALUE", ...} -> KEY=VALUE
  std::vector<std::string> Env(const char* key) {
    std::vector<std::string> out;
    if (!Has(key)) return out;
    const json& v = args_[key];
    if (!v.is_object()) {
      Fail(absl::StrCat("\"", key, "\" must be an object of strings, like {\"DEBUG\": \"1\"}"));
      return out;
    }
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it.value().is_string() || it.key().empty() || it.key().find('=') != std::string::npos) {
        Fail(absl::StrCat("\"", key, "\" must map names (without '=') to strings"));
        return {};
      }
      out.push_back(it.key() + "=" + it.value().get<std::string>());
    }
    return out;
  }
  void Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

 private:
  const json& args_;
  std::string error_;
};

// ---- schemas ----------------------------------------------------------------------------

json Prop(const char* type, const std::string& description) {
  return {{"type", type}, {"description", description}};
}

json Object(json properties, std::vector<std::string> required = {}) {
  json schema = {{"type", "object"}, {"properties", std::move(properties)}};
  if (!required.empty()) schema["required"] = required;
  return schema;
}

const json& SessionSchema() {
  static const json* schema = new json(
      Object({{"id", Prop("string", "session id")},
              {"image", Prop("string", "image name")},
              {"state",
               {{"type", "string"},
                {"enum", {"creating", "running", "paused", "stopped", "failed", "unknown"}}}},
              {"reason", Prop("string", "why it is paused, stopped or failed")},
              {"hostname", Prop("string", "the guest's hostname")},
              {"created_unix_ms", Prop("integer", "")},
              {"last_used_unix_ms", Prop("integer", "")},
              {"limits", Object({{"vcpus", Prop("integer", "")},
                                 {"memory_bytes", Prop("integer", "")},
                                 {"pids", Prop("integer", "")},
                                 {"disk_bytes", Prop("integer", "")},
                                 {"ttl_seconds", Prop("integer", "")},
                                 {"idle_timeout_seconds", Prop("integer", "")},
                                 {"net_bytes_per_second", Prop("integer", "")}})}},
             {"id", "state"}));
  return *schema;
}

json ListOf(const char* key, const json& item) {
  return Object({{key, {{"type", "array"}, {"items", item}}}}, {key});
}

const json& ExecOutputSchema() {
  static const json* schema = new json(
      Object({{"exit_code", Prop("integer",
                                 "the command's exit status; 128+N if signal N ended it; "
                                 "124 timed out; 125 Airlock error; 126 not executable; "
                                 "127 not found")},
              {"signal", Prop("integer", "the signal that ended it, 0 if none")},
              {"timed_out", Prop("boolean", "the timeout passed and the command was killed")},
              {"message", Prop("string", "why it could not start, or what ended it")},
              {"stdout", Prop("string", "captured stdout (UTF-8; other bytes appear as \\xNN)")},
              {"stderr", Prop("string", "captured stderr (UTF-8; other bytes appear as \\xNN)")},
              {"stdout_bytes", Prop("integer", "all bytes written to stdout, also those not kept")},
              {"stderr_bytes", Prop("integer", "all bytes written to stderr, also those not kept")},
              {"stdout_truncated", Prop("boolean", "stdout was longer than max_output_bytes")},
              {"stderr_truncated", Prop("boolean", "stderr was longer than max_output_bytes")},
              {"stdout_escaped", Prop("boolean", "stdout had bytes that are not UTF-8")},
              {"stderr_escaped", Prop("boolean", "stderr had bytes that are not UTF-8")},
              {"session_id", Prop("string", "the session it ran in (empty for run_code)")}},
             {"exit_code", "stdout", "stderr", "stdout_truncated", "stderr_truncated"}));
  return *schema;
}

// What the user configured, as the tools' descriptions tell the model.
std::string Offered(const std::vector<std::string>& items) {
  return items.empty() ? "none (the user has configured none)" : absl::StrJoin(items, ", ");
}

json AllowProp(const McpPolicy& policy) {
  return {{"type", "array"},
          {"items", {{"type", "string"}}},
          {"description",
           absl::StrCat("destinations the code may reach (default: none), e.g. [\"pypi.org\"]: "
                        "HOST, *.DOMAIN, IP or CIDR, each optionally :PORT (default ports 80 and "
                        "443), each within what the user allows this server: ",
                        Offered(policy.AllowRules()),
                        ". Anything else fails at once (\"Could not resolve host\", connection "
                        "refused); network_log says why")}};
}

json SecretsProp(const McpPolicy& policy) {
  return {{"type", "array"},
          {"items", {{"type", "string"}}},
          {"description",
           absl::StrCat("names of secrets the user configured for this server: ",
                        Offered(policy.SecretNames()),
                        ". The code sees NAME=<placeholder>; HTTPS requests to the secret's "
                        "hosts carry the real value, which neither you nor the code ever see. "
                        "Those hosts must also be in `allow`")}};
}

// The allow argument, each rule checked against what the user allows (a refusal fails args).
std::vector<std::string> AllowArgument(Args& args, const McpPolicy& policy) {
  std::vector<std::string> rules = args.StrList("allow");
  for (const std::string& rule : rules) {
    if (absl::Status s = policy.CheckAllow(rule); !s.ok()) {
      args.Fail(std::string(s.message()));
      break;
    }
  }
  return rules;
}

// The secrets argument, configured names only, into a request's bindings (values read here,
// never returned).
void AddSecrets(Args& args, const McpPolicy& policy,
                google::protobuf::RepeatedPtrField<v1::SecretBinding>* out) {
  for (const std::string& name : args.StrList("secrets")) {
    absl::StatusOr<std::string> spec = policy.Secret(name);
    absl::Status s = spec.ok() ? AddSecretBinding(*spec, out) : spec.status();
    if (!s.ok()) {
      args.Fail(std::string(s.message()));
      return;
    }
  }
}

json VolumesProp(const McpPolicy& policy) {
  return {{"type", "array"},
          {"items", {{"type", "string"}}},
          {"description",
           absl::StrCat("volumes to attach, each NAME:/PATH (read-write: one session at a time) "
                        "or NAME:/PATH:ro (read-only: any number), e.g. data:/data:ro; only "
                        "volumes the user offers this server: ",
                        Offered(policy.VolumeNames()))}};
}

// The volumes argument, offered volumes only, into a request's mounts.
void AddVolumes(Args& args, const McpPolicy& policy,
                google::protobuf::RepeatedPtrField<v1::VolumeMount>* out) {
  for (const std::string& spec : args.StrList("volumes")) {
    absl::StatusOr<v1::VolumeMount> mount = ParseVolumeMount(spec);
    absl::Status s =
        mount.ok() ? policy.CheckVolume(mount->name(), mount->read_only()) : mount.status();
    if (!s.ok()) {
      args.Fail(std::string(s.message()));
      return;
    }
    *out->Add() = *std::move(mount);
  }
}

// Properties shared by run_code and session_exec.
json CommandProperties() {
  return {
      {"command",
       {{"type", "array"},
        {"items", {{"type", "string"}}},
        {"description",
         "the program and its arguments, e.g. [\"python3\", \"-V\"]; "
         "give this or code"}}},
      {"code", Prop("string", "source code to run with `language`; give this or command")},
      {"language",
       {{"type", "string"},
        {"enum", {"python", "sh", "bash"}},
        {"description", "how to run `code` (default python)"}}},
      {"stdin", Prop("string", "text passed to the command's stdin")},
      {"env",
       {{"type", "object"},
        {"additionalProperties", {{"type", "string"}}},
        {"description", "environment variables"}}},
      {"cwd", Prop("string", "working directory in the guest (default /)")},
      {"user", Prop("string",
                    "run as this user of the image: NAME or UID, optionally :GROUP or :GID "
                    "(default: the image's User, else root)")},
      {"timeout_seconds", Prop("number", "kill the command after this long (default 120)")},
      {"max_output_bytes",
       Prop("integer", "bytes of stdout and of stderr to keep (default 65536, at most 1048576)")},
  };
}

std::string Summary(const v1::Session& s) {
  return absl::StrCat("session ", s.id(), " is ", StateName(s.state()),
                      s.reason().empty() ? "" : " (" + s.reason() + ")");
}

// ---- running commands -------------------------------------------------------------------

// Keeps the first `cap` bytes of each stream and counts the rest; reports progress.
class CapturedIo : public ExecIo {
 public:
  CapturedIo(size_t cap, std::string input, const ToolCall& call)
      : cap_(cap), input_(std::move(input)), call_(call) {}
  void Stdout(const std::string& data) override { Keep(out_, out_bytes_, data); }
  void Stderr(const std::string& data) override { Keep(err_, err_bytes_, data); }
  void FeedStdin(const Input& input, int) override {
    for (size_t at = 0; at < input_.size(); at += 65536) {
      if (!input.write(input_.substr(at, 65536))) return;
    }
  }
  json Result(const v1::ExitStatus& exit, const std::string& session_id) const {
    bool out_escaped = false, err_escaped = false;
    std::string out = mcp::EscapeInvalidUtf8(out_, &out_escaped);
    std::string err = mcp::EscapeInvalidUtf8(err_, &err_escaped);
    return {{"exit_code", exit.code()},
            {"signal", exit.signal()},
            {"timed_out", exit.timed_out()},
            {"message", mcp::EscapeInvalidUtf8(exit.message())},
            {"stdout", out},
            {"stderr", err},
            {"stdout_bytes", out_bytes_},
            {"stderr_bytes", err_bytes_},
            {"stdout_truncated", out_bytes_ > out_.size()},
            {"stderr_truncated", err_bytes_ > err_.size()},
            {"stdout_escaped", out_escaped},
            {"stderr_escaped", err_escaped},
            {"session_id", session_id}};
  }

 private:
  void Keep(std::string& kept, uint64_t& total, const std::string& data) {
    total += data.size();
    if (kept.size() < cap_) kept.append(data, 0, std::min(data.size(), cap_ - kept.size()));
    absl::Time now = absl::Now();
    if (now - last_progress_ >= absl::Seconds(1)) {
      last_progress_ = now;
      call_.Progress(static_cast<double>(out_bytes_ + err_bytes_),
                     absl::StrCat("running: ", out_bytes_, " bytes of stdout, ", err_bytes_,
                                  " of stderr so far"));
    }
  }
  size_t cap_;
  std::string input_;
  const ToolCall& call_;
  std::string out_, err_;
  uint64_t out_bytes_ = 0, err_bytes_ = 0;
  absl::Time last_progress_ = absl::Now();
};

std::string Tail(const std::string& s, size_t n) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

ToolResult RunCommand(ToolCall& call, const json& schema, const McpPolicy& policy,
                      bool in_session) {
  Args args(call.arguments(), schema);
  v1::ExecStart start;
  std::string session_id = in_session ? args.Str("session_id", true) : "";
  start.set_session_id(session_id);
  std::vector<std::string> argv = args.StrList("command");
  std::string code = args.Str("code");
  std::string language = args.Has("language") ? args.Str("language") : "python";
  if (argv.empty() == code.empty() && args.error().empty()) {
    args.Fail("give either \"command\" (an array like [\"ls\", \"-l\"]) or \"code\"");
  }
  if (!code.empty()) {
    if (language == "python") {
      argv = {"python3", "-c", code};
    } else if (language == "sh" || language == "bash") {
      argv = {language, "-c", code};
    } else {
      args.Fail("\"language\" must be python, sh or bash");
    }
  }
  for (const std::string& a : argv) start.add_argv(a);
  for (const std::string& e : args.Env("env")) start.add_env(e);
  start.set_cwd(args.Str("cwd"));
  start.set_user(args.Str("user"));
  start.set_timeout_seconds(args.Seconds("timeout_seconds", 120, 24 * 3600));
  size_t cap = args.Uint("max_output_bytes", kDefaultOutputCap, 0, kMaxOutputCap);
  std::string input = args.Str("stdin");
  start.set_stdin(args.Has("stdin"));
  if (!in_session) {
    start.set_image(args.Str("image"));
    for (const std::string& rule : AllowArgument(args, policy)) start.add_allow(rule);
    AddSecrets(args, policy, start.mutable_secrets());
    AddVolumes(args, policy, start.mutable_volumes());
    v1::Limits* limits = start.mutable_limits();
    limits->set_memory_bytes(args.Uint("memory_mb", 0, 0, kAnyMib) << 20);
    limits->set_vcpus(static_cast<uint32_t>(args.Uint("cpus", 0, 0, kAnyU32)));
    if (limits->memory_bytes() == 0 && limits->vcpus() == 0) start.clear_limits();
  }
  if (!args.error().empty()) return ToolError(args.error());
  absl::StatusOr<DaemonClient*> client = Client();
  if (!client.ok()) return ToolError(std::string(client.status().message()));
  grpc::ClientContext context;
  call.SetCanceller([&context] { context.TryCancel(); });
  CapturedIo io(cap, input, call);
  ExecOutcome outcome = RunExec(**client, start, io, context);
  call.SetCanceller(nullptr);
  if (!outcome.exit) return RpcFailed(outcome.status);
  json result = io.Result(*outcome.exit, session_id);
  std::string text = absl::StrCat("exit ", outcome.exit->code());
  if (!outcome.exit->message().empty())
    absl::StrAppend(&text, ": ", result["message"].get<std::string>());
  for (const char* stream : {"stdout", "stderr"}) {
    std::string kept = result[stream].get<std::string>();
    if (kept.empty()) continue;
    absl::StrAppend(&text, "\n--- ", stream, " (",
                    result[absl::StrCat(stream, "_bytes")].get<uint64_t>(), " bytes",
                    result[absl::StrCat(stream, "_truncated")].get<bool>() ? ", truncated" : "",
                    ") ---\n", Tail(kept, 4096));
  }
  return {result, text, false};
}

// ---- the tools --------------------------------------------------------------------------

json SessionIdOnly() {
  return Object({{"session_id", Prop("string", "the session's id")}}, {"session_id"});
}

// Calls a unary RPC once the arguments checked out: a problem with them, with the connection or
// with the call becomes a tool error; otherwise `done` makes the result of the response.
template <typename Stub, typename Request, typename Response, typename Done>
ToolResult Unary(const Args& args, std::unique_ptr<Stub> DaemonClient::*stub,
                 grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                 const Request& request, Done done) {
  if (!args.error().empty()) return ToolError(args.error());
  absl::StatusOr<DaemonClient*> client = Client();
  if (!client.ok()) return ToolError(std::string(client.status().message()));
  grpc::ClientContext context;
  Response response;
  grpc::Status status = (((*client)->*stub).get()->*method)(&context, request, &response);
  if (!status.ok()) return RpcFailed(status);
  return done(response);
}

ToolResult SessionResult(const v1::Session& s) { return {SessionToJson(s), Summary(s), false}; }

// session_pause, session_resume, session_get: a session id in, a Session out.
template <typename Request>
ToolResult SessionCall(ToolCall& call, const json& schema,
                       grpc::Status (v1::Sessions::Stub::*method)(grpc::ClientContext*,
                                                                  const Request&, v1::Session*)) {
  Args args(call.arguments(), schema);
  Request request;
  request.set_id(args.Str("session_id", true));
  return Unary(args, &DaemonClient::sessions, method, request, SessionResult);
}

// Running code: in a fresh sandbox, or in a session made for it.
std::vector<Tool> RunTools(const McpPolicy& policy) {
  std::vector<Tool> tools;
  json run_props = CommandProperties();
  run_props["image"] = Prop("string", "image to run in (default airlock/bookworm-python)");
  run_props["memory_mb"] = Prop("integer", "guest memory in MiB (default 512)");
  run_props["cpus"] = Prop("integer", "vCPUs (default 1)");
  run_props["allow"] = AllowProp(policy);
  run_props["secrets"] = SecretsProp(policy);
  run_props["volumes"] = VolumesProp(policy);
  Tool run{"run_code", "Run code in a fresh sandbox",
           "Runs a program or a snippet of code in a brand-new microVM (its own kernel, hard "
           "limits, no network beyond the destinations in `allow`) that is destroyed "
           "afterwards. Use it for untrusted or generated code that needs no state afterwards. "
           "Returns exit code, stdout and stderr.",
           Object(run_props), ExecOutputSchema()};
  run.open_world = false;
  run.run = [schema = run.input_schema, policy](ToolCall& call) {
    return RunCommand(call, schema, policy, false);
  };
  tools.push_back(run);

  Tool create{
      "session_create", "Create a sandbox session",
      "Starts a durable sandbox session (a microVM) whose files and processes last "
      "between commands until it is removed. It pauses itself when idle and wakes on "
      "the next use. Returns the session, with its id for the other session tools.",
      Object({{"image", Prop("string", "image (default airlock/bookworm-python)")},
              {"memory_mb", Prop("integer", "guest memory in MiB (default 512)")},
              {"cpus", Prop("integer", "vCPUs (default 1)")},
              {"pids", Prop("integer", "most processes inside (default 1024)")},
              {"disk_mb", Prop("integer", "writable disk in MiB (default 1024)")},
              {"ttl_seconds", Prop("integer", "destroy it after this long (0: never)")},
              {"idle_timeout_seconds",
               Prop("integer", "pause it after this long unused (default 300, 0: never)")},
              {"allow", AllowProp(policy)},
              {"secrets", SecretsProp(policy)},
              {"volumes", VolumesProp(policy)},
              {"workspace",
               Prop("string", absl::StrCat("a project directory on this host (absolute path) to "
                                           "copy into the session at /workspace, with its .git; "
                                           "the host's copy is never changed. See workspace_diff "
                                           "and workspace_promote. Only under the directories "
                                           "the user allows this server: ",
                                           Offered(policy.workspace_roots())))}}),
      SessionSchema()};
  create.run = [schema = create.input_schema, policy](ToolCall& call) {
    Args args(call.arguments(), schema);
    v1::CreateSessionRequest request;
    request.set_image(args.Str("image"));
    v1::Limits* l = request.mutable_limits();
    l->set_memory_bytes(args.Uint("memory_mb", 0, 0, kAnyMib) << 20);
    l->set_vcpus(static_cast<uint32_t>(args.Uint("cpus", 0, 0, kAnyU32)));
    l->set_pids(static_cast<uint32_t>(args.Uint("pids", 0, 0, kAnyU32)));
    l->set_disk_bytes(args.Uint("disk_mb", 0, 0, kAnyMib) << 20);
    l->set_ttl_seconds(args.Uint("ttl_seconds", 0, 0, UINT64_MAX));
    if (args.Has("idle_timeout_seconds")) {
      l->set_idle_timeout_seconds(args.Uint("idle_timeout_seconds", 300, 0, UINT64_MAX));
    }
    for (const std::string& rule : AllowArgument(args, policy)) request.add_allow(rule);
    AddSecrets(args, policy, request.mutable_secrets());
    AddVolumes(args, policy, request.mutable_volumes());
    std::string workspace = args.Str("workspace");
    if (!workspace.empty() && args.error().empty()) {
      absl::StatusOr<std::string> project = policy.Workspace(workspace);
      if (!project.ok()) return ToolError(std::string(project.status().message()));
      absl::StatusOr<DaemonClient*> client = Client();
      if (!client.ok()) return ToolError(std::string(client.status().message()));
      call.Progress(0, "capturing the workspace");
      absl::StatusOr<std::string> token =
          UploadWorkspace(**client, *project, kDefaultWorkspaceMaxBytes);
      if (!token.ok()) return ToolError(std::string(token.status().message()));
      request.set_workspace(*token);
    }
    call.Progress(0, "starting the session's VM");
    return Unary(args, &DaemonClient::sessions, &v1::Sessions::Stub::Create, request,
                 SessionResult);
  };
  tools.push_back(create);

  json exec_props = CommandProperties();
  exec_props["session_id"] = Prop("string", "the session to run in");
  Tool exec{"session_exec", "Run a command in a session",
            "Runs a command in an existing session; files and background processes it leaves "
            "stay for later commands. A paused session is resumed first. Returns exit code, "
            "stdout and stderr.",
            Object(exec_props, {"session_id"}), ExecOutputSchema()};
  exec.run = [schema = exec.input_schema, policy](ToolCall& call) {
    return RunCommand(call, schema, policy, true);
  };
  tools.push_back(exec);
  return tools;
}

// Sessions and VMs: listing, describing, pausing, resuming, forking, removing.
std::vector<Tool> LifecycleTools() {
  std::vector<Tool> tools;
  Tool list{"session_list", "List sessions",
            "Lists your sandbox sessions, newest first, with state (running, paused, stopped, "
            "failed), the reason for it, limits and last use.",
            Object(json::object()), ListOf("sessions", SessionSchema())};
  list.read_only = list.idempotent = true;
  list.run = [schema = list.input_schema](ToolCall& call) {
    Args args(call.arguments(), schema);
    return Unary(args, &DaemonClient::sessions, &v1::Sessions::Stub::List,
                 v1::ListSessionsRequest(), [](const v1::ListSessionsResponse& response) {
                   json sessions = json::array();
                   std::string text = absl::StrCat(response.sessions_size(), " session(s)");
                   for (const v1::Session& s : response.sessions()) {
                     sessions.push_back(SessionToJson(s));
                     absl::StrAppend(&text, "\n", Summary(s));
                   }
                   return ToolResult{{{"sessions", sessions}}, text, false};
                 });
  };
  tools.push_back(list);

  Tool get{"session_get", "Describe a session",
           "Shows one session: state and why, image, hostname, limits, created and last used.",
           SessionIdOnly(), SessionSchema()};
  get.read_only = get.idempotent = true;
  get.run = [schema = get.input_schema](ToolCall& call) {
    return SessionCall<v1::GetSessionRequest>(call, schema, &v1::Sessions::Stub::Get);
  };
  tools.push_back(get);

  Tool remove{"session_remove", "Remove a session",
              "Destroys a session's VM and files for good (its logs stay readable).",
              SessionIdOnly(),
              Object({{"session_id", Prop("string", "")}, {"removed", Prop("boolean", "")}},
                     {"session_id", "removed"})};
  remove.destructive = true;
  remove.idempotent = true;
  remove.run = [schema = remove.input_schema](ToolCall& call) {
    Args args(call.arguments(), schema);
    v1::RemoveSessionRequest request;
    request.set_id(args.Str("session_id", true));
    return Unary(args, &DaemonClient::sessions, &v1::Sessions::Stub::Remove, request,
                 [&request](const v1::RemoveSessionResponse&) {
                   return ToolResult{{{"session_id", request.id()}, {"removed", true}},
                                     absl::StrCat("session ", request.id(), " removed"),
                                     false};
                 });
  };
  tools.push_back(remove);

  Tool pause{"session_pause", "Pause a session",
             "Snapshots a session to disk and frees its VM; every process and file comes back "
             "on session_resume or on the next command.",
             SessionIdOnly(), SessionSchema()};
  pause.idempotent = true;
  pause.run = [schema = pause.input_schema](ToolCall& call) {
    return SessionCall<v1::PauseSessionRequest>(call, schema, &v1::Sessions::Stub::Pause);
  };
  tools.push_back(pause);

  Tool resume{"session_resume", "Resume a session",
              "Restores a paused session from its snapshot, every process and file as it was.",
              SessionIdOnly(), SessionSchema()};
  resume.idempotent = true;
  resume.run = [schema = resume.input_schema](ToolCall& call) {
    return SessionCall<v1::ResumeSessionRequest>(call, schema, &v1::Sessions::Stub::Resume);
  };
  tools.push_back(resume);

  Tool fork{"session_fork", "Fork a session",
            "Makes independent copies of a running or paused session from one snapshot of it "
            "(each with its own disk, id, hostname and fresh randomness), e.g. to try several "
            "approaches from the same state. The source goes on unchanged.",
            Object({{"session_id", Prop("string", "the session to copy")},
                    {"count", Prop("integer", "how many copies (default 1, at most 64)")}},
                   {"session_id"}),
            ListOf("sessions", SessionSchema())};
  fork.run = [schema = fork.input_schema](ToolCall& call) {
    Args args(call.arguments(), schema);
    v1::ForkSessionRequest request;
    request.set_id(args.Str("session_id", true));
    request.set_count(static_cast<uint32_t>(args.Uint("count", 1, 1, 64)));
    call.Progress(0, absl::StrCat("forking ", request.id(), " x", request.count()));
    return Unary(args, &DaemonClient::sessions, &v1::Sessions::Stub::Fork, request,
                 [&request](const v1::ForkSessionResponse& response) {
                   json sessions = json::array();
                   std::string text = absl::StrCat("forked ", request.id(), " into");
                   for (const v1::Session& s : response.sessions()) {
                     sessions.push_back(SessionToJson(s));
                     absl::StrAppend(&text, " ", s.id());
                   }
                   return ToolResult{{{"sessions", sessions}}, text, false};
                 });
  };
  tools.push_back(fork);

  // Never public: a URL the model is given needs its token, whoever else learns the address.
  Tool expose{"session_expose", "Give a server in a session a URL",
              "Makes a TCP port of a session reachable as an http:// URL through airlockd's "
              "HTTP gateway, for the user to open in a browser (WebSockets work too). Start "
              "the server first, listening on 127.0.0.1 or 0.0.0.0 in the session. The URL "
              "carries a token; exposing the port again gives it a new one.",
              Object({{"session_id", Prop("string", "the session")},
                      {"port", Prop("integer", "the port the server listens on (1 to 65535)")}},
                     {"session_id", "port"}),
              Object({{"url", Prop("string", "the address to open, with its token")},
                      {"port", Prop("integer", "")}},
                     {"url"})};
  expose.idempotent = false;
  expose.run = [schema = expose.input_schema](ToolCall& call) {
    Args args(call.arguments(), schema);
    v1::ExposeRequest request;
    request.set_session_id(args.Str("session_id", true));
    request.set_port(static_cast<uint32_t>(args.Uint("port", 0, 1, 65535)));
    return Unary(args, &DaemonClient::sessions, &v1::Sessions::Stub::Expose, request,
                 [](const v1::Exposure& e) {
                   return ToolResult{{{"url", e.url()}, {"port", e.port()}},
                                     absl::StrCat("port ", e.port(), " is at ", e.url()),
                                     false};
                 });
  };
  tools.push_back(expose);

  Tool vms{"vm_list", "List running VMs",
           "Lists the VM processes running for your sessions (pid, accelerator, vCPUs, host CPU "
           "and memory), and how many VMs airlockd booted, restored and snapshotted.",
           Object(json::object()),
           Object({{"vms",
                    {{"type", "array"},
                     {"items", Object({{"session_id", Prop("string", "")},
                                       {"pid", Prop("integer", "")},
                                       {"accelerator", Prop("string", "")},
                                       {"vcpus", Prop("integer", "")},
                                       {"host_cpu_percent", Prop("number", "")},
                                       {"host_rss_bytes", Prop("integer", "")}})}}},
                   {"boots", Prop("integer", "")},
                   {"restores", Prop("integer", "")},
                   {"snapshots", Prop("integer", "")}},
                  {"vms"})};
  vms.read_only = vms.idempotent = true;
  vms.run = [schema = vms.input_schema](ToolCall& call) {
    Args args(call.arguments(), schema);
    return Unary(args, &DaemonClient::vms, &v1::Vms::Stub::List, v1::ListVmsRequest(),
                 [](const v1::ListVmsResponse& response) {
                   json list = json::array();
                   for (const v1::Vm& vm : response.vms()) {
                     list.push_back({{"session_id", vm.session_id()},
                                     {"pid", vm.pid()},
                                     {"accelerator", vm.accelerator()},
                                     {"vcpus", vm.vcpus()},
                                     {"host_cpu_percent", vm.host_cpu_percent()},
                                     {"host_rss_bytes", vm.host_rss_bytes()}});
                   }
                   return ToolResult{{{"vms", list},
                                      {"boots", response.boots()},
                                      {"restores", response.restores()},
                                      {"snapshots", response.snapshots()}},
                                     absl::StrCat(response.vms_size(), " VM(s) running"),
                                     false};
                 });
  };
  tools.push_back(vms);
  return tools;
}

// What a session did and uses: its logs and its metrics.
std::vector<Tool> ObserveTools() {
  std::vector<Tool> tools;
  Tool logs{
      "session_logs", "Read a session's logs",
      "Returns the stored output of a session's commands with timestamps, and events "
      "(command started/ended, paused, failed). Works after the session stopped too.",
      Object({{"session_id", Prop("string", "")},
              {"tail", Prop("integer", "only the last N entries (default 200)")},
              {"max_bytes", Prop("integer", "bytes of log text to return (default 65536)")}},
             {"session_id"}),
      Object({{"entries",
               {{"type", "array"},
                {"items",
                 Object({{"unix_ms", Prop("integer", "")},
                         {"exec_id", Prop("integer", "")},
                         {"stream", {{"type", "string"}, {"enum", {"stdout", "stderr", "event"}}}},
                         {"data", Prop("string", "")}})}}},
              {"truncated", Prop("boolean", "older entries were left out to fit")}},
             {"entries", "truncated"})};
  logs.read_only = logs.idempotent = true;
  logs.run = [schema = logs.input_schema](ToolCall& call) {
    Args args(call.arguments(), schema);
    v1::LogsRequest request;
    request.set_session_id(args.Str("session_id", true));
    request.set_tail(static_cast<uint32_t>(args.Uint("tail", 200, 1, 100000)));
    size_t max = args.Uint("max_bytes", kDefaultOutputCap, 1, kMaxOutputCap);
    if (!args.error().empty()) return ToolError(args.error());
    absl::StatusOr<DaemonClient*> client = Client();
    if (!client.ok()) return ToolError(std::string(client.status().message()));
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::LogEntry>> reader =
        (*client)->sessions->Logs(&context, request);
    std::vector<v1::LogEntry> all;
    v1::LogEntry entry;
    while (reader->Read(&entry)) all.push_back(entry);
    grpc::Status status = reader->Finish();
    if (!status.ok()) return RpcFailed(status);
    // Newest entries first until the budget is spent, then back in order.
    json entries = json::array();
    size_t used = 0, first = all.size();
    while (first > 0 && used + all[first - 1].data().size() <= max) {
      used += all[--first].data().size();
    }
    static const char* kStreams[] = {"event", "stdout", "stderr", "event"};
    std::string text;
    for (size_t i = first; i < all.size(); ++i) {
      int stream = static_cast<int>(all[i].stream());
      std::string data = mcp::EscapeInvalidUtf8(all[i].data());
      entries.push_back({{"unix_ms", all[i].unix_ms()},
                         {"exec_id", all[i].exec_id()},
                         {"stream", kStreams[stream >= 0 && stream <= 3 ? stream : 0]},
                         {"data", data}});
      absl::StrAppend(&text, kStreams[stream >= 0 && stream <= 3 ? stream : 0], ": ", data,
                      data.empty() || data.back() != '\n' ? "\n" : "");
    }
    return ToolResult{{{"entries", entries}, {"truncated", first > 0}},
                      text.empty() ? "no log entries" : Tail(text, 8192),
                      false};
  };
  tools.push_back(logs);

  Tool metrics{"session_metrics", "Measure a session",
               "Samples a running session's guest: CPU use over a short interval, memory, "
               "processes, disk, and its network traffic and denials. A paused session is "
               "resumed to be measured.",
               SessionIdOnly(),
               Object({{"session_id", Prop("string", "")},
                       {"cpu_percent", Prop("number", "")},
                       {"memory_used_bytes", Prop("integer", "")},
                       {"memory_total_bytes", Prop("integer", "")},
                       {"processes", Prop("integer", "")},
                       {"disk_used_bytes", Prop("integer", "")},
                       {"disk_total_bytes", Prop("integer", "")},
                       {"net_bytes_out", Prop("integer", "egress bytes, guest to destinations")},
                       {"net_bytes_in", Prop("integer", "egress bytes, destinations to guest")},
                       {"net_denied", Prop("integer", "DNS answers and connections refused")}},
                      {"session_id", "cpu_percent", "memory_used_bytes"})};
  metrics.read_only = true;
  metrics.run = [schema = metrics.input_schema](ToolCall& call) {
    Args args(call.arguments(), schema);
    v1::MetricsRequest request;
    request.set_session_id(args.Str("session_id", true));
    request.set_interval_ms(500);
    if (!args.error().empty()) return ToolError(args.error());
    absl::StatusOr<DaemonClient*> client = Client();
    if (!client.ok()) return ToolError(std::string(client.status().message()));
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::MetricsSample>> reader =
        (*client)->sessions->Metrics(&context, request);
    v1::MetricsSample s;
    bool got = reader->Read(&s);
    context.TryCancel();
    grpc::Status status = reader->Finish();
    if (!got) return RpcFailed(status);
    return ToolResult{
        MetricsToJson(s),
        absl::StrCat("cpu ", static_cast<int>(s.cpu_percent()), "%, memory ",
                     s.memory_used_bytes() >> 20, " of ", s.memory_total_bytes() >> 20, " MiB, ",
                     s.processes(), " processes"),
        false};
  };
  tools.push_back(metrics);
  return tools;
}

// Where a session may connect, and where it did.
std::vector<Tool> NetworkTools(const McpPolicy& policy) {
  std::vector<Tool> tools;
  Tool allow{"network_allow", "Let a session reach more hosts",
             "Adds destinations a session may reach, at once and for its lifetime (or "
             "ttl_seconds). Use it when a command failed to resolve or connect to a host it "
             "needs (network_log shows what was denied and the rule that would allow it). The "
             "operator's ceiling still applies; internal addresses are never reachable unless "
             "the operator allows them.",
             Object({{"session_id", Prop("string", "the session's id")},
                     {"allow", AllowProp(policy)},
                     {"ttl_seconds", Prop("integer", "the rules expire after this (0: never)")}},
                    {"session_id", "allow"}),
             Object({{"version", Prop("integer", "the policy's version")},
                     {"rules", {{"type", "array"}, {"items", Prop("string", "")}}}},
                    {"version", "rules"})};
  allow.run = [schema = allow.input_schema, policy](ToolCall& call) {
    Args args(call.arguments(), schema);
    v1::ChangeNetworkRequest request;
    request.set_session_id(args.Str("session_id", true));
    for (const std::string& rule : AllowArgument(args, policy)) request.add_allow(rule);
    if (request.allow().empty() && args.error().empty()) {
      args.Fail("\"allow\" needs at least one destination, e.g. [\"pypi.org\"]");
    }
    request.set_ttl_seconds(static_cast<double>(args.Uint("ttl_seconds", 0, 0, 366ull * 86400)));
    return Unary(args, &DaemonClient::network, &v1::Network::Stub::Change, request,
                 [](const v1::NetworkPolicy& p) {
                   json rules = json::array();
                   std::string text = absl::StrCat("network policy version ", p.version(), ":");
                   for (const v1::NetworkRule& r : p.rules()) {
                     std::string line = absl::StrCat(r.deny() ? "deny " : "allow ", r.rule());
                     rules.push_back(line);
                     absl::StrAppend(&text, "\n", line);
                   }
                   return ToolResult{{{"version", p.version()}, {"rules", rules}}, text, false};
                 });
  };
  tools.push_back(allow);

  Tool netlog{
      "network_log", "What a session reached on the network",
      "Lists a session's DNS answers and connections, newest last: the name, address, "
      "port, bytes, and the rule that allowed each or why it was denied (with the "
      "`allow` entry that would let it through, for network_allow).",
      Object({{"session_id", Prop("string", "the session's id")},
              {"tail", Prop("integer", "only the last N events (default 100)")}},
             {"session_id"}),
      Object({{"events", {{"type", "array"}, {"items", {{"type", "object"}}}}}}, {"events"})};
  netlog.read_only = netlog.idempotent = true;
  netlog.run = [schema = netlog.input_schema](ToolCall& call) {
    Args args(call.arguments(), schema);
    v1::NetworkLogRequest request;
    request.set_session_id(args.Str("session_id", true));
    request.set_tail(static_cast<uint32_t>(args.Uint("tail", 100, 1, 10000)));
    if (!args.error().empty()) return ToolError(args.error());
    absl::StatusOr<DaemonClient*> client = Client();
    if (!client.ok()) return ToolError(std::string(client.status().message()));
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::NetworkEvent>> reader =
        (*client)->network->Log(&context, request);
    json events = json::array();
    std::string text;
    v1::NetworkEvent e;
    while (reader->Read(&e)) {
      events.push_back(NetworkEventToJson(e));
      std::string where = e.name().empty() ? e.address() : e.name();
      if (e.port() != 0) absl::StrAppend(&where, ":", e.port());
      absl::StrAppend(&text, e.kind(), " ", where, " ",
                      e.allowed() ? absl::StrCat("allowed by ", e.rule()) : "denied",
                      e.reason().empty() ? "" : ": ", e.reason(), "\n");
    }
    grpc::Status status = reader->Finish();
    if (!status.ok()) return RpcFailed(status);
    return ToolResult{
        {{"events", events}}, text.empty() ? "no network activity" : Tail(text, 8192), false};
  };
  tools.push_back(netlog);
  return tools;
}

// A session's workspace: its changes, promoting them, syncing the host's.
std::vector<Tool> WorkspaceTools(const McpPolicy& policy) {
  std::vector<Tool> tools;
  Tool diff{"workspace_diff", "What a session changed in its workspace",
            "Shows the changes a session made under /workspace against the project it was "
            "created with (session_create's workspace), as a unified diff (or a per-file "
            "summary with stat); binary and large files are summarized, .git left out.",
            Object({{"session_id", Prop("string", "the session's id")},
                    {"stat", Prop("boolean", "one line per file instead of the diff")}},
                   {"session_id"}),
            Object({{"files", {{"type", "array"}, {"items", Prop("string", "")}}},
                    {"diff", Prop("string", "")}},
                   {"files", "diff"})};
  diff.read_only = diff.idempotent = true;
  diff.run = [schema = diff.input_schema](ToolCall& call) {
    Args args(call.arguments(), schema);
    std::string id = args.Str("session_id", true);
    bool stat = args.Bool("stat", false);
    if (!args.error().empty()) return ToolError(args.error());
    absl::StatusOr<DaemonClient*> client = Client();
    if (!client.ok()) return ToolError(std::string(client.status().message()));
    absl::StatusOr<std::vector<v1::WorkspaceChange>> changes = FetchWorkspaceChanges(**client, id);
    if (!changes.ok()) return ToolError(std::string(changes.status().message()));
    json files = json::array();
    for (const v1::WorkspaceChange& c : *changes) files.push_back(EscapeForTerminal(c.path()));
    std::string text = Tail(RenderWorkspaceDiff(*changes, stat, true), 256 * 1024);
    if (changes->empty()) text = "no changes in /workspace";
    return ToolResult{{{"files", files}, {"diff", text}}, text, false};
  };
  tools.push_back(diff);

  Tool promote{
      "workspace_promote", "Bring a session's commits back to its project",
      "Shows (dry_run, the default) or does the promotion of the commits a session made in "
      "/workspace: they become the branch airlock/<session>/<name> in the project on this host, "
      "verified by git, without touching its working tree, index or current branch. Commit in "
      "the session first (git commit), or pass include_uncommitted.",
      Object({{"session_id", Prop("string", "the session's id")},
              {"dry_run", Prop("boolean", "only show what would come back (default true)")},
              {"branch", Prop("string",
                              "NAME of airlock/<session>/NAME (default: the session's "
                              "branch)")},
              {"include_uncommitted",
               Prop("boolean",
                    "commit the session's uncommitted work on top, in the promotion "
                    "only")}},
             {"session_id"}),
      Object({{"report", Prop("string", "")}}, {"report"})};
  promote.run = [schema = promote.input_schema, policy](ToolCall& call) {
    Args args(call.arguments(), schema);
    std::string id = args.Str("session_id", true);
    PromoteOptions options;
    options.dry_run = args.Bool("dry_run", true);
    options.branch = args.Str("branch");
    options.include_uncommitted = args.Bool("include_uncommitted", false);
    options.sanitize = true;
    options.check_project = [&policy](const std::string& project) {
      return policy.Workspace(project).status();
    };
    if (!args.error().empty()) return ToolError(args.error());
    absl::StatusOr<DaemonClient*> client = Client();
    if (!client.ok()) return ToolError(std::string(client.status().message()));
    absl::StatusOr<std::string> report = PromoteWorkspace(**client, id, options);
    if (!report.ok())
      return ToolError(
          EscapeForTerminal(std::string(report.status().message()), /*keep_newlines=*/true));
    std::string text = Tail(*report, 256 * 1024);
    return ToolResult{{{"report", text}}, text, false};
  };
  tools.push_back(promote);

  Tool sync{"workspace_sync", "Bring host changes into a session's workspace",
            "Copies what changed in the project on this host since the session's base into "
            "/workspace, for paths the session has not changed itself; lists the others as "
            "conflicts and leaves them as the session has them.",
            Object({{"session_id", Prop("string", "the session's id")},
                    {"dry_run", Prop("boolean", "only show what would be copied")}},
                   {"session_id"}),
            Object({{"report", Prop("string", "")}}, {"report"})};
  sync.run = [schema = sync.input_schema, policy](ToolCall& call) {
    Args args(call.arguments(), schema);
    std::string id = args.Str("session_id", true);
    bool dry_run = args.Bool("dry_run", false);
    if (!args.error().empty()) return ToolError(args.error());
    absl::StatusOr<DaemonClient*> client = Client();
    if (!client.ok()) return ToolError(std::string(client.status().message()));
    absl::StatusOr<std::string> report = SyncWorkspace(
        **client, id, dry_run, kDefaultWorkspaceMaxBytes,
        [&policy](const std::string& project) { return policy.Workspace(project).status(); });
    if (!report.ok()) return ToolError(std::string(report.status().message()));
    return ToolResult{{{"report", *report}}, *report, false};
  };
  tools.push_back(sync);
  return tools;
}

// Files of a session, in and out.
std::vector<Tool> FileTools() {
  std::vector<Tool> tools;
  Tool write{
      "file_write", "Write a file into a session",
      "Creates or replaces a file in a session's guest (missing directories are made), e.g. "
      "source code to run next. As large as a message may carry (about 8 MiB).",
      Object({{"session_id", Prop("string", "")},
              {"path", Prop("string", "absolute path in the guest, like /root/main.py")},
              {"content", Prop("string", "the file's text")},
              {"mode", Prop("integer",
                            "permission bits as a number, like 493 for 0755 "
                            "(default 420 = 0644)")}},
             {"session_id", "path", "content"}),
      Object({{"path", Prop("string", "")}, {"bytes", Prop("integer", "")}}, {"path", "bytes"})};
  write.idempotent = true;
  write.run = [schema = write.input_schema](ToolCall& call) {
    Args args(call.arguments(), schema);
    v1::WriteFileChunk first;
    first.set_session_id(args.Str("session_id", true));
    first.set_path(args.Str("path", true));
    std::string content = args.Str("content", true);
    first.set_mode(static_cast<uint32_t>(args.Uint("mode", 0644, 0, 07777)));
    if (!args.error().empty()) return ToolError(args.error());
    absl::StatusOr<DaemonClient*> client = Client();
    if (!client.ok()) return ToolError(std::string(client.status().message()));
    // The content goes as a stream of pieces, as any file does; the file changes only once
    // the last one is in.
    grpc::ClientContext context;
    v1::WriteFileResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::WriteFileChunk>> stream =
        (*client)->sessions->WriteFileStream(&context, &response);
    v1::WriteFileChunk chunk = first;
    constexpr size_t kPiece = 1 << 20;
    for (size_t at = 0;; at += kPiece) {
      chunk.set_data(content.substr(std::min(at, content.size()), kPiece));
      chunk.set_last(at + kPiece >= content.size());
      if (!stream->Write(chunk) || chunk.last()) break;
      chunk = v1::WriteFileChunk();
    }
    stream->WritesDone();
    grpc::Status status = stream->Finish();
    if (!status.ok()) return RpcFailed(status);
    return ToolResult{{{"path", first.path()}, {"bytes", response.bytes()}},
                      absl::StrCat("wrote ", response.bytes(), " bytes to ", first.path()),
                      false};
  };
  tools.push_back(write);

  Tool read{"file_read", "Read a file from a session",
            "Returns a file of a session's guest as text (bytes that are not UTF-8 appear as "
            "\\xNN), e.g. results a command wrote.",
            Object({{"session_id", Prop("string", "")},
                    {"path", Prop("string", "absolute path in the guest")},
                    {"max_bytes", Prop("integer",
                                       "refuse files larger than this (default "
                                       "1048576, at most 4194304)")}},
                   {"session_id", "path"}),
            Object({{"path", Prop("string", "")},
                    {"content", Prop("string", "")},
                    {"bytes", Prop("integer", "")},
                    {"escaped", Prop("boolean", "the file had bytes that are not UTF-8")}},
                   {"path", "content", "bytes"})};
  read.read_only = read.idempotent = true;
  read.run = [schema = read.input_schema](ToolCall& call) {
    Args args(call.arguments(), schema);
    v1::ReadFileStreamRequest request;
    request.set_session_id(args.Str("session_id", true));
    request.set_path(args.Str("path", true));
    request.set_max_bytes(args.Uint("max_bytes", kMaxOutputCap, 1, kMaxFileToolBytes));
    if (!args.error().empty()) return ToolError(args.error());
    absl::StatusOr<DaemonClient*> client = Client();
    if (!client.ok()) return ToolError(std::string(client.status().message()));
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::ReadFileChunk>> stream =
        (*client)->sessions->ReadFileStream(&context, request);
    std::string data;
    v1::ReadFileChunk chunk;
    while (stream->Read(&chunk)) data += chunk.data();  // airlockd holds it to max_bytes
    grpc::Status status = stream->Finish();
    if (!status.ok()) return RpcFailed(status);
    bool escaped = false;
    std::string content = mcp::EscapeInvalidUtf8(data, &escaped);
    return ToolResult{
        {{"path", request.path()},
         {"content", content},
         {"bytes", data.size()},
         {"escaped", escaped}},
        absl::StrCat(request.path(), " (", data.size(), " bytes):\n", Tail(content, 8192)),
        false};
  };
  tools.push_back(read);
  return tools;
}

}  // namespace

// Volumes the user offers this server: listed, never created, filled, exported or removed.
std::vector<Tool> VolumeTools(const McpPolicy& policy) {
  json volume = Object(
      {{"name", Prop("string", "attach it as NAME:/PATH (volumes of session_create, run_code)")},
       {"size_bytes", Prop("integer", "its filesystem's size")},
       {"snapshot", Prop("boolean", "a read-only copy (NAME@TAG)")},
       {"read_only_for_you", Prop("boolean", "the user lets you attach it read-only only")},
       {"held_by",
        {{"type", "array"},
         {"items", {{"type", "string"}}},
         {"description", "sessions (running or paused) that attach it now"}}},
       {"held_read_write", Prop("boolean", "one of them writes it: nobody else may attach it")}},
      {"name"});
  Tool list{"volume_list", "List the volumes you may attach",
            "Lists the user's volumes (disks that outlive sessions) that this server offers, "
            "with who holds each now. One session writes a volume at a time, or any number read "
            "it. Offered: " +
                Offered(policy.VolumeNames()),
            Object(json::object()), ListOf("volumes", volume)};
  list.read_only = list.idempotent = true;
  list.run = [schema = list.input_schema, policy](ToolCall& call) {
    Args args(call.arguments(), schema);
    return Unary(
        args, &DaemonClient::volumes, &v1::Volumes::Stub::List, v1::ListVolumesRequest(),
        [&policy](const v1::ListVolumesResponse& response) {
          json volumes = json::array();
          std::string text;
          for (const v1::Volume& v : response.volumes()) {
            if (!policy.Offers(v.name())) continue;
            bool read_only_for_you = v.read_only() || !policy.CheckVolume(v.name(), false).ok();
            volumes.push_back(
                {{"name", v.name()},
                 {"size_bytes", v.size_bytes()},
                 {"snapshot", v.read_only()},
                 {"read_only_for_you", read_only_for_you},
                 {"held_by", std::vector<std::string>(v.holders().begin(), v.holders().end())},
                 {"held_read_write", v.held_read_write()}});
            absl::StrAppend(&text, text.empty() ? "" : "\n", v.name(), " (", v.size_bytes() >> 20,
                            " MiB", read_only_for_you ? ", read-only" : "", ")",
                            v.holders().empty()
                                ? ""
                                : absl::StrCat(", held by ", absl::StrJoin(v.holders(), ", ")));
          }
          if (volumes.empty()) text = "no volumes offered (airlock mcp --volume NAME)";
          return ToolResult{{{"volumes", volumes}}, text, false};
        });
  };
  return {list};
}

std::vector<Tool> AirlockTools(const McpPolicy& policy) {
  std::vector<Tool> tools;
  for (std::vector<Tool> group :
       {RunTools(policy), LifecycleTools(), ObserveTools(), NetworkTools(policy),
        WorkspaceTools(policy), FileTools(), VolumeTools(policy)}) {
    for (Tool& tool : group) tools.push_back(std::move(tool));
  }
  return tools;
}

}  // namespace airlock
