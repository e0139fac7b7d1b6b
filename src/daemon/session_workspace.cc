#include "src/daemon/session_workspace.h"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/common/hex.h"
#include "src/common/sha256.h"
#include "src/common/workspace_change.h"

namespace airlock {
namespace {

constexpr size_t kMaxErrors = 64 * 1024;
constexpr size_t kMaxGitText = 4 << 20;
// Records of one diff, in all: enough for the content budget the guest keeps to (48 MiB) and
// a listing of very many paths.
constexpr size_t kMaxDiffRecordBytes = 256ull << 20;
constexpr absl::Duration kGitTimeout = absl::Minutes(5);
constexpr char kPromoteRef[] = "refs/airlock/promote";
constexpr char kPromoteIndex[] = "/tmp/.airlock-promote-index";

const std::vector<std::string>& GuestEnv() {
  static const auto* env = new std::vector<std::string>{
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LC_ALL=C",
      "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat"};
  return *env;
}

bool IsHexId(absl::string_view s) {
  if (s.size() != 40 && s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isxdigit(c); });
}

std::string Short(const std::string& commit) { return commit.substr(0, 12); }

class GuestGit {
 public:
  GuestGit(GuestChannel& channel, const std::string& id) : channel_(channel), id_(id) {}

  // Runs git in /workspace; a non-zero exit is returned for the caller to judge.
  absl::StatusOr<GuestRun> Run(std::vector<std::string> args,
                               const std::vector<std::string>& extra_env = {},
                               size_t max_output = kMaxGitText) {
    std::vector<std::string> argv = {"git", "--no-pager", "-C", kGuestWorkspaceDir};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> env = GuestEnv();
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    absl::StatusOr<GuestRun> run = RunInGuest(channel_, argv, env, max_output, kGitTimeout);
    if (run.ok() && run->exit_code == -1) {
      return absl::FailedPreconditionError(
          absl::StrCat("git could not run in session ", id_, " (", run->message,
                       "); use an image that has git (the default image does)"));
    }
    return run;
  }

  // Runs git and returns its output, trimmed; a non-zero exit is an error saying what failed.
  absl::StatusOr<std::string> Output(std::vector<std::string> args, const std::string& what,
                                     const std::vector<std::string>& extra_env = {}) {
    absl::StatusOr<GuestRun> run = Run(std::move(args), extra_env);
    if (!run.ok()) return run.status();
    if (run->exit_code != 0) {
      std::string errors(absl::StripAsciiWhitespace(run->errors.substr(0, 500)));
      return absl::FailedPreconditionError(
          absl::StrCat(what, " in session ", id_, ": git says: ", errors));
    }
    return std::string(absl::StripTrailingAsciiWhitespace(run->output));
  }

 private:
  GuestChannel& channel_;
  std::string id_;
};

v1::WorkspaceChange ToProto(const WorkspaceChange& c) {
  v1::WorkspaceChange out;
  out.set_kind(static_cast<v1::WorkspaceChange::Kind>(static_cast<int>(c.kind)));
  out.set_path(c.path);
  out.set_old_mode(c.old_mode);
  out.set_new_mode(c.new_mode);
  out.set_old_size(c.old_size);
  out.set_new_size(c.new_size);
  out.set_old_target(c.old_target);
  out.set_new_target(c.new_target);
  out.set_binary(c.flags & kChangeBinary);
  out.set_too_large(c.flags & kChangeTooLarge);
  out.set_omitted(c.flags & kChangeOmitted);
  out.set_has_old_content(c.flags & kChangeOldContent);
  out.set_old_content(c.old_content);
  out.set_has_new_content(c.flags & kChangeNewContent);
  out.set_new_content(c.new_content);
  return out;
}

// For a path a sync wrote: whether the session's side is what the sync wrote.
bool MatchesBase(const WorkspaceChange& c, const v1::WorkspaceEntry* base) {
  if (c.kind == ChangeKind::kDeleted) return base == nullptr;
  if (base == nullptr || base->mode() != c.new_mode) return false;
  if ((c.new_mode & S_IFMT) == S_IFLNK) return base->target() == c.new_target;
  return base->size() == c.new_size &&
         base->sha256() == HexString(reinterpret_cast<const unsigned char*>(c.new_sha256.data()),
                                     c.new_sha256.size());
}

}  // namespace

