// `airlock diff`, `airlock promote` and `airlock sync`: a session's workspace (see
// workspace_client.h).
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/cli/cli_commands.h"
#include "src/cli/cli_flags.h"
#include "src/cli/daemon_client.h"
#include "src/cli/workspace_client.h"
#include "src/workspace/workspace_capture.h"

namespace airlock {
namespace {

constexpr char kDiffFooter[] =
    "Shows what session ID changed in /workspace against the project it was created with\n"
    "(--workspace), as a unified diff; binary and large files are summarized, the .git\n"
    "directory left out.";

constexpr char kPromoteFooter[] =
    "Brings the commits session ID made in /workspace since its base into the project as the\n"
    "branch airlock/ID/NAME (NAME: the session's branch unless --branch), verified by git and\n"
    "fetched without running hooks. The project's working tree, index and current branch are\n"
    "never touched, and an existing branch is never overwritten.";

constexpr char kSyncFooter[] =
    "Copies what changed in the project on this host since session ID's base (files git\n"
    "tracks or does not ignore, and what .airlockignore does not leave out) into the\n"
    "session, for paths the session has not changed itself; the others are listed as\n"
    "conflicts and left as the session has them. The session's base advances.";

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "airlock: %s\n", std::string(status.message()).c_str());
  return 1;
}

int Diff(const std::string& id, bool stat, bool json) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  absl::StatusOr<std::vector<v1::WorkspaceChange>> changes = FetchWorkspaceChanges(*client, id);
  if (!changes.ok()) return Fail(changes.status());
  if (json) {
    // Paths and link targets are bytes: shown as UTF-8 with invalid bytes replaced.
    nlohmann::json out = nlohmann::json::array();
    for (const v1::WorkspaceChange& c : *changes) {
      const char* kind = c.kind() == v1::WorkspaceChange::KIND_ADDED     ? "added"
                         : c.kind() == v1::WorkspaceChange::KIND_DELETED ? "deleted"
                                                                         : "modified";
      nlohmann::json item = {{"path", c.path()},         {"kind", kind},
                             {"old_mode", c.old_mode()}, {"new_mode", c.new_mode()},
                             {"old_size", c.old_size()}, {"new_size", c.new_size()},
                             {"binary", c.binary()},     {"too_large", c.too_large()}};
      if (!c.old_target().empty()) item["old_target"] = c.old_target();
      if (!c.new_target().empty()) item["new_target"] = c.new_target();
      out.push_back(item);
    }
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::string out = RenderWorkspaceDiff(*changes, stat, isatty(STDOUT_FILENO));
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int Promote(const std::string& id, PromoteOptions options) {
  options.sanitize = isatty(STDOUT_FILENO);
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  absl::StatusOr<std::string> report = PromoteWorkspace(*client, id, options);
  if (!report.ok()) return Fail(report.status());
  std::fwrite(report->data(), 1, report->size(), stdout);
  return 0;
}

int Sync(const std::string& id, bool dry_run, uint64_t max_bytes) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  absl::StatusOr<std::string> report = SyncWorkspace(*client, id, dry_run, max_bytes);
  if (!report.ok()) return Fail(report.status());
  std::fwrite(report->data(), 1, report->size(), stdout);
  return 0;
}

}  // namespace

void AddWorkspaceCommands(Cli& cli) {
  CLI::App* root = &cli.app();
  struct DiffArgs {
    std::string id;
    bool stat = false, json = false;
  };
  auto diff = std::make_shared<DiffArgs>();
  CLI::App* d = cli.Add(root, "diff", "what the session changed in /workspace",
                        [diff] { return Diff(diff->id, diff->stat, diff->json); });
  d->footer(kDiffFooter);
  AddSessionId(d, &diff->id);
  CLI::Option* stat = d->add_flag("--stat", diff->stat, "one line per file with its counts");
  AddJsonFlag(d, &diff->json)->excludes(stat);

  struct PromoteArgs {
    std::string id;
    PromoteOptions options;
  };
  auto promote = std::make_shared<PromoteArgs>();
  CLI::App* p = cli.Add(root, "promote", "the session's commits -> branch airlock/ID/NAME",
                        [promote] { return Promote(promote->id, promote->options); });
  p->footer(kPromoteFooter);
  AddSessionId(p, &promote->id);
  p->add_option("--branch", promote->options.branch, "the branch's NAME")
      ->type_name("NAME")
      ->check([](const std::string& v) {
        return v.empty() ? std::string("--branch needs a name") : std::string();
      });
  p->add_flag("--include-uncommitted", promote->options.include_uncommitted,
              "commit the session's uncommitted work on top (in the bundle only)");
  p->add_flag("-n,--dry-run", promote->options.dry_run,
              "show the commits and the uncommitted work; change nothing");

  struct SyncArgs {
    std::string id;
    bool dry_run = false;
    uint64_t max_bytes = kDefaultWorkspaceMaxBytes;
  };
  auto sync = std::make_shared<SyncArgs>();
  CLI::App* sy = cli.Add(root, "sync", "host changes since the session's base -> the session",
                         [sync] { return Sync(sync->id, sync->dry_run, sync->max_bytes); });
  sy->footer(kSyncFooter);
  AddSessionId(sy, &sync->id);
  sy->add_flag("-n,--dry-run", sync->dry_run, "show what would be copied; change nothing");
  AddSizeOption(sy, "--workspace-max", &sync->max_bytes,
                "refuse a project with more file content than this (default 2g)");
}

}  // namespace airlock
