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

namespace airlock {
namespace {

constexpr char kSecretUsage[] =
    "usage: airlock secret ls ID [--json]\n"
    "       airlock secret set ID NAME=SOURCE@HOST[,HOST...][?body]...\n"
    "       airlock secret rm ID NAME...\n"
    "A secret's value never enters the guest: commands see NAME=<placeholder>, and airlockd\n"
    "puts the value in place of the placeholder only in HTTPS requests to the hosts it is\n"
    "bound to (in headers; in bodies too with ?body), and puts the placeholder back in place\n"
    "of the value in what those hosts answer. The hosts must also be allowed (--allow).\n"
    "SOURCE is env:VAR or file:PATH (read here, by this command) or op://VAULT/ITEM/FIELD\n"
    "(read by airlockd with 1Password's `op`, again at each resume).\n"
    "set binds new secrets or gives bound ones a new source or value (the placeholder stays);\n"
    "ls shows names, sources, hosts, placeholders and when each was last sent.\n";

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
  if (spec->kind() == secrets::SourceKind::kOnePassword) return absl::OkStatus();
  std::string warning;
  absl::StatusOr<std::string> value = secrets::ReadLocalSecret(*spec, &warning);
  if (!warning.empty()) std::fprintf(stderr, "airlock: warning: %s\n", warning.c_str());
  if (!value.ok()) return value.status();
  binding->set_value(*value);
  secrets::Wipe(*value);
  return absl::OkStatus();
}

int SecretCommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kSecretUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string& verb = args[0];
  if (args.size() < 2 || args[1].empty() || args[1][0] == '-') {
    return Usage(kSecretUsage, "which session? give its ID after " + verb);
  }
  const std::string& id = args[1];
  std::vector<std::string> rest(args.begin() + 2, args.end());
  if (verb == "ls") {
    if (rest.size() > 1 || (rest.size() == 1 && rest[0] != "--json")) {
      return Usage(kSecretUsage, "ls takes an ID and --json");
    }
    std::optional<DaemonClient> client = Connect();
    if (!client) return 1;
    grpc::ClientContext context;
    v1::ListSecretsRequest request;
    request.set_session_id(id);
    v1::ListSecretsResponse response;
    grpc::Status status = client->secrets->List(&context, request, &response);
    if (!status.ok()) return DaemonError(status);
    return Print(response, !rest.empty());
  }
  if (verb == "set") {
    if (rest.empty()) return Usage(kSecretUsage, "set needs NAME=SOURCE@HOST");
    v1::SetSecretsRequest request;
    request.set_session_id(id);
    for (const std::string& text : rest) {
      if (absl::Status s = AddSecretBinding(text, request.mutable_secrets()); !s.ok()) {
        return Usage(kSecretUsage, std::string(s.message()));
      }
    }
    std::optional<DaemonClient> client = Connect();
    if (!client) return 1;
    grpc::ClientContext context;
    v1::ListSecretsResponse response;
    grpc::Status status = client->secrets->Set(&context, request, &response);
    for (v1::SecretBinding& b : *request.mutable_secrets()) secrets::Wipe(*b.mutable_value());
    if (!status.ok()) return DaemonError(status);
    return Print(response, false);
  }
  if (verb == "rm") {
    if (rest.empty()) return Usage(kSecretUsage, "rm needs the NAME of a secret");
    v1::RemoveSecretsRequest request;
    request.set_session_id(id);
    for (const std::string& name : rest) request.add_names(name);
    std::optional<DaemonClient> client = Connect();
    if (!client) return 1;
    grpc::ClientContext context;
    v1::ListSecretsResponse response;
    grpc::Status status = client->secrets->Remove(&context, request, &response);
    if (!status.ok()) return DaemonError(status);
    return Print(response, false);
  }
  return Usage(kSecretUsage, "unknown secret command " + verb);
}

}  // namespace airlock