absl::StatusOr<GuestRun> RunInGuest(GuestChannel& channel, const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env, size_t max_output,
                                    absl::Duration timeout,
                                    const std::function<absl::Status(std::string_view)>& sink) {
  ExecRequest request;
  request.argv = argv;
  request.env = env;
  request.cwd = "/";
  request.user = "0";
  absl::StatusOr<std::unique_ptr<ExecStream>> exec = channel.StartExec(request);
  if (!exec.ok()) return exec.status();
  absl::Time deadline = absl::Now() + timeout;
  GuestRun run;
  for (;;) {
    absl::StatusOr<ExecEvent> event = (*exec)->Next(deadline);
    if (!event.ok()) {
      (*exec)->Signal(SIGKILL).IgnoreError();  // a failed channel ends it anyway
      if (absl::IsDeadlineExceeded(event.status())) {
        return absl::DeadlineExceededError(
            absl::StrCat(argv[0], " did not finish within ", absl::FormatDuration(timeout)));
      }
      return event.status();
    }
    switch (event->type) {
      case ExecEvent::Type::kStdout:
        if (sink) {
          if (absl::Status s = sink(event->data); !s.ok()) {
            (*exec)->Signal(SIGKILL).IgnoreError();  // a failed channel ends it anyway
            return s;
          }
        } else if (run.output.size() + event->data.size() > max_output) {
          (*exec)->Signal(SIGKILL).IgnoreError();  // a failed channel ends it anyway
          return absl::ResourceExhaustedError(
              absl::StrCat(argv[0], " in the guest wrote more than ", max_output, " bytes"));
        } else {
          run.output += event->data;
        }
        break;
      case ExecEvent::Type::kStderr:
        if (run.errors.size() < kMaxErrors) {
          run.errors += event->data.substr(0, kMaxErrors - run.errors.size());
        }
        break;
      case ExecEvent::Type::kExit:
        switch (event->exit_kind) {
          case ExitKind::kExited:
            run.exit_code = event->code;
            break;
          case ExitKind::kSignaled:
            run.exit_code = 128 + event->code;
            break;
          default:
            run.exit_code = -1;
            run.message = event->message;
        }
        return run;
    }
  }
}

