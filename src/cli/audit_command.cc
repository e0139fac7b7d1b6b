// airlock audit: the host's audit log and a check of its hash chain (root and read-only
// operators).
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "src/cli/cli_app.h"
#include "src/cli/cli_commands.h"
#include "src/cli/cli_flags.h"
#include "src/cli/daemon_client.h"
#include "src/common/utf8.h"

namespace airlock {
namespace {

constexpr char kAuditFooter[] =
    "Every change to a session, image, network policy or secret, file transfers and refusals "
    "(quotas, another user's session), with who asked and what came of it, every user's. The "
    "log is one hash chain: each record's hash covers its fields and the record before it, so "
    "--verify finds a record that was changed, removed or moved in airlockd's database "
    "(exit 1, saying where). It does not catch someone who rewrites every hash after a change; "
    "keep a copy elsewhere for that. Root and read-only operators (airlockd --operator) only; "
    "your own sessions' records are in airlock log ID.";

struct AuditOptions {
  uint64_t since_seconds = 0;  // 0: all
  uint32_t limit = 0;
  bool json = false;
  bool verify = false;
};

int Verify(DaemonClient& client, bool json) {
  grpc::ClientContext context;
  v1::AuditVerification v;
  grpc::Status status = client.audit->Verify(&context, {}, &v);
  if (!status.ok()) return DaemonError(status);
  if (json) {
    std::printf("%s\n", nlohmann::json({{"ok", v.ok()},
                                        {"records", v.records()},
                                        {"last_seq", v.last_seq()},
                                        {"problem", v.problem()},
                                        {"first_bad_seq", v.first_bad_seq()}})
                            .dump(2)
                            .c_str());
  } else if (v.ok()) {
    std::printf("ok: %llu records, the chain is whole (last %lld)\n",
                static_cast<unsigned long long>(v.records()), static_cast<long long>(v.last_seq()));
  } else {
    std::fprintf(stderr, "airlock audit: the chain is broken: %s\n", v.problem().c_str());
  }
  return v.ok() ? 0 : 1;
}

int Audit(const AuditOptions& o) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  if (o.verify) return Verify(*client, o.json);
  v1::ListAuditRequest request;
  if (o.since_seconds > 0) {
    request.set_since_unix_ms(absl::ToUnixMillis(absl::Now()) -
                              static_cast<int64_t>(o.since_seconds) * 1000);
  }
  request.set_limit(o.limit);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::AuditRecord>> reader =
      client->audit->List(&context, request);
  v1::AuditRecord r;
  if (!o.json) {
    std::printf("%-6s  %-24s  %-14s  %-14s  %-18s  %-14s  %s\n", "SEQ", "TIME", "PRINCIPAL",
                "TENANT", "ACTION", "TARGET", "OUTCOME");
  }
  while (reader->Read(&r)) {
    if (o.json) {
      // One object per line, as they come.
      std::printf("%s\n", nlohmann::json({{"seq", r.seq()},
                                          {"unix_ms", r.unix_ms()},
                                          {"principal", r.principal()},
                                          {"tenant", r.tenant()},
                                          {"action", r.action()},
                                          {"target", r.target()},
                                          {"outcome", r.outcome()},
                                          {"hash", r.hash()}})
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                              .c_str());
      continue;
    }
    // Targets and outcomes carry names users chose (images, paths): shown, never obeyed.
    std::printf("%-6lld  %-24s  %-14s  %-14s  %-18s  %-14s  %s\n", static_cast<long long>(r.seq()),
                FormatUnixMs(r.unix_ms()).c_str(), EscapeForTerminal(r.principal()).c_str(),
                EscapeForTerminal(r.tenant()).c_str(), EscapeForTerminal(r.action()).c_str(),
                EscapeForTerminal(r.target()).c_str(), EscapeForTerminal(r.outcome()).c_str());
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return DaemonError(status);
  return 0;
}

}  // namespace

void AddAuditCommand(Cli& cli) {
  auto o = std::make_shared<AuditOptions>();
  CLI::App* a = cli.Add(&cli.app(), "audit", "the host's audit log, every user's (root, operators)",
                        [o] { return Audit(*o); });
  a->footer(kAuditFooter);
  AddDurationOption(
      a, "--since", [o](uint64_t s) { o->since_seconds = s; },
      "only records this recent (like 1h or 7d; default: all)");
  AddCountOption(
      a, "-n,--limit", [o](uint32_t n) { o->limit = n; }, 1, UINT32_MAX,
      "at most the newest N records (default 1000; airlockd allows 100000)");
  a->add_flag("--verify", o->verify,
              "check the whole hash chain instead of listing (exit 1 when it is broken)");
  AddJsonFlag(a, &o->json);
}

}  // namespace airlock
