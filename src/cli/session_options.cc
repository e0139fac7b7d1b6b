#include "src/cli/session_options.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/cli/cli_app.h"
#include "src/cli/workspace_client.h"
#include "src/net/egress_rule.h"
#include "src/secrets/secret_spec.h"
#include "src/workspace/workspace_capture.h"

namespace airlock {

void AddSessionOptions(CLI::App* app, SessionOptions* o, bool durable) {
  v1::Limits* limits = &o->limits;
  AddCountOption(
      app, "--cpus", [limits](uint32_t n) { limits->set_vcpus(n); }, 1, UINT32_MAX,
      "virtual CPUs (default 1)");
  AddSizeOption(
      app, "--memory", [limits](uint64_t v) { limits->set_memory_bytes(v); },
      "guest memory, like 512m or 2g; a plain number is MiB (default 512m)");
  AddSizeOption(
      app, "--disk", [limits](uint64_t v) { limits->set_disk_bytes(v); },
      "the session's writable disk (default 1g)");
  AddCountOption(
      app, "--pids", [limits](uint32_t n) { limits->set_pids(n); }, 1, UINT32_MAX,
      "processes the guest may hold at once (default 1024)");
  AddSizeOption(
      app, "--net-rate", [limits](uint64_t v) { limits->set_net_bytes_per_second(v); },
      "egress bandwidth per second, each way, all connections together (like 10m; default: "
      "no limit)");
  if (durable) {
    AddDurationOption(
        app, "--ttl", [limits](uint64_t s) { limits->set_ttl_seconds(s); },
        "destroy the session this long after it was created (like 1h; default: never)");
    AddDurationOption(
        app, "--idle-timeout", [limits](uint64_t s) { limits->set_idle_timeout_seconds(s); },
        "pause the session after this long without a command or stream (default 5m; 0: "
        "never); the next exec, logs -f or metrics resumes it");
    app->add_option("--host", o->host,
                    "in a fleet: make it on this host (its airlockd --host-id; airlock hosts "
                    "lists them) rather than the one with room");
  }
  AddCheckedList(
      app, "--allow", &o->allow,
      [](const std::string& v) { return net::ParseSessionRule(v).status(); },
      "let the session reach a destination (repeatable; default: none): HOST, *.DOMAIN, IP or "
      "CIDR, each optionally :PORT (default 80 and 443), e.g. --allow pypi.org")
      ->type_name("RULE");
  AddCheckedList(
      app, "--allow-preset", &o->allow_presets,
      [](const std::string& v) { return net::PresetRules(v).status(); },
      "the hosts of an ecosystem: pypi, npm, github, debian, huggingface, crates, golang, "
      "anthropic, openai, openrouter")
      ->type_name("NAME");
  AddCheckedList(
      app, "--secret", &o->secrets,
      [](const std::string& v) { return secrets::ParseSecretSpec(v).status(); },
      "commands see NAME=<placeholder>; HTTPS requests to HOST carry the value instead, e.g. "
      "OPENAI_API_KEY=env:OPENAI_API_KEY@api.openai.com (SOURCE: env:VAR, file:PATH, "
      "op://VAULT/ITEM/FIELD, shared:NAME; see airlock secret --help)")
      ->type_name("NAME=SOURCE@HOST[,HOST...][?body&header=NAME]");
  app->add_option("--workspace", o->workspace,
                  "capture the project DIR (with its .git) into the session at /workspace, "
                  "writable there while DIR itself is never touched; bring work back with "
                  "airlock diff / promote. A .airlockignore in DIR (patterns as in .gitignore) "
                  "leaves paths out")
      ->type_name("DIR")
      ->check([](const std::string& v) {
        return v.empty() ? std::string("--workspace needs a directory") : std::string();
      });
  AddSizeOption(app, "--workspace-max", &o->workspace_max,
                "refuse a project with more file content than this (default 2g)");
  AddCheckedList(
      app, "--volume", &o->volumes,
      [](const std::string& v) { return ParseVolumeMount(v).status(); },
      "attach your volume NAME at PATH in the guest (repeatable, up to 2; see airlock volume "
      "--help): read-write by one session at a time, :ro by any number")
      ->type_name("NAME:/PATH[:ro]");
}

absl::StatusOr<v1::VolumeMount> ParseVolumeMount(const std::string& spec) {
  v1::VolumeMount m;
  size_t colon = spec.find(':');
  std::string path = colon == std::string::npos ? "" : spec.substr(colon + 1);
  for (const char* suffix : {":ro", ":rw"}) {
    if (absl::EndsWith(path, suffix)) {
      m.set_read_only(std::string(suffix) == ":ro");
      path.resize(path.size() - 3);
      break;
    }
  }
  if (colon == 0 || colon == std::string::npos || path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", spec,
        "\" is not a volume to attach: write NAME:/PATH or NAME:/PATH:ro (e.g. --volume "
        "data:/data:ro); airlock volume ls lists your volumes"));
  }
  m.set_name(spec.substr(0, colon));
  m.set_path(path);
  return m;
}

namespace {

template <typename Request>
absl::Status Apply(DaemonClient& client, const SessionOptions& o, Request* request) {
  request->set_image(o.image);
  *request->mutable_limits() = o.limits;
  for (const std::string& rule : o.allow) request->add_allow(rule);
  for (const std::string& preset : o.allow_presets) request->add_allow_preset(preset);
  for (const std::string& secret : o.secrets) {
    if (absl::Status s = AddSecretBinding(secret, request->mutable_secrets()); !s.ok()) return s;
  }
  for (const std::string& spec : o.volumes) {
    absl::StatusOr<v1::VolumeMount> volume = ParseVolumeMount(spec);
    if (!volume.ok()) return volume.status();
    *request->add_volumes() = *std::move(volume);
  }
  if (!o.workspace.empty()) {
    absl::StatusOr<std::string> token = UploadWorkspace(
        client, o.workspace, o.workspace_max == 0 ? kDefaultWorkspaceMaxBytes : o.workspace_max);
    if (!token.ok()) return token.status();
    request->set_workspace(*token);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplySessionOptions(DaemonClient& client, const SessionOptions& o,
                                 v1::CreateSessionRequest* request) {
  request->set_host(o.host);
  return Apply(client, o, request);
}

absl::Status ApplySessionOptions(DaemonClient& client, const SessionOptions& o,
                                 v1::ExecStart* request) {
  return Apply(client, o, request);
}

}  // namespace airlock
