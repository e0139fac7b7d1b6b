// `airlock network`: a session's egress rules, changed at runtime, and what its proxy decided.
#include <cstdio>
#include <ctime>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "src/cli/cli_commands.h"
#include "src/cli/cli_flags.h"
#include "src/cli/daemon_client.h"
#include "src/cli/session_json.h"
#include "src/common/utf8.h"
#include "src/net/egress_rule.h"

namespace airlock {
namespace {

constexpr char kNetworkFooter[] =
    "A session reaches only what its rules allow, within the operator's ceiling (ls shows\n"
    "both). RULE is HOST, *.DOMAIN, an IP address or CIDR ([v6] in brackets), each optionally\n"
    ":PORT (default ports 80 and 443), e.g. pypi.org, '*.example.com:8443', 10.20.0.0/16:5432;\n"
    "NAME:PORT/raw carries other protocols on 80 and 443 (no Host or SNI check).\n"
    "allow and deny apply at once to a running session and last across pause, resume and\n"
    "fork; deny wins over allow; connections no longer allowed are reset. --ttl makes the new\n"
    "rules expire by themselves (like 10m or 1h). rm removes rules as ls writes them.\n"
    "log lists every DNS answer and connection: time, name, address, port, bytes, and the\n"
    "rule that allowed it or why it was denied, and each secret sent (or left as a\n"
    "placeholder, and why); -f follows new ones.";

int List(const std::string& id, bool json) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::GetNetworkRequest request;
  request.set_session_id(id);
  v1::NetworkPolicy policy;
  grpc::Status status = client->network->Get(&context, request, &policy);
  if (!status.ok()) return DaemonError(status);
  if (json) {
    nlohmann::json out = {{"session", policy.session_id()},
                          {"version", policy.version()},
                          {"rules", nlohmann::json::array()},
                          {"ceiling", nlohmann::json::array()}};
    for (const v1::NetworkRule& r : policy.rules()) {
      out["rules"].push_back({{"rule", r.rule()},
                              {"effect", r.deny() ? "deny" : "allow"},
                              {"source", r.source()},
                              {"expires_unix_ms", r.expires_unix_ms()}});
    }
    for (const std::string& line : policy.ceiling()) out["ceiling"].push_back(line);
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (policy.rules().empty()) {
    std::printf("no rules: session %s reaches nothing (add some with airlock network allow)\n",
                id.c_str());
  } else {
    std::printf("%-6s %-36s %-16s %s\n", "EFFECT", "RULE", "FROM", "EXPIRES");
    int64_t now = std::time(nullptr) * 1000LL;
    for (const v1::NetworkRule& r : policy.rules()) {
      std::string expires =
          r.expires_unix_ms() == 0
              ? "never"
              : absl::StrCat("in ", (r.expires_unix_ms() - now + 999) / 1000, "s");
      std::printf("%-6s %-36s %-16s %s\n", r.deny() ? "deny" : "allow", r.rule().c_str(),
                  r.source().c_str(), expires.c_str());
    }
  }
  std::printf("ceiling (the operator's, version %lld of this policy):\n",
              static_cast<long long>(policy.version()));
  for (const std::string& line : policy.ceiling()) std::printf("  %s\n", line.c_str());
  return 0;
}

int Change(const v1::ChangeNetworkRequest& request, const std::string& verb) {
  const std::string& id = request.session_id();
  if (request.allow().empty() && request.allow_preset().empty() && request.deny().empty() &&
      request.remove().empty()) {
    std::fprintf(stderr, "airlock network %s: give at least one RULE (or --preset NAME)\n",
                 verb.c_str());
    return 2;
  }
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::NetworkPolicy policy;
  grpc::Status status = client->network->Change(&context, request, &policy);
  if (!status.ok()) return DaemonError(status);
  std::fprintf(stderr, "session %s: network policy version %lld, %d rule(s)\n", id.c_str(),
               static_cast<long long>(policy.version()), policy.rules_size());
  return 0;
}

int Log(const v1::NetworkLogRequest& request, bool json) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::NetworkEvent>> reader =
      client->network->Log(&context, request);
  v1::NetworkEvent e;
  while (reader->Read(&e)) {
    if (json) {
      nlohmann::json line = NetworkEventToJson(e);
      std::printf("%s\n", line.dump().c_str());
    } else {
      std::string where = e.name().empty() ? e.address() : e.name();
      if (e.port() != 0) absl::StrAppend(&where, ":", e.port());
      std::string address = e.name().empty() || e.address().empty() ? "-" : e.address();
      std::string verdict = e.allowed() ? absl::StrCat("allowed by ", e.rule()) : "denied";
      if (e.kind() == "secret") verdict = absl::StrCat(e.allowed() ? "sent " : "", e.rule());
      std::string repeats;
      if (e.repeats() > 0) {
        repeats = absl::StrCat(" (", e.repeats() + 1, " times, the last at ",
                               FormatUnixMs(e.last_unix_ms()), ")");
      }
      // The name and what is said of it come from the guest: escaped, never raw.
      std::printf(
          "%s %-7s %-40s %-15s %8llu %8llu %s%s%s%s\n", FormatUnixMs(e.unix_ms()).c_str(),
          EscapeForTerminal(e.kind()).c_str(), EscapeForTerminal(where).c_str(),
          EscapeForTerminal(address).c_str(), static_cast<unsigned long long>(e.bytes_out()),
          static_cast<unsigned long long>(e.bytes_in()), EscapeForTerminal(verdict).c_str(),
          e.reason().empty() ? "" : ": ", EscapeForTerminal(e.reason()).c_str(), repeats.c_str());
    }
    std::fflush(stdout);
  }
  grpc::Status status = reader->Finish();
  return status.ok() ? 0 : DaemonError(status);
}

}  // namespace

