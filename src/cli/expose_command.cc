// airlock expose: guest ports as URLs through airlockd's HTTP gateway.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "src/cli/cli_app.h"
#include "src/cli/cli_commands.h"
#include "src/cli/daemon_client.h"

namespace airlock {
namespace {

struct ExposeArgs {
  std::string id;
  uint32_t port = 0;
  bool is_public = false;
};

int Expose(const ExposeArgs& args) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::ExposeRequest request;
  request.set_session_id(args.id);
  request.set_port(args.port);
  request.set_public_(args.is_public);
  v1::Exposure exposure;
  grpc::Status status = client->sessions->Expose(&context, request, &exposure);
  if (!status.ok()) return DaemonError(status);
  std::printf("%s\n", exposure.url().c_str());
  return 0;
}

int List(const std::string& id) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::ListExposuresRequest request;
  request.set_session_id(id);
  v1::ListExposuresResponse response;
  grpc::Status status = client->sessions->ListExposures(&context, request, &response);
  if (!status.ok()) return DaemonError(status);
  if (response.exposures().empty()) {
    std::fprintf(stderr, "no port of session %s is exposed (airlock expose %s PORT)\n", id.c_str(),
                 id.c_str());
    return 0;
  }
  std::printf("%-6s %-7s %s\n", "PORT", "ACCESS", "URL");
  for (const v1::Exposure& e : response.exposures()) {
    std::printf("%-6u %-7s %s\n", e.port(), e.public_() ? "public" : "token", e.url().c_str());
  }
  return 0;
}

int Remove(const std::string& id, uint32_t port) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::UnexposeRequest request;
  request.set_session_id(id);
  request.set_port(port);
  v1::UnexposeResponse response;
  grpc::Status status = client->sessions->Unexpose(&context, request, &response);
  if (!status.ok()) return DaemonError(status);
  return 0;
}

void AddPort(CLI::App* app, uint32_t* port, bool required) {
  CLI::Option* o = app->add_option("PORT", *port, "the guest's TCP port (1 to 65535)")
                       ->check(CLI::Range(1, 65535));
  if (required) o->required();
}

}  // namespace

void AddExposeCommand(Cli& cli) {
  auto args = std::make_shared<ExposeArgs>();
  CLI::App* expose = cli.Add(
      &cli.app(), "expose", "a guest port as a URL: expose ID PORT [--public]; expose ls|rm",
      [args] {
        if (args->id.empty() || args->port == 0) {
          std::fprintf(stderr,
                       "airlock expose: give a session and a port (airlock expose ID PORT), or "
                       "ls ID, or rm ID PORT\nsee: airlock expose --help\n");
          return 2;
        }
        return Expose(*args);
      });
  expose->footer(
      "Prints the URL of a server in session ID's guest (listening on its loopback or on every\n"
      "address), through airlockd's HTTP gateway (airlockd --http-listen, 127.0.0.1:8790 by\n"
      "default): http://PORT-ID.airlock.localhost:8790/?airlock_token=TOKEN. A browser opening it\n"
      "keeps the token in a cookie of that host; programs send it as the header X-Airlock-Token\n"
      "(or route with X-Airlock-Session and X-Airlock-Port where they cannot use the name).\n"
      "HTTP and WebSockets pass through. A paused session is resumed by a request; pausing it\n"
      "cuts open connections. Exposing a port again gives it a new token; the exposure ends\n"
      "with `airlock expose rm ID PORT` or with the session. Every connection is audited and\n"
      "shows in `airlock log ID`.");
  AddSessionId(
      expose, [args](const std::string& id) { args->id = id; }, false);
  AddPort(expose, &args->port, false);
  expose->add_flag("--public", args->is_public,
                   "no token: anyone who can reach the gateway can reach the port (the "
                   "operator may forbid it: airlockd --http-public deny)");

  auto ls_id = std::make_shared<std::string>();
  CLI::App* ls = cli.Add(expose, "ls", "the session's exposed ports, with their URLs",
                         [ls_id] { return List(*ls_id); });
  AddSessionId(ls, [ls_id](const std::string& id) { *ls_id = id; });

  auto rm = std::make_shared<ExposeArgs>();
  CLI::App* rm_app = cli.Add(expose, "rm", "end an exposure (its open connections are cut)",
                             [rm] { return Remove(rm->id, rm->port); });
  AddSessionId(rm_app, [rm](const std::string& id) { rm->id = id; });
  AddPort(rm_app, &rm->port, true);
}

}  // namespace airlock
