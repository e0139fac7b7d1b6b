// `airlock log ID`: the session's timeline as text, JSON or one HTML page
// (src/cli/timeline_render.h).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "src/cli/cli_commands.h"
#include "src/cli/daemon_client.h"
#include "src/cli/timeline_render.h"
#include "src/common/file_util.h"
#include "src/common/subprocess.h"

namespace airlock {
namespace {

constexpr char kLogFooter[] =
    "Everything session ID did, oldest first: created, paused, resumed, forked, removed or\n"
    "failed; each command (who ran it, as whom, where, how long, its exit and output); files\n"
    "written and read through the API; egress allowed and denied and secrets sent; workspace\n"
    "sync and promote; what coding agents in it said and did; and its activity record, kept\n"
    "by the guest's PID 1 rather than by anything the agent runs: every program started and\n"
    "how it ended, and every file under /workspace, /root and /home read, written, made,\n"
    "removed or renamed, each with its process and the command (#N) it descends from.\n"
    "`--unmentioned` shows only the record's events of an agent's command that none of the\n"
    "agent's own events names (marked ! in the text form). Kept after the session is\n"
    "removed. (`airlock logs ID` is the raw output of its commands.) The HTML page loads\n"
    "nothing and runs nothing but its own script.";

struct LogArgs {
  v1::TimelineRequest request;
  bool json = false, open = false;
  bool unmentioned = false, no_activity = false;
  std::string html;
  size_t lines = 20;
};

// Opens path in the desktop's browser, if there is a desktop and a way to ask it.
bool OpenInBrowser(const std::string& path) {
  if (std::getenv("DISPLAY") == nullptr && std::getenv("WAYLAND_DISPLAY") == nullptr) return false;
  std::string opener = FindInPath("xdg-open", "/usr/local/bin:/usr/bin:/bin");
  if (opener.empty()) return false;
  ProcessOptions options;
  for (const char* keep : {"DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "HOME", "PATH"}) {
    if (const char* v = std::getenv(keep)) options.env.push_back(std::string(keep) + "=" + v);
  }
  options.timeout = absl::Seconds(20);
  absl::StatusOr<ProcessResult> r = RunProcess({opener, path}, options);
  return r.ok() && r->exit_code == 0;
}

int Log(const LogArgs& args) {
  const v1::TimelineRequest& request = args.request;
  const bool json = args.json, open = args.open;
  const std::string& html = args.html;
  const size_t lines = args.lines;
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::TimelineEvent>> reader =
      client->sessions->Timeline(&context, request);
  std::vector<v1::TimelineEvent> events;
  v1::TimelineEvent event;
  while (reader->Read(&event)) {
    bool activity = event.kind().rfind("activity.", 0) == 0;
    if ((args.unmentioned && !event.unmentioned()) || (args.no_activity && activity)) continue;
    events.push_back(std::move(event));
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return DaemonError(status);
  if (json) {
    // ASCII only: a guest's C1 controls and DEL reach the terminal as \u escapes.
    std::printf("%s\n", TimelineToJson(events)
                            .dump(2, ' ', true, nlohmann::json::error_handler_t::replace)
                            .c_str());
    return 0;
  }
  if (html.empty()) {
    std::fputs(RenderTimelineText(events, lines).c_str(), stdout);
    return 0;
  }
  // The page holds the session's output: readable by its owner only.
  if (absl::Status s =
          WriteFileAtomically(html, RenderTimelineHtml(request.session_id(), events), 0600);
      !s.ok()) {
    std::fprintf(stderr, "airlock log: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::fprintf(stderr, "airlock log: wrote %zu events to %s\n", events.size(), html.c_str());
  if (open && !OpenInBrowser(html)) {
    std::fprintf(stderr, "airlock log: no browser to open here; open %s in one\n", html.c_str());
  }
  return 0;
}

}  // namespace

void AddLogCommand(Cli& cli) {
  auto args = std::make_shared<LogArgs>();
  CLI::App* app = cli.Add(&cli.app(), "log", "everything the session did: its timeline",
                          [args] { return Log(*args); });
  app->footer(kLogFooter);
  AddSessionId(app, [args](const std::string& v) { args->request.set_session_id(v); });
  CLI::Option* json = AddJsonFlag(app, &args->json);
  CLI::Option* html = app->add_option("--html", args->html,
                                      "write one self-contained page (search, filters, "
                                      "collapsible output) to FILE")
                          ->type_name("FILE")
                          ->excludes(json);
  app->add_flag("--open", args->open, "show the --html page in a browser if this machine has one")
      ->needs(html);
  CLI::Option* unmentioned = app->add_flag(
      "--unmentioned", args->unmentioned,
      "only the activity record's events of an agent's command that the agent did not mention");
  app->add_flag("--no-activity", args->no_activity,
                "leave out the activity record (processes and files the guest saw)")
      ->excludes(unmentioned);
  AddCountOption(
      app, "--lines", [args](uint32_t n) { args->lines = n; }, 0, 1u << 30,
      "output lines shown per command in the text form (default 20)");
  AddCountOption(
      app, "--output-bytes", [args](uint32_t n) { args->request.set_output_bytes(n); }, 0, 1u << 20,
      "output kept per command (default 65536, at most 1048576)");
}

}  // namespace airlock