absl::Status ListWorkspaceChanges(GuestChannel& channel, const v1::WorkspaceInfo& base,
                                  const std::function<absl::Status(v1::WorkspaceChange)>& emit) {
  std::set<std::string> synced(base.synced().begin(), base.synced().end());
  std::map<std::string, const v1::WorkspaceEntry*> entries;
  if (!synced.empty()) {
    for (const v1::WorkspaceEntry& e : base.entries()) entries[e.path()] = &e;
  }
  WorkspaceChangeParser parser;
  size_t total = 0;
  std::vector<WorkspaceChange> changes;
  auto sink = [&](std::string_view bytes) -> absl::Status {
    total += bytes.size();
    if (total > kMaxDiffRecordBytes) {
      return absl::ResourceExhaustedError("the session's list of changes is over 256 MiB");
    }
    std::string error;
    if (!parser.Feed(bytes, &changes, &error)) {
      return absl::DataLossError(absl::StrCat("the guest sent a bad list of changes: ", error));
    }
    for (WorkspaceChange& c : changes) {
      if (synced.count(c.path)) {
        auto it = entries.find(c.path);
        const v1::WorkspaceEntry* now = it == entries.end() ? nullptr : it->second;
        if (MatchesBase(c, now)) continue;
        // The base of this path is what the sync wrote; the guest compared with the original.
        c.flags &= ~kChangeOldContent;
        c.old_content.clear();
        c.old_mode = now != nullptr ? now->mode() : 0;
        c.old_size = now != nullptr ? now->size() : 0;
        c.old_target = now != nullptr ? now->target() : "";
        c.kind = now == nullptr                   ? ChangeKind::kAdded
                 : c.kind == ChangeKind::kDeleted ? ChangeKind::kDeleted
                                                  : ChangeKind::kModified;
      }
      if (absl::Status s = emit(ToProto(c)); !s.ok()) return s;
    }
    changes.clear();
    return absl::OkStatus();
  };
  absl::StatusOr<GuestRun> run = RunInGuest(channel, {kGuestAgentPath, kWorkspaceDiffCommand},
                                            GuestEnv(), 0, absl::Minutes(10), sink);
  if (!run.ok()) return run.status();
  if (run->exit_code != 0 || !parser.AtRecordBoundary()) {
    std::string why(absl::StripAsciiWhitespace(run->errors.substr(0, 500)));
    if (run->exit_code == 3) return absl::FailedPreconditionError(why);
    return absl::InternalError(
        absl::StrCat("listing the workspace's changes failed", why.empty() ? "" : ": ", why));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::WorkspaceBundleInfo> PrepareBundle(GuestChannel& channel,
                                                      const SessionRecord& session,
                                                      bool include_uncommitted, bool dry_run) {
  if (!session.workspace.present()) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", session.id, " has no workspace; create one with --workspace DIR"));
  }
  const std::string& base = session.workspace.head;
  if (base.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the workspace of session ", session.id, " (", session.workspace.path,
        ") was not a git repository with a commit when the session was created, so there is no "
        "branch to promote to; see its changes with `airlock diff ",
        session.id, "` and copy files out with `airlock file read`"));
  }
  GuestGit git(channel, session.id);
  v1::WorkspaceBundleInfo info;
  info.set_base_commit(base);
  absl::StatusOr<std::string> head =
      git.Output({"rev-parse", "--verify", "-q", "HEAD^{commit}"}, "finding HEAD");
  if (!head.ok()) return head.status();
  if (!IsHexId(*head)) {
    return absl::DataLossError("the guest's git named HEAD with something that is not a commit id");
  }
  absl::StatusOr<GuestRun> branch = git.Run({"symbolic-ref", "--short", "-q", "HEAD"});
  if (!branch.ok()) return branch.status();
  std::string branch_name(absl::StripTrailingAsciiWhitespace(branch->output));
  info.set_branch(branch->exit_code == 0 && !branch_name.empty() ? branch_name : "HEAD");

  // The work not committed yet, as a tree, through an index of its own so that the session's
  // index and branch stay as they are.
  // It starts as a copy of the session's index, whose file stats spare `add -A` hashing every
  // file again (a fresh index from HEAD has none); without one, from HEAD.
  std::vector<std::string> index_env = {absl::StrCat("GIT_INDEX_FILE=", kPromoteIndex)};
  std::string tip = *head;
  absl::StatusOr<std::string> index =
      git.Output({"rev-parse", "--git-path", "index"}, "finding the session's index");
  if (!index.ok()) return index.status();
  std::string index_path =
      absl::StartsWith(*index, "/") ? *index : absl::StrCat(kGuestWorkspaceDir, "/", *index);
  absl::StatusOr<GuestRun> copied = RunInGuest(channel, {"cp", "--", index_path, kPromoteIndex},
                                               GuestEnv(), 1 << 16, kGitTimeout);
  if (!copied.ok()) return copied.status();
  std::vector<std::vector<std::string>> steps = {{"add", "-A"}};
  if (copied->exit_code != 0) steps.insert(steps.begin(), {"read-tree", "HEAD"});
  for (const std::vector<std::string>& step : steps) {
    absl::StatusOr<std::string> done = git.Output(step, "collecting uncommitted work", index_env);
    if (!done.ok()) return done.status();
  }
  absl::StatusOr<std::string> tree =
      git.Output({"write-tree"}, "collecting uncommitted work", index_env);
  if (!tree.ok()) return tree.status();
  absl::StatusOr<std::string> head_tree =
      git.Output({"rev-parse", "HEAD^{tree}"}, "reading HEAD's tree");
  if (!head_tree.ok()) return head_tree.status();
  if (!IsHexId(*tree) || !IsHexId(*head_tree)) {
    return absl::DataLossError("the guest's git named a tree with something that is not an id");
  }
  if (*tree != *head_tree) {
    absl::StatusOr<std::string> stat =
        git.Output({"diff", "--stat", "--no-color", *head, *tree}, "describing uncommitted work");
    if (!stat.ok()) return stat.status();
    info.set_uncommitted_stat(*stat);
    if (dry_run && !include_uncommitted) {
      absl::StatusOr<std::string> diff =
          git.Output({"diff", "--no-color", "--no-ext-diff", "--no-textconv", *head, *tree},
                     "describing uncommitted work");
      if (!diff.ok()) return diff.status();
      info.set_uncommitted_diff(*diff);
    }
    if (include_uncommitted) {
      // A commit on top of HEAD that no branch points to; the guest's identity when it has one.
      absl::StatusOr<GuestRun> email = git.Run({"config", "user.email"});
      if (!email.ok()) return email.status();
      std::vector<std::string> identity;
      if (email->exit_code != 0) {
        identity = {"GIT_AUTHOR_NAME=Airlock session " + session.id,
                    "GIT_AUTHOR_EMAIL=airlock@localhost",
                    "GIT_COMMITTER_NAME=Airlock session " + session.id,
                    "GIT_COMMITTER_EMAIL=airlock@localhost"};
      }
      absl::StatusOr<std::string> commit =
          git.Output({"commit-tree", *tree, "-p", *head, "-m",
                      absl::StrCat("Uncommitted work of Airlock session ", session.id)},
                     "committing uncommitted work", identity);
      if (!commit.ok()) return commit.status();
      if (!IsHexId(*commit)) return absl::DataLossError("the guest's git made no commit id");
      tip = *commit;
    }
  }
  info.set_head_commit(tip);
  absl::StatusOr<std::string> count =
      git.Output({"rev-list", "--count", absl::StrCat(base, "..", tip)}, "counting commits");
  if (!count.ok()) return count.status();
  uint32_t commits = 0;
  if (!absl::SimpleAtoi(*count, &commits)) {
    return absl::DataLossError("the guest's git did not count commits");
  }
  info.set_commits(commits);
  if (commits > 0) {
    absl::StatusOr<std::string> log =
        git.Output({"log", "--stat", "--no-color",
                    "--format=commit %H%nAuthor: %an <%ae>%nDate:   %ad%n%n%w(0,4,4)%B",
                    absl::StrCat(base, "..", tip)},
                   "listing commits");
    if (!log.ok()) return log.status();
    info.set_log(*log);
  }
  if (dry_run) return info;
  if (commits == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "nothing to promote: session ", session.id, " has no commits since its base ", Short(base),
        info.uncommitted_stat().empty()
            ? " (commit in /workspace first)"
            : " (its changes are not committed: commit them in /workspace, or add "
              "--include-uncommitted)"));
  }
  info.set_ref(kPromoteRef);
  absl::StatusOr<std::string> updated =
      git.Output({"update-ref", kPromoteRef, tip}, "marking the commits to bundle");
  if (!updated.ok()) return updated.status();
  return info;
}

