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

constexpr char kLogUsage[] =
    "usage: airlock log ID [--json | --html FILE [--open]] [--lines N] [--output-bytes N]\n"
    "Everything session ID did, oldest first: created, paused, resumed, forked, removed or\n"
    "failed; each command (who ran it, as whom, where, how long, its exit and output); files\n"
    "written and read through the API; egress allowed and denied and secrets sent; workspace\n"
    "sync and promote; and what coding agents in it said and did. Kept after the session is\n"
    "removed. (`airlock logs ID` is the raw output of its commands.)\n"
    "  --json            one JSON array of events, for programs\n"
    "  --html FILE       one self-contained page (search, filters, collapsible output; it\n"
    "                    loads nothing and runs nothing but its own script); --open shows it\n"
    "                    in a browser if this machine has one\n"
    "  --lines N         output lines shown per command in the text form (default 20)\n"
    "  --output-bytes N  output kept per command (default 65536, at most 1048576)\n";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "airlock log: %s\n%s", problem.c_str(), kLogUsage);
  return 2;
}

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

}  // namespace

int LogCommand(const std::vector<std::string>& args) {
  v1::TimelineRequest request;
  bool json = false, open = false;
  std::string html;
  size_t lines = 20;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has_value = i + 1 < args.size();
    if (a == "--json") {
      json = true;
    } else if (a == "--html" && has_value) {
      html = args[++i];
    } else if (a == "--open") {
      open = true;
    } else if (a == "--lines" && has_value) {
      if (!absl::SimpleAtoi(args[++i], &lines)) return Usage("--lines needs a number");
    } else if (a == "--output-bytes" && has_value) {
      uint32_t n;
      if (!absl::SimpleAtoi(args[++i], &n) || n > (1u << 20)) {
        return Usage("--output-bytes needs a number of bytes up to 1048576");
      }
      request.set_output_bytes(n);
    } else if (a == "--help" || a == "-h") {
      std::fputs(kLogUsage, stdout);
      return 0;
    } else if (a[0] != '-' && request.session_id().empty()) {
      request.set_session_id(a);
    } else {
      return Usage("unexpected argument " + a);
    }
  }
  if (request.session_id().empty()) return Usage("which session? give its ID");
  if (json && !html.empty()) return Usage("choose one of --json and --html");
  if (open && html.empty()) return Usage("--open goes with --html FILE");
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::TimelineEvent>> reader =
      client->sessions->Timeline(&context, request);
  std::vector<v1::TimelineEvent> events;
  v1::TimelineEvent event;
  while (reader->Read(&event)) events.push_back(std::move(event));
  grpc::Status status = reader->Finish();
  if (!status.ok()) return DaemonError(status);
  if (json) {
    std::printf("%s\n", TimelineToJson(events)
                            .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
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

}  // namespace airlock
