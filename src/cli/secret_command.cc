// `airlock secret`: the secrets of a session (names, sources, hosts, last use; never values), and
// how --secret turns into what the CLI sends airlockd.
#include <cstdio>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "src/cli/cli_commands.h"
#include "src/cli/daemon_client.h"
#include "src/secrets/secret_source.h"
#include "src/secrets/secret_spec.h"

namespace airlock {
namespace {

constexpr char kSecretFooter[] =
    "A secret's value never enters the guest: commands see NAME=<placeholder>, and airlockd\n"
    "puts the value in place of the placeholder only in HTTPS requests to the hosts it is\n"
    "bound to (in credential headers such as Authorization and X-Api-Key, or in those named\n"
    "with ?header=NAME; in bodies too with ?body), and puts the placeholder back in place\n"
    "of the value in what those hosts answer. The hosts must also be allowed (--allow).\n"
    "SOURCE is env:VAR, file:PATH or op://VAULT/ITEM/FIELD (read here, by this command, with\n"
    "your rights; op:// with 1Password's `op`), or shared:NAME, a source the operator shares\n"
    "with you (read by airlockd, again at each resume).\n"
    "set binds new secrets or gives bound ones a new source or value (the placeholder stays);\n"
    "ls shows names, sources, hosts, placeholders and when each was last sent.";

std::string Time(int64_t unix_ms) {
  if (unix_ms == 0) return "never";
  time_t t = static_cast<time_t>(unix_ms / 1000);
  char when[32];
  strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
  return when;
}

int Print(const v1::ListSecretsResponse& response, bool json) {
  if (json) {
    nlohmann::json out = {{"session", response.session_id()}, {"secrets", nlohmann::json::array()}};
    for (const v1::SecretInfo& s : response.secrets()) {
      out["secrets"].push_back(
          {{"name", s.name()},
           {"source", s.source()},
           {"hosts", std::vector<std::string>(s.hosts().begin(), s.hosts().end())},
           {"body", s.body()},
           {"placeholder", s.placeholder()},
           {"available", s.available()},
           {"last_used_unix_ms", s.last_used_unix_ms()}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (response.secrets().empty()) {
    std::printf("session %s has no secrets (bind one with airlock secret set)\n",
                response.session_id().c_str());
    return 0;
  }
  std::printf("%-24s %-36s %-32s %-20s %s\n", "NAME", "SOURCE", "HOSTS", "LAST USED", "VALUE");
  for (const v1::SecretInfo& s : response.secrets()) {
    std::string hosts = absl::StrJoin(s.hosts(), ",");
    if (s.body()) hosts += " (+body)";
    std::printf("%-24s %-36s %-32s %-20s %s\n", s.name().c_str(), s.source().c_str(), hosts.c_str(),
                Time(s.last_used_unix_ms()).c_str(),
                s.available() ? "held" : "missing: airlock secret set it again");
  }
  return 0;
}

}  // namespace

absl::Status AddSecretBinding(const std::string& text,
                              google::protobuf::RepeatedPtrField<v1::SecretBinding>* out) {
  absl::StatusOr<secrets::SecretSpec> spec = secrets::ParseSecretSpec(text);
  if (!spec.ok()) return spec.status();
  v1::SecretBinding* binding = out->Add();
  binding->set_spec(secrets::FormatSecretSpec(*spec));
  if (spec->kind() == secrets::SourceKind::kShared) return absl::OkStatus();  // airlockd reads it
  std::string warning;
  absl::StatusOr<std::string> value = secrets::ReadLocalSecret(*spec, &warning);
  if (!warning.empty()) std::fprintf(stderr, "airlock: warning: %s\n", warning.c_str());
  if (!value.ok()) return value.status();
  binding->set_value(*value);
  secrets::Wipe(*value);
  return absl::OkStatus();
}

namespace {

struct SecretArgs {
  std::string id;
  std::vector<std::string> items;  // specs for set, names for rm
  bool json = false;
};

int Secret(const std::string& verb, const SecretArgs& args) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::ListSecretsResponse response;
  grpc::Status status;
  if (verb == "ls") {
    v1::ListSecretsRequest request;
    request.set_session_id(args.id);
    status = client->secrets->List(&context, request, &response);
  } else if (verb == "set") {
    v1::SetSecretsRequest request;
    request.set_session_id(args.id);
    for (const std::string& text : args.items) {
      if (absl::Status s = AddSecretBinding(text, request.mutable_secrets()); !s.ok()) {
        std::fprintf(stderr, "airlock secret set: %s\n", std::string(s.message()).c_str());
        return 2;
      }
    }
    status = client->secrets->Set(&context, request, &response);
    for (v1::SecretBinding& b : *request.mutable_secrets()) secrets::Wipe(*b.mutable_value());
  } else {
    v1::RemoveSecretsRequest request;
    request.set_session_id(args.id);
    for (const std::string& name : args.items) request.add_names(name);
    status = client->secrets->Remove(&context, request, &response);
  }
  if (!status.ok()) return DaemonError(status);
  return Print(response, args.json);
}

}  // namespace

void AddSecretCommand(Cli& cli) {
  CLI::App* group = cli.Group("secret", "secrets the guest holds placeholders of");
  group->footer(kSecretFooter);
  for (const char* verb : {"ls", "set", "rm"}) {
    std::string v = verb;
    auto args = std::make_shared<SecretArgs>();
    CLI::App* app = cli.Add(group, verb,
                            v == "ls"    ? "the session's secrets: names, sources, hosts, last use"
                            : v == "set" ? "bind secrets, or give bound ones a new value"
                                         : "unbind secrets",
                            [v, args] { return Secret(v, *args); });
    app->footer(kSecretFooter);
    AddSessionId(app, &args->id);
    if (v == "set") {
      AddCheckedList(
          app, "SPEC", &args->items,
          [](const std::string& text) { return secrets::ParseSecretSpec(text).status(); },
          "NAME=SOURCE@HOST[,HOST...][?body&header=NAME]")
          ->required()
          ->allow_extra_args(true);
    } else if (v == "rm") {
      app->add_option("NAME", args->items, "the secrets' names")->required();
    }
    AddJsonFlag(app, &args->json);
  }
}

}  // namespace airlock