void AddNetworkCommand(Cli& cli) {
  CLI::App* group = cli.Group("network", "a session's egress rules and connections");
  group->footer(kNetworkFooter);

  struct ListArgs {
    std::string id;
    bool json = false;
  };
  auto ls = std::make_shared<ListArgs>();
  CLI::App* l = cli.Add(group, "ls", "the session's rules and the operator's ceiling",
                        [ls] { return List(ls->id, ls->json); });
  AddSessionId(l, [ls](const std::string& v) { ls->id = v; });
  AddJsonFlag(l, &ls->json);

  for (const char* verb : {"allow", "deny", "rm"}) {
    auto change = std::make_shared<v1::ChangeNetworkRequest>();
    std::string v = verb;
    CLI::App* c = cli.Add(group, verb,
                          v == "allow"  ? "let the session reach more, at once"
                          : v == "deny" ? "refuse destinations, at once (deny wins over allow)"
                                        : "remove rules as ls writes them",
                          [change, v] { return Change(*change, v); });
    c->footer(kNetworkFooter);
    AddSessionId(c, [change](const std::string& s) { change->set_session_id(s); });
    c->add_option_function<std::vector<std::string>>(
         "RULE",
         [change, v](const std::vector<std::string>& rules) {
           for (const std::string& rule : rules) {
             absl::Status ok =
                 v == "allow"  ? net::ParseSessionRule(rule).status()
                 : v == "deny" ? net::ParseEgressRule(rule, net::RuleContext::kCeilingDeny).status()
                               : absl::OkStatus();
             if (!ok.ok()) throw CLI::ValidationError(std::string(ok.message()));
             if (v == "allow") change->add_allow(rule);
             if (v == "deny") change->add_deny(rule);
             if (v == "rm") change->add_remove(rule);
           }
         },
         "HOST, *.DOMAIN, IP or CIDR, each optionally :PORT")
        ->type_name("RULE");
    if (v == "rm") continue;
    AddDurationOption(
        c, "--ttl",
        [change](uint64_t ttl) {
          if (ttl == 0) throw CLI::ValidationError("--ttl needs a duration like 90s, 10m or 1h");
          change->set_ttl_seconds(static_cast<double>(ttl));
        },
        "the new rules expire by themselves after this long (like 10m or 1h)");
    if (v == "allow") {
      AddCheckedList(
          c, "--preset", nullptr,
          [change](const std::string& name) {
            absl::Status s = net::PresetRules(name).status();
            if (s.ok()) change->add_allow_preset(name);
            return s;
          },
          "the hosts of an ecosystem: pypi, npm, github, debian, huggingface, crates, golang, "
          "anthropic, openai, openrouter")
          ->type_name("NAME");
    }
  }

  struct LogArgs {
    v1::NetworkLogRequest request;
    bool json = false;
  };
  auto log = std::make_shared<LogArgs>();
  CLI::App* lg = cli.Add(group, "log", "every DNS answer, connection and secret sent",
                         [log] { return Log(log->request, log->json); });
  lg->footer(kNetworkFooter);
  AddSessionId(lg, [log](const std::string& v) { log->request.set_session_id(v); });
  lg->add_flag_function(
      "-f,--follow", [log](int64_t) { log->request.set_follow(true); }, "follow new ones");
  AddCountOption(
      lg, "-n,--tail", [log](uint32_t n) { log->request.set_tail(n); }, 0, 1u << 30,
      "only the last N");
  AddJsonFlag(lg, &log->json);
}

}  // namespace airlock
