#include "src/daemon/timeline.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "src/common/utf8.h"

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

constexpr const char* kActivityKinds[] = {"activity.exec",   "activity.exit",   "activity.read",
                                          "activity.write",  "activity.create", "activity.remove",
                                          "activity.rename", "activity.lost"};

std::string Basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// A path with its home or /workspace taken off ("src/app.py"), as agents often name files.
std::string RelativeName(const std::string& path) {
  absl::string_view rest = path;
  if (absl::ConsumePrefix(&rest, "/workspace/") || absl::ConsumePrefix(&rest, "/root/")) {
    return std::string(rest);
  }
  if (absl::ConsumePrefix(&rest, "/home/") && rest.find('/') != absl::string_view::npos) {
    return std::string(rest.substr(rest.find('/') + 1));
  }
  return path;
}

// Agents' own state under their home: what they keep of themselves is not activity to flag.
bool IsAgentState(const std::string& path) {
  std::string rel = RelativeName(path);
  for (absl::string_view own : {".claude/", ".claude.json", ".config/opencode/",
                                ".local/share/opencode/", ".local/state/opencode/", ".npm/"}) {
    if (absl::StartsWith(rel, own)) return true;
  }
  return false;
}

// Whether `name` (3 bytes or more) appears in `text` as a whole word or path: not inside a
// longer name ("a" would match nearly any text).
bool Mentions(absl::string_view text, absl::string_view name) {
  if (name.size() < 3) return false;
  auto part_of_name = [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  };
  for (size_t at = text.find(name); at != absl::string_view::npos; at = text.find(name, at + 1)) {
    bool starts = at == 0 || !part_of_name(text[at - 1]);
    bool ends = at + name.size() == text.size() || !part_of_name(text[at + name.size()]);
    if (starts && ends) return true;
  }
  return false;
}

// The names of a program an agent would use: the executable's, or, for an interpreter, its
// script's (argv is the program's own to choose, so only a script argument counts).
std::vector<std::string> ProgramNames(const ActivityRecord& r) {
  std::vector<std::string> names;
  std::string exe = Basename(r.path);
  if (!exe.empty()) names.push_back(exe);
  for (absl::string_view interpreter : {"python", "node", "sh", "bash", "dash", "perl", "ruby"}) {
    if (absl::StartsWith(exe, interpreter) && r.argv.size() > 1 && !r.argv[1].empty() &&
        r.argv[1][0] != '-') {
      names.push_back(Basename(r.argv[1]));
      break;
    }
  }
  return names;
}

// Guest bytes in a summary: valid UTF-8, no control character (a newline would forge a line of
// the text form), cut at `max` bytes.
std::string GuestText(std::string_view bytes, size_t max = 1024) {
  std::string out = EscapeForTerminal(bytes.substr(0, max));
  return bytes.size() > max ? out + "..." : out;
}

std::string DescribeActivity(const ActivityRecord& r) {
  std::string who =
      absl::StrCat(r.process.empty() ? "?" : GuestText(r.process), " (pid ", r.pid, ")");
  switch (r.kind) {
    case ActivityKind::kProcessStart:
      return absl::StrCat("started ", who, ", parent ", r.parent, ": ",
                          GuestText(absl::StrJoin(r.argv, " "), 300));
    case ActivityKind::kProcessExit:
      return r.code < 0 ? absl::StrCat(who, " was killed by signal ", -r.code)
                        : absl::StrCat(who, " exited ", r.code);
    case ActivityKind::kRename:
      return absl::StrCat("rename ", GuestText(r.path), " -> ", GuestText(r.target), " by ", who);
    case ActivityKind::kLost:
      return r.code > 0 ? absl::StrCat("activity record incomplete: ", GuestText(r.path), " (",
                                       r.code, ")")
                        : absl::StrCat("activity record: ", GuestText(r.path));
    default:
      return absl::StrCat(absl::StripPrefix(kActivityKinds[static_cast<int>(r.kind)], "activity."),
                          " ", GuestText(r.path), " by ", who);
  }
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
  absl::StatusOr<std::vector<ActivityEvent>> activity =
      store.activity().Read(tenant, id, kTimelineActivityRows, kTimelineActivityBytes);
  if (!activity.ok()) return activity.status();
  absl::StatusOr<ActivityLog::Usage> activity_usage = store.activity().UsageOf(tenant, id);
  if (!activity_usage.ok()) return activity_usage.status();

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
  // What agents said, by the command they ran in: the record's events of those commands that
  // none of it names are marked.
  std::map<int64_t, std::string> agent_said;
  for (const AgentEvent& a : *agent) {
    if (a.exec_id != 0) absl::StrAppend(&agent_said[a.exec_id], a.tool, "\n", a.text, "\n");
  }
  std::set<int64_t> exec_ids;
  for (const ExecRecord& x : *execs) exec_ids.insert(x.id);
  for (const ActivityEvent& a : *activity) {
    const ActivityRecord& r = a.record;
    v1::TimelineEvent e;
    e.set_unix_ms(r.unix_ms);
    e.set_kind(kActivityKinds[static_cast<int>(r.kind)]);
    e.set_actor("guest");
    // A command number the guest names that the session never ran is not believed.
    int64_t exec_id = static_cast<int64_t>(r.exec_id);
    if (exec_ids.contains(exec_id)) e.set_exec_id(r.exec_id);
    e.set_pid(r.pid);
    e.set_parent_pid(r.parent);
    e.set_process(r.process);
    if (r.kind == ActivityKind::kLost) {
      e.set_text(r.path);
    } else {
      e.set_path(r.path);
    }
    e.set_path_to(r.target);
    for (const std::string& arg : r.argv) e.add_argv(arg);
    if (r.kind == ActivityKind::kProcessExit) e.set_exit_code(r.code);
    e.set_failed(r.kind == ActivityKind::kLost ||
                 (r.kind == ActivityKind::kProcessExit && r.code != 0));
    e.set_summary(DescribeActivity(r));
    if (auto said = agent_said.find(exec_id); said != agent_said.end() &&
                                              r.kind != ActivityKind::kLost &&
                                              r.kind != ActivityKind::kProcessExit) {
      std::vector<std::string> names;
      if (r.kind == ActivityKind::kProcessStart) {
        names = ProgramNames(r);
      } else {
        names = {r.path, RelativeName(r.path)};
        if (!r.target.empty()) names.push_back(RelativeName(r.target));
      }
      bool mentioned = IsAgentState(r.path);
      for (const std::string& name : names) mentioned = mentioned || Mentions(said->second, name);
      e.set_unmentioned(!mentioned);
    }
    out.push_back(std::move(e));
  }
  // What the timeline does not show of the record: dropped for its caps, or left out here.
  int64_t left_out = activity_usage->rows - static_cast<int64_t>(activity->size());
  if (activity_usage->dropped > 0 || left_out > 0) {
    v1::TimelineEvent e;
    e.set_unix_ms(activity->empty() ? 0 : activity->back().record.unix_ms);
    e.set_kind("activity.lost");
    e.set_actor("airlockd");
    e.set_failed(true);
    e.set_summary(absl::StrCat(
        "the activity record keeps a session's first events and its newest (",
        ActivityLog::kMaxActivityPerSession, " or ", ActivityLog::kMaxActivityBytesPerSession >> 20,
        " MiB in all): ", activity_usage->dropped, " between them were dropped",
        left_out > 0 ? absl::StrCat(", and ", left_out, " more are kept but not shown here") : ""));
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
