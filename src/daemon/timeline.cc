#include "src/daemon/timeline.h"

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace airlock {
namespace {

// The first line of text, at most 200 bytes.
std::string FirstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  return line;
}

std::string DescribeExec(const ExecRecord& e) {
  std::string out = absl::StrCat("$ ", absl::StrJoin(e.argv, " "));
  if (out.size() > 300) out = out.substr(0, 300) + "...";
  if (e.ended_ms < 0) return absl::StrCat(out, "  (no end recorded)");
  return absl::StrCat(out, "  (exit ", e.exit_code, " after ",
                      absl::StrFormat("%.1f", (e.ended_ms - e.started_ms) / 1000.0), " s)");
}

}  // namespace

absl::StatusOr<std::vector<v1::TimelineEvent>> BuildTimeline(StateStore& store,
                                                             const std::string& tenant,
                                                             const std::string& id,
                                                             size_t output_bytes) {
  absl::StatusOr<SessionRecord> session = store.sessions().Get(tenant, id);
  if (!session.ok()) return session.status();
  if (output_bytes == 0) output_bytes = kTimelineOutputBytes;
  output_bytes = std::min(output_bytes, kTimelineMaxOutputBytes);
  absl::StatusOr<std::vector<AuditRecord>> audit =
      store.audit().Of(tenant, id, CommandLog::kMaxTimelineRows);
  if (!audit.ok()) return audit.status();
  absl::StatusOr<std::vector<ExecRecord>> execs = store.commands().Read(tenant, id);
  if (!execs.ok()) return execs.status();
  absl::StatusOr<std::map<int64_t, ExecOutput>> outputs =
      store.commands().Outputs(tenant, id, output_bytes);
  if (!outputs.ok()) return outputs.status();
  absl::StatusOr<std::vector<net::NetEvent>> net =
      store.net_events().Read(tenant, id, 0, NetEventLog::kMaxNetEventsPerSession);
  if (!net.ok()) return net.status();
  absl::StatusOr<std::vector<AgentEvent>> agent = store.commands().ReadAgentEvents(tenant, id);
  if (!agent.ok()) return agent.status();

  std::vector<v1::TimelineEvent> out;
  std::map<int64_t, std::string> exec_caller;  // exec id -> who ran it (from its audit record)
  for (const AuditRecord& a : *audit) {
    if (a.action == "session.exec") {
      absl::string_view rest = a.outcome;
      int64_t exec_id;
      if (absl::ConsumePrefix(&rest, "exec ") &&
          absl::SimpleAtoi(rest.substr(0, rest.find(':')), &exec_id)) {
        exec_caller[exec_id] = a.principal;
      }
      continue;  // the command itself is its own event below
    }
    v1::TimelineEvent e;
    e.set_unix_ms(a.unix_ms);
    e.set_kind(a.action);
    e.set_actor(a.principal);
    e.set_summary(absl::StrCat(a.action, ": ", FirstLine(a.outcome)));
    // A lookup on this session's record is another tenant's attempt at it: always denied.
    e.set_failed(a.action == "session.fail" || a.action == "session.lookup" ||
                 absl::StrContains(a.outcome, "failed"));
    out.push_back(std::move(e));
  }
  for (const ExecRecord& x : *execs) {
    v1::TimelineEvent e;
    e.set_unix_ms(x.started_ms);
    e.set_kind("exec");
    e.set_exec_id(static_cast<uint64_t>(x.id));
    if (auto caller = exec_caller.find(x.id); caller != exec_caller.end()) {
      e.set_actor(caller->second);
    }
    for (const std::string& a : x.argv) e.add_argv(a);
    e.set_user(x.user);
    e.set_cwd(x.cwd);
    e.set_tty(x.tty);
    e.set_duration_ms(x.ended_ms < 0 ? -1 : x.ended_ms - x.started_ms);
    e.set_exit_code(x.exit_code);
    e.set_failed(x.ended_ms >= 0 && x.exit_code != 0);
    e.set_summary(DescribeExec(x));
    if (!x.message.empty()) e.set_text(x.message);
    if (auto o = outputs->find(x.id); o != outputs->end()) {
      e.set_output(o->second.kept);
      e.set_output_total(o->second.total);
    }
    out.push_back(std::move(e));
  }
  for (const net::NetEvent& n : *net) {
    v1::TimelineEvent e;
    e.set_unix_ms(n.unix_ms);
    e.set_kind(absl::StrCat("net.", n.kind));
    e.set_actor("guest");
    e.set_failed(!n.allowed);
    e.set_summary(net::DescribeNetEvent(n));
    out.push_back(std::move(e));
  }
  for (const AgentEvent& a : *agent) {
    v1::TimelineEvent e;
    e.set_unix_ms(a.unix_ms);
    e.set_kind(a.kind);
    e.set_actor(a.agent);
    e.set_exec_id(static_cast<uint64_t>(a.exec_id));
    e.set_tool_id(a.tool_id);
    e.set_tool(a.tool);
    e.set_text(a.text);
    e.set_summary(a.tool.empty() ? FirstLine(a.text)
                                 : absl::StrCat(a.tool, ": ", FirstLine(a.text)));
    out.push_back(std::move(e));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const v1::TimelineEvent& a, const v1::TimelineEvent& b) {
                     return a.unix_ms() < b.unix_ms();
                   });
  for (size_t i = 0; i < out.size(); ++i) out[i].set_seq(i + 1);
  return out;
}

}  // namespace airlock
