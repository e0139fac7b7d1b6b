// `airlock dashboard`: the read-only web dashboard. Its options are checked here (help and
// mistakes as for every command); then this process becomes airlock-dashboard, the program
// beside this one that serves the page (so the CLI itself never links an HTTP server).
#include <string>
#include <vector>

#include "src/cli/cli_commands.h"
#include "src/cli/host_tools.h"

namespace airlock {

namespace {

constexpr char kDashboardFooter[] =
    "Serves a read-only web page over HTTPS (it refuses to start without --tls-cert and "
    "--tls-key): every tenant's sessions by state, each running session's host CPU and memory "
    "over the last four minutes, recent commands, denials and failures, updated every few "
    "seconds. It reads airlockd as a read-only operator: with --daemon over TCP with its own "
    "client certificate (airlockd --operator cert:NAME), or over the Unix socket as a uid "
    "named by --operator (or root). It keeps four minutes in memory and nothing on disk. With "
    "--token-file, browsers sign in with that token first (at /login); without it, anyone who "
    "reaches the address sees the page.";

struct DashboardArgs {
  std::string listen = "127.0.0.1:8443", tls_cert, tls_key, daemon, daemon_name, client_cert,
              client_key, ca, socket, token_file;
  int interval = 2;
};

int StartDashboard(const DashboardArgs& a) {
  std::vector<std::string> args = {"--listen", a.listen, "--interval", std::to_string(a.interval)};
  for (auto [flag, value] : {std::pair{"--tls-cert", &a.tls_cert},
                             {"--tls-key", &a.tls_key},
                             {"--daemon", &a.daemon},
                             {"--daemon-name", &a.daemon_name},
                             {"--client-cert", &a.client_cert},
                             {"--client-key", &a.client_key},
                             {"--ca", &a.ca},
                             {"--socket", &a.socket},
                             {"--token-file", &a.token_file}}) {
    if (!value->empty()) args.insert(args.end(), {flag, *value});
  }
  return BecomeProgramBeside("airlock-dashboard", args);
}

}  // namespace

void AddDashboardCommand(Cli& cli) {
  auto a = std::make_shared<DashboardArgs>();
  CLI::App* d = cli.Add(&cli.app(), "dashboard",
                        "a read-only web page of every tenant's sessions (HTTPS; for operators)",
                        [a] { return StartDashboard(*a); });
  d->footer(kDashboardFooter);
  d->add_option("--listen", a->listen, "address and port to serve on (default 127.0.0.1:8443)")
      ->type_name("HOST:PORT");
  d->add_option("--tls-cert", a->tls_cert, "the page's certificate (PEM); required")
      ->type_name("PEM");
  d->add_option("--tls-key", a->tls_key, "its private key (PEM); required")->type_name("PEM");
  CLI::Option* daemon =
      d->add_option("--daemon", a->daemon, "airlockd's TCP listener (default: the Unix socket)")
          ->type_name("HOST:PORT");
  d->add_option("--client-cert", a->client_cert, "the dashboard's client certificate for airlockd")
      ->type_name("PEM")
      ->needs(daemon);
  d->add_option("--client-key", a->client_key, "its private key")->type_name("PEM")->needs(daemon);
  d->add_option("--ca", a->ca, "the CA that signed airlockd's certificate")
      ->type_name("PEM")
      ->needs(daemon);
  d->add_option("--daemon-name", a->daemon_name,
                "the name airlockd's certificate carries, if not the --daemon host")
      ->type_name("NAME")
      ->needs(daemon);
  d->add_option("--socket", a->socket, "airlockd's Unix socket (default $AIRLOCK_SOCKET)")
      ->type_name("PATH")
      ->excludes(daemon);
  d->add_option("--token-file", a->token_file,
                "browsers must sign in with the token in this file (16+ characters)")
      ->type_name("FILE");
  d->add_option("--interval", a->interval, "seconds between samples (1 to 60, default 2)")
      ->check(CLI::Range(1, 60));
}

}  // namespace airlock
