// airlock api-key: keys for the E2B-compatible API on airlockd's HTTP gateway.
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include "src/cli/cli_app.h"
#include "src/cli/cli_commands.h"
#include "src/cli/daemon_client.h"

namespace airlock {
namespace {

int Create(const std::string& name) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::CreateApiKeyRequest request;
  request.set_name(name);
  v1::ApiKey key;
  grpc::Status status = client->api_keys->Create(&context, request, &key);
  if (!status.ok()) return DaemonError(status);
  std::printf("%s\n", key.key().c_str());
  std::fprintf(stderr,
               "the key is shown this once; E2B's SDKs use it with\n"
               "  E2B_API_KEY=%s E2B_API_URL=http://127.0.0.1:8790 "
               "E2B_SANDBOX_URL=http://127.0.0.1:8790 E2B_VOLUME_API_URL=http://127.0.0.1:8790\n"
               "(the address is airlockd's HTTP gateway, --http-listen, if it runs elsewhere)\n",
               key.key().c_str());
  return 0;
}

int List() {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::ListApiKeysResponse response;
  grpc::Status status = client->api_keys->List(&context, v1::ListApiKeysRequest(), &response);
  if (!status.ok()) return DaemonError(status);
  std::printf("%-24s %s\n", "NAME", "CREATED");
  for (const v1::ApiKey& k : response.keys()) {
    time_t t = static_cast<time_t>(k.created_unix_ms() / 1000);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    std::printf("%-24s %s\n", k.name().c_str(), when);
  }
  return 0;
}

int Remove(const std::string& name) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::RemoveApiKeyRequest request;
  request.set_name(name);
  v1::RemoveApiKeyResponse response;
  grpc::Status status = client->api_keys->Remove(&context, request, &response);
  return status.ok() ? 0 : DaemonError(status);
}

}  // namespace

void AddApiKeyCommand(Cli& cli) {
  CLI::App* group =
      cli.Group("api-key", "keys for the E2B-compatible API on airlockd's HTTP gateway");
  group->footer(
      "A key lets E2B's SDKs (and tools built on them) use this airlockd as you:\n"
      "  export E2B_API_KEY=$(airlock api-key create --name ci)\n"
      "  export E2B_API_URL=http://127.0.0.1:8790 E2B_SANDBOX_URL=http://127.0.0.1:8790\n"
      "  export E2B_VOLUME_API_URL=http://127.0.0.1:8790   (volumes' files)\n"
      "(airlockd's HTTP gateway, --http-listen). Their sandboxes are your sessions\n"
      "(airlock ls), within your quotas; the audit names the key. Only a hash of\n"
      "the key is kept: it is shown once.");
  auto name = std::make_shared<std::string>();
  CLI::App* create =
      cli.Add(group, "create", "make a key (printed once)", [name] { return Create(*name); });
  create->add_option("--name", *name, "what the key is for (1 to 64 of a-z, 0-9, -, _, .)")
      ->required();
  cli.Add(group, "ls", "your keys' names", [] { return List(); });
  auto removed = std::make_shared<std::string>();
  CLI::App* rm = cli.Add(group, "rm", "remove a key: it opens nothing from then on",
                         [removed] { return Remove(*removed); });
  rm->add_option("NAME", *removed, "the key's name")->required();
}

}  // namespace airlock