absl::StatusOr<std::string> StreamBundle(GuestChannel& channel, const SessionRecord& session,
                                         const v1::WorkspaceBundleInfo& info,
                                         const std::function<absl::Status(std::string_view)>& sink,
                                         uint64_t max_bytes) {
  Sha256 sha;
  uint64_t total = 0;
  auto counted = [&](std::string_view bytes) -> absl::Status {
    total += bytes.size();
    if (total > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("the bundle of session ", session.id,
                                                       " is over ", max_bytes,
                                                       " bytes; promote fewer or smaller commits"));
    }
    sha.Update(absl::string_view(bytes.data(), bytes.size()));
    return sink(bytes);
  };
  std::vector<std::string> argv = {
      "git",    "--no-pager", "-C", kGuestWorkspaceDir, "bundle",
      "create", "--quiet",    "-",  info.ref(),         absl::StrCat("^", info.base_commit())};
  absl::StatusOr<GuestRun> run = RunInGuest(channel, argv, GuestEnv(), 0, kGitTimeout, counted);
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("git bundle create failed in session ", session.id, ": ",
                     absl::StripAsciiWhitespace(run->errors.substr(0, 500)), run->message));
  }
  return absl::StrCat("sha256:", sha.FinishHex());
}

absl::Status ApplySyncWrites(GuestChannel& channel, const std::vector<SyncWrite>& writes) {
  // Whatever is at each path goes first (a directory where the host now has a file, say), in
  // batches; then files and symlinks are made.
  constexpr size_t kBatch = 512;
  for (size_t at = 0; at < writes.size(); at += kBatch) {
    std::vector<std::string> argv = {"rm", "-rf", "--"};
    for (size_t i = at; i < std::min(writes.size(), at + kBatch); ++i) {
      argv.push_back(absl::StrCat(kGuestWorkspaceDir, "/", writes[i].entry.path()));
    }
    absl::StatusOr<GuestRun> run = RunInGuest(channel, argv, GuestEnv(), 1 << 16, kGitTimeout);
    if (!run.ok()) return run.status();
    if (run->exit_code != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("removing the old versions in the session failed: ", run->message,
                       absl::StripAsciiWhitespace(run->errors.substr(0, 300))));
    }
  }
  absl::Time deadline = absl::Now() + absl::Minutes(10);
  for (const SyncWrite& w : writes) {
    if (w.removed) continue;
    std::string path = absl::StrCat(kGuestWorkspaceDir, "/", w.entry.path());
    if ((w.entry.mode() & S_IFMT) == S_IFLNK) {
      absl::StatusOr<GuestRun> run = RunInGuest(channel, {"ln", "-s", "--", w.entry.target(), path},
                                                GuestEnv(), 1 << 16, kGitTimeout);
      if (!run.ok()) return run.status();
      if (run->exit_code != 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "making the symlink ", w.entry.path(),
            " in the session failed: ", absl::StripAsciiWhitespace(run->errors.substr(0, 300))));
      }
      continue;
    }
    if (absl::Status s = channel.WriteFile(path, w.entry.mode() & 07777, w.content, deadline);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace airlock
