// `airlock diff`, `airlock promote` and `airlock sync`: a session's workspace (see
// workspace_client.h).
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "src/cli/cli_commands.h"
#include "src/cli/cli_flags.h"
#include "src/cli/daemon_client.h"
#include "src/cli/workspace_client.h"
#include "src/workspace/workspace_capture.h"

namespace airlock {
namespace {

constexpr char kDiffUsage[] =
    "usage: airlock diff [--stat] ID\n"
    "Shows what session ID changed in /workspace against the project it was created with\n"
    "(--workspace), as a unified diff; binary and large files are summarized, the .git\n"
    "directory left out. --stat: one line per file with its counts.\n";

constexpr char kPromoteUsage[] =
    "usage: airlock promote ID [--branch NAME] [--include-uncommitted] [--dry-run]\n"
    "Brings the commits session ID made in /workspace since its base into the project as the\n"
    "branch airlock/ID/NAME (NAME: the session's branch unless --branch), verified by git and\n"
    "fetched without running hooks. The project's working tree, index and current branch are\n"
    "never touched, and an existing branch is never overwritten.\n"
    "  --include-uncommitted  commit the session's uncommitted work on top (in the bundle only)\n"
    "  --dry-run              show the commits and the uncommitted work; change nothing\n";

constexpr char kSyncUsage[] =
    "usage: airlock sync ID [--dry-run] [--workspace-max SIZE]\n"
    "Copies what changed in the project on this host since session ID's base (files git\n"
    "tracks or does not ignore, and what .airlockignore does not leave out) into the\n"
    "session, for paths the session has not changed itself; the others are listed as\n"
    "conflicts and left as the session has them. The session's base advances.\n";

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "airlock: %s\n", std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int DiffCommand(const std::vector<std::string>& args) {
  bool stat = false;
  std::string id;
  for (const std::string& a : args) {
    if (a == "--stat") {
      stat = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kDiffUsage, stdout);
      return 0;
    } else if (!a.empty() && a[0] != '-' && id.empty()) {
      id = a;
    } else {
      return Usage(kDiffUsage, "unexpected argument " + a);
    }
  }
  if (id.empty()) return Usage(kDiffUsage, "name the session");
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  absl::StatusOr<std::vector<v1::WorkspaceChange>> changes = FetchWorkspaceChanges(*client, id);
  if (!changes.ok()) return Fail(changes.status());
  std::string out = RenderWorkspaceDiff(*changes, stat, isatty(STDOUT_FILENO));
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int PromoteCommand(const std::vector<std::string>& args) {
  PromoteOptions options;
  std::string id;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--branch" && i + 1 < args.size()) {
      options.branch = args[++i];
      if (options.branch.empty()) return Usage(kPromoteUsage, "--branch needs a name");
    } else if (a == "--include-uncommitted") {
      options.include_uncommitted = true;
    } else if (a == "--dry-run" || a == "-n") {
      options.dry_run = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kPromoteUsage, stdout);
      return 0;
    } else if (!a.empty() && a[0] != '-' && id.empty()) {
      id = a;
    } else {
      return Usage(kPromoteUsage, "unexpected argument " + a);
    }
  }
  if (id.empty()) return Usage(kPromoteUsage, "name the session");
  options.sanitize = isatty(STDOUT_FILENO);
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  absl::StatusOr<std::string> report = PromoteWorkspace(*client, id, options);
  if (!report.ok()) return Fail(report.status());
  std::fwrite(report->data(), 1, report->size(), stdout);
  return 0;
}

int SyncCommand(const std::vector<std::string>& args) {
  bool dry_run = false;
  uint64_t max_bytes = kDefaultWorkspaceMaxBytes;
  std::string id;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--dry-run" || a == "-n") {
      dry_run = true;
    } else if (a == "--workspace-max" && i + 1 < args.size()) {
      absl::StatusOr<uint64_t> size = ParseSize(args[++i]);
      if (!size.ok()) return Usage(kSyncUsage, std::string(size.status().message()));
      max_bytes = *size;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kSyncUsage, stdout);
      return 0;
    } else if (!a.empty() && a[0] != '-' && id.empty()) {
      id = a;
    } else {
      return Usage(kSyncUsage, "unexpected argument " + a);
    }
  }
  if (id.empty()) return Usage(kSyncUsage, "name the session");
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  absl::StatusOr<std::string> report = SyncWorkspace(*client, id, dry_run, max_bytes);
  if (!report.ok()) return Fail(report.status());
  std::fwrite(report->data(), 1, report->size(), stdout);
  return 0;
}

}  // namespace airlock
