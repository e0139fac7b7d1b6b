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
#include "src/net/egress_rule.h"

namespace airlock {
namespace {

constexpr char kNetworkUsage[] =
    "usage: airlock network ls ID [--json]\n"
    "       airlock network allow ID RULE... [--preset NAME]... [--ttl DURATION]\n"
    "       airlock network deny ID RULE... [--ttl DURATION]\n"
    "       airlock network rm ID RULE...\n"
    "       airlock network log ID [-f] [-n N] [--json]\n"
    "A session reaches only what its rules allow, within the operator's ceiling (ls shows\n"
    "both). RULE is HOST, *.DOMAIN, an IP address or CIDR ([v6] in brackets), each optionally\n"
    ":PORT (default ports 80 and 443), e.g. pypi.org, '*.example.com:8443', 10.20.0.0/16:5432;\n"
    "NAME:PORT/raw carries other protocols on 80 and 443 (no Host or SNI check).\n"
    "allow and deny apply at once to a running session and last across pause, resume and\n"
    "fork; deny wins over allow; connections no longer allowed are reset. --ttl makes the new\n"
    "rules expire by themselves (like 10m or 1h). rm removes rules as ls writes them.\n"
    "log lists every DNS answer and connection: time, name, address, port, bytes, and the\n"
    "rule that allowed it or why it was denied, and each secret sent (or left as a\n"
    "placeholder, and why); -f follows new ones.\n";

std::string Time(int64_t unix_ms) {
  time_t t = static_cast<time_t>(unix_ms / 1000);
  char when[32];
  strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", gmtime(&t));
  return absl::StrFormat("%s.%03dZ", when, static_cast<int>(unix_ms % 1000));
}

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

int Change(const std::string& verb, const std::string& id, const std::vector<std::string>& args) {
  v1::ChangeNetworkRequest request;
  request.set_session_id(id);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has_value = i + 1 < args.size();
    if (a == "--ttl" && has_value && verb != "rm") {
      absl::StatusOr<uint64_t> ttl = ParseDurationSeconds(args[++i]);
      if (!ttl.ok() || *ttl == 0) {
        return Usage(kNetworkUsage, "--ttl needs a duration like 90s, 10m or 1h");
      }
      request.set_ttl_seconds(static_cast<double>(*ttl));
    } else if (a == "--preset" && has_value && verb == "allow") {
      if (absl::Status s = net::PresetRules(args[++i]).status(); !s.ok()) {
        return Usage(kNetworkUsage, std::string(s.message()));
      }
      request.add_allow_preset(args[i]);
    } else if (!a.empty() && a[0] == '-') {
      return Usage(kNetworkUsage, "unexpected argument " + a);
    } else if (verb == "allow") {
      absl::StatusOr<net::EgressRule> rule = net::ParseSessionRule(a);
      if (!rule.ok()) return Usage(kNetworkUsage, std::string(rule.status().message()));
      request.add_allow(a);
    } else if (verb == "deny") {
      absl::StatusOr<net::EgressRule> rule =
          net::ParseEgressRule(a, net::RuleContext::kCeilingDeny);
      if (!rule.ok()) return Usage(kNetworkUsage, std::string(rule.status().message()));
      request.add_deny(a);
    } else {
      request.add_remove(a);
    }
  }
  if (request.allow().empty() && request.allow_preset().empty() && request.deny().empty() &&
      request.remove().empty()) {
    return Usage(kNetworkUsage, verb + " needs at least one RULE");
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

int Log(const std::string& id, const std::vector<std::string>& args) {
  v1::NetworkLogRequest request;
  request.set_session_id(id);
  bool json = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-f" || a == "--follow") {
      request.set_follow(true);
    } else if (a == "--json") {
      json = true;
    } else if ((a == "-n" || a == "--tail") && i + 1 < args.size()) {
      uint32_t n;
      if (!absl::SimpleAtoi(args[++i], &n)) return Usage(kNetworkUsage, "-n needs a number");
      request.set_tail(n);
    } else {
      return Usage(kNetworkUsage, "unexpected argument " + a);
    }
  }
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::NetworkEvent>> reader =
      client->network->Log(&context, request);
  v1::NetworkEvent e;
  while (reader->Read(&e)) {
    if (json) {
      nlohmann::json line = {{"unix_ms", e.unix_ms()},     {"kind", e.kind()},
                             {"name", e.name()},           {"address", e.address()},
                             {"port", e.port()},           {"allowed", e.allowed()},
                             {"rule", e.rule()},           {"reason", e.reason()},
                             {"bytes_out", e.bytes_out()}, {"bytes_in", e.bytes_in()}};
      std::printf("%s\n", line.dump().c_str());
    } else {
      std::string where = e.name().empty() ? e.address() : e.name();
      if (e.port() != 0) absl::StrAppend(&where, ":", e.port());
      std::string address = e.name().empty() || e.address().empty() ? "-" : e.address();
      std::string verdict = e.allowed() ? absl::StrCat("allowed by ", e.rule()) : "denied";
      if (e.kind() == "secret") verdict = absl::StrCat(e.allowed() ? "sent " : "", e.rule());
      std::printf("%s %-7s %-40s %-15s %8llu %8llu %s%s%s\n", Time(e.unix_ms()).c_str(),
                  e.kind().c_str(), where.c_str(), address.c_str(),
                  static_cast<unsigned long long>(e.bytes_out()),
                  static_cast<unsigned long long>(e.bytes_in()), verdict.c_str(),
                  e.reason().empty() ? "" : ": ", e.reason().c_str());
    }
    std::fflush(stdout);
  }
  grpc::Status status = reader->Finish();
  return status.ok() ? 0 : DaemonError(status);
}

}  // namespace

int NetworkCommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kNetworkUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string& verb = args[0];
  if (args.size() < 2 || args[1].empty() || args[1][0] == '-') {
    return Usage(kNetworkUsage, "which session? give its ID after " + verb);
  }
  const std::string& id = args[1];
  std::vector<std::string> rest(args.begin() + 2, args.end());
  if (verb == "ls") {
    if (rest.size() > 1 || (rest.size() == 1 && rest[0] != "--json")) {
      return Usage(kNetworkUsage, "ls takes an ID and --json");
    }
    return List(id, !rest.empty());
  }
  if (verb == "allow" || verb == "deny" || verb == "rm") return Change(verb, id, rest);
  if (verb == "log") return Log(id, rest);
  return Usage(kNetworkUsage, "unknown network command " + verb);
}

}  // namespace airlock
