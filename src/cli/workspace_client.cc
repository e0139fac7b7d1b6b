#include "src/cli/workspace_client.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/cli/host_tools.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/unique_fd.h"
#include "src/common/utf8.h"
#include "src/workspace/host_git.h"
#include "src/workspace/unified_diff.h"
#include "src/workspace/workspace_capture.h"

namespace airlock {
namespace {

constexpr size_t kUploadChunk = 1 << 20;
constexpr size_t kEntryBatchBytes = 2 << 20;

std::string TempDirectory() {
  const char* tmp = getenv("TMPDIR");
  return tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp";
}

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), Describe(status));
}

void ToProto(const BaseEntry& e, v1::WorkspaceEntry* out) {
  out->set_path(e.path);
  out->set_mode(e.mode);
  out->set_size(e.size);
  out->set_sha256(e.sha256);
  out->set_target(e.target);
}

// Sends a manifest's entries in messages under the gRPC size cap.
template <typename Chunk, typename Writer>
bool WriteEntries(const std::vector<BaseEntry>& entries, Writer* writer,
                  google::protobuf::RepeatedPtrField<v1::WorkspaceEntry>* (Chunk::*field)()) {
  Chunk chunk;
  size_t bytes = 0;
  for (const BaseEntry& e : entries) {
    ToProto(e, (chunk.*field)()->Add());
    bytes += e.path.size() + e.target.size() + 100;
    if (bytes >= kEntryBatchBytes) {
      if (!writer->Write(chunk)) return false;
      chunk.Clear();
      bytes = 0;
    }
  }
  return bytes == 0 || writer->Write(chunk);
}

std::string ModeText(uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%06o", mode);
  return buf;
}

bool IsLink(uint32_t mode) { return (mode & S_IFMT) == S_IFLNK; }

// The text git diffs for a side: a symlink's target, or the file's content.
bool SideText(const v1::WorkspaceChange& c, bool old_side, std::string* text) {
  uint32_t mode = old_side ? c.old_mode() : c.new_mode();
  if (mode == 0) {
    text->clear();
    return true;
  }
  if (IsLink(mode)) {
    *text = old_side ? c.old_target() : c.new_target();
    return true;
  }
  if (old_side ? !c.has_old_content() : !c.has_new_content()) return false;
  *text = old_side ? c.old_content() : c.new_content();
  return true;
}

std::string Sanitized(const std::string& text, bool sanitize) {
  return sanitize ? EscapeForTerminal(text, /*keep_newlines=*/true) : text;
}

std::string WhyNoText(const v1::WorkspaceChange& c) {
  if (c.binary()) return "binary";
  if (c.too_large()) return "over 1 MiB";
  if (c.omitted()) return "not shown: the diff's content budget ran out";
  return "content not available";
}

}  // namespace

absl::StatusOr<std::string> UploadWorkspace(DaemonClient& client, const std::string& dir,
                                            uint64_t max_bytes) {
  std::string tmp = TempDirectory();
  UniqueFd image(open(tmp.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!image.valid()) return ErrnoStatus("create a file in", tmp);
  absl::StatusOr<CapturedWorkspace> captured =
      CaptureWorkspaceWithTools(dir, image.get(), max_bytes);
  if (!captured.ok()) return captured.status();
  grpc::ClientContext context;
  v1::WorkspaceUploadReply reply;
  std::unique_ptr<grpc::ClientWriter<v1::WorkspaceUploadChunk>> writer =
      client.workspaces->Upload(&context, &reply);
  v1::WorkspaceUploadChunk first;
  v1::WorkspaceBase* base = first.mutable_base();
  base->set_path(captured->root);
  base->set_head(captured->head);
  base->set_branch(captured->branch);
  base->set_tree_digest(captured->tree.digest);
  base->set_files(captured->tree.entries.size());
  base->set_bytes(captured->tree.data_bytes);
  first.set_image_bytes(captured->image_bytes);
  bool ok = writer->Write(first);
  // The image's data regions only: most of a fresh ext4 is holes.
  std::string buf(kUploadChunk, '\0');
  off_t at = 0, end = static_cast<off_t>(captured->image_bytes);
  while (ok && at < end) {
    off_t data = lseek(image.get(), at, SEEK_DATA);
    if (data < 0) break;  // the rest is a hole
    off_t hole = lseek(image.get(), data, SEEK_HOLE);
    if (hole < 0) return ErrnoStatus("seek in the workspace image");
    for (off_t pos = data; ok && pos < hole;) {
      ssize_t n = pread(image.get(), buf.data(),
                        static_cast<size_t>(std::min<off_t>(hole - pos, kUploadChunk)), pos);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return ErrnoStatus("read the workspace image");
      v1::WorkspaceUploadChunk chunk;
      chunk.set_offset(static_cast<uint64_t>(pos));
      chunk.set_data(buf.data(), static_cast<size_t>(n));
      ok = writer->Write(chunk);
      pos += n;
    }
    at = hole;
  }
  if (ok) {
    ok = WriteEntries<v1::WorkspaceUploadChunk>(captured->tree.entries, writer.get(),
                                                &v1::WorkspaceUploadChunk::mutable_entries);
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpc(status);
  return reply.token();
}

absl::StatusOr<std::vector<v1::WorkspaceChange>> FetchWorkspaceChanges(DaemonClient& client,
                                                                       const std::string& id) {
  grpc::ClientContext context;
  v1::WorkspaceDiffRequest request;
  request.set_session_id(id);
  std::unique_ptr<grpc::ClientReader<v1::WorkspaceChange>> reader =
      client.workspaces->Diff(&context, request);
  std::vector<v1::WorkspaceChange> changes;
  v1::WorkspaceChange change;
  while (reader->Read(&change)) changes.push_back(std::move(change));
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpc(status);
  return changes;
}

std::string RenderWorkspaceDiff(const std::vector<v1::WorkspaceChange>& changes, bool stat,
                                bool sanitize) {
  std::string out;
  if (stat) {
    struct Row {
      std::string path;
      DiffStat counts;
      std::string note;
    };
    std::vector<Row> rows;
    size_t width = 0;
    uint64_t most = 0, added = 0, removed = 0;
    for (const v1::WorkspaceChange& c : changes) {
      Row row{Sanitized(c.path(), sanitize), {}, ""};
      std::string a, b;
      if (SideText(c, true, &a) && SideText(c, false, &b)) {
        row.counts = CountChangedLines(a, b);
      } else {
        row.note = absl::StrCat("Bin ", c.old_size(), " -> ", c.new_size(), " bytes");
      }
      width = std::max(width, row.path.size());
      most = std::max(most, row.counts.added + row.counts.removed);
      added += row.counts.added;
      removed += row.counts.removed;
      rows.push_back(std::move(row));
    }
    width = std::min<size_t>(width, 60);
    for (const Row& r : rows) {
      std::string path =
          r.path.size() > width ? "..." + r.path.substr(r.path.size() - width + 3) : r.path;
      absl::StrAppend(&out, " ", path, std::string(width - path.size(), ' '), " | ");
      if (!r.note.empty()) {
        absl::StrAppend(&out, r.note, "\n");
        continue;
      }
      uint64_t total = r.counts.added + r.counts.removed;
      uint64_t plus = r.counts.added, minus = r.counts.removed;
      if (most > 50) {  // scale the bars like git, keeping at least one mark of each kind
        plus = plus == 0 ? 0 : std::max<uint64_t>(1, plus * 50 / most);
        minus = minus == 0 ? 0 : std::max<uint64_t>(1, minus * 50 / most);
      }
      absl::StrAppend(&out, total, " ", std::string(plus, '+'), std::string(minus, '-'), "\n");
    }
    absl::StrAppend(&out, " ", changes.size(), changes.size() == 1 ? " file" : " files",
                    " changed, ", added, added == 1 ? " insertion(+), " : " insertions(+), ",
                    removed, removed == 1 ? " deletion(-)\n" : " deletions(-)\n");
    return out;
  }
  for (const v1::WorkspaceChange& c : changes) {
    std::string path = Sanitized(c.path(), sanitize);
    absl::StrAppend(&out, "diff --git a/", path, " b/", path, "\n");
    bool type_changed = c.old_mode() != 0 && c.new_mode() != 0 &&
                        (c.old_mode() & S_IFMT) != (c.new_mode() & S_IFMT);
    if (c.old_mode() == 0) {
      absl::StrAppend(&out, "new file mode ", ModeText(c.new_mode()), "\n");
    } else if (c.new_mode() == 0) {
      absl::StrAppend(&out, "deleted file mode ", ModeText(c.old_mode()), "\n");
    } else if (c.old_mode() != c.new_mode()) {
      absl::StrAppend(&out, "old mode ", ModeText(c.old_mode()), "\nnew mode ",
                      ModeText(c.new_mode()), "\n");
    }
    (void)type_changed;
    std::string a, b;
    if (!SideText(c, true, &a) || !SideText(c, false, &b)) {
      absl::StrAppend(&out, c.binary() ? "Binary files " : "Files ",
                      c.old_mode() == 0 ? "/dev/null" : "a/" + path, " and ",
                      c.new_mode() == 0 ? "/dev/null" : "b/" + path, " differ (", WhyNoText(c),
                      "; ", c.old_size(), " -> ", c.new_size(), " bytes)\n");
      continue;
    }
    std::string hunks = UnifiedDiff(a, b);
    if (hunks.empty()) continue;  // a mode change alone
    absl::StrAppend(&out, "--- ", c.old_mode() == 0 ? "/dev/null" : "a/" + path, "\n", "+++ ",
                    c.new_mode() == 0 ? "/dev/null" : "b/" + path, "\n",
                    Sanitized(hunks, sanitize));
  }
  return out;
}

absl::StatusOr<std::string> PromoteWorkspace(DaemonClient& client, const std::string& id,
                                             const PromoteOptions& options) {
  grpc::ClientContext get_context;
  v1::GetSessionRequest get;
  get.set_id(id);
  v1::Session session;
  if (grpc::Status s = client.sessions->Get(&get_context, get, &session); !s.ok()) {
    return FromGrpc(s);
  }
  if (!session.has_workspace()) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", id,
                     " has no workspace; promote brings back the work of a session created "
                     "with --workspace DIR"));
  }
  const std::string project = session.workspace().path();
  if (options.check_project != nullptr) {
    if (absl::Status s = options.check_project(project); !s.ok()) return s;
  }
  if (!options.dry_run && !IsGitRepository(project)) {
    return absl::FailedPreconditionError(
        absl::StrCat(project,
                     " is not a git repository (any more); see the session's changes with "
                     "`airlock diff ",
                     id, "` and copy files out with `airlock file read`"));
  }
  grpc::ClientContext context;
  v1::WorkspaceBundleRequest request;
  request.set_session_id(id);
  request.set_include_uncommitted(options.include_uncommitted);
  request.set_dry_run(options.dry_run);
  request.set_branch(options.branch);
  std::unique_ptr<grpc::ClientReader<v1::WorkspaceBundleChunk>> reader =
      client.workspaces->Bundle(&context, request);
  v1::WorkspaceBundleChunk chunk;
  if (!reader->Read(&chunk) || !chunk.has_info()) {
    grpc::Status status = reader->Finish();
    if (!status.ok()) return FromGrpc(status);
    return absl::DataLossError("airlockd answered without describing the bundle");
  }
  const v1::WorkspaceBundleInfo info = chunk.info();
  std::string name =
      options.branch.empty()
          ? (info.branch() == "HEAD" || info.branch().empty() ? "detached" : info.branch())
          : options.branch;
  std::string branch = absl::StrCat("airlock/", id, "/", name);
  // The guest named its branch; git decides whether that is a branch name at all.
  absl::StatusOr<ProcessResult> format =
      RunHostGit(project, {"check-ref-format", absl::StrCat("refs/heads/", branch)});
  if (!format.ok()) return format.status();
  if (format->exit_code != 0) {
    context.TryCancel();
    return absl::InvalidArgumentError(absl::StrCat("\"", EscapeForTerminal(name),
                                                   "\" cannot be part of a branch name (",
                                                   EscapeForTerminal(branch),
                                                   " is not a valid ref); choose one with --branch "
                                                   "NAME (letters, digits, '-', '_', '/', '.')"));
  }
  auto summary = [&] {
    return absl::StrCat(info.commits(), " commit(s) of session ", id, " since ",
                        info.base_commit().substr(0, 12));
  };
  if (options.dry_run) {
    reader->Finish();
    std::string out =
        absl::StrCat("Would create branch ", branch, " in ", project, " with ", summary(), ":\n");
    absl::StrAppend(&out, info.log().empty() ? "(no commits)\n" : info.log() + "\n");
    if (!info.uncommitted_stat().empty()) {
      absl::StrAppend(&out, "\nUncommitted work in the session",
                      options.include_uncommitted ? " (included, as one more commit):\n"
                                                  : " (not included; add --include-uncommitted):\n",
                      info.uncommitted_stat(), "\n");
      if (!info.uncommitted_diff().empty()) absl::StrAppend(&out, "\n", info.uncommitted_diff());
    }
    return options.sanitize ? EscapeForTerminal(out, /*keep_newlines=*/true) : out;
  }
  absl::StatusOr<ProcessResult> exists =
      RunHostGit(project, {"rev-parse", "--verify", "-q", absl::StrCat("refs/heads/", branch)});
  if (!exists.ok()) return exists.status();
  if (exists->exit_code == 0) {
    context.TryCancel();
    return absl::AlreadyExistsError(
        absl::StrCat("branch ", branch, " already exists in ", project,
                     "; choose another name with --branch NAME (it becomes airlock/", id,
                     "/NAME), or delete it first: git -C ", project, " branch -D ", branch));
  }
  // The bundle goes to a private file, is checked by git, and only then fetched.
  char dir_template[4096];
  std::snprintf(dir_template, sizeof dir_template, "%s/airlock-promote-XXXXXX",
                TempDirectory().c_str());
  if (mkdtemp(dir_template) == nullptr)
    return ErrnoStatus("create a directory in", TempDirectory());
  std::string dir = dir_template;
  std::string bundle = dir + "/session.bundle";
  struct Cleanup {
    std::string dir, file;
    ~Cleanup() {
      unlink(file.c_str());
      rmdir(dir.c_str());
    }
  } cleanup{dir, bundle};
  UniqueFd out(open(bundle.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out.valid()) return ErrnoStatus("create", bundle);
  while (reader->Read(&chunk)) {
    const std::string& data = chunk.data();
    for (size_t done = 0; done < data.size();) {
      ssize_t n = write(out.get(), data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return ErrnoStatus("write", bundle);
      done += static_cast<size_t>(n);
    }
  }
  if (grpc::Status s = reader->Finish(); !s.ok()) return FromGrpc(s);
  out.reset();
  auto refused = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the bundle from session ", id, " was refused (", project, " is unchanged): ", why));
  };
  absl::StatusOr<ProcessResult> verify = RunHostGit(project, {"bundle", "verify", "-q", bundle});
  if (!verify.ok()) return verify.status();
  if (verify->exit_code != 0) {
    return refused(absl::StrCat(
        "git bundle verify says: ",
        EscapeForTerminal(std::string(absl::StripAsciiWhitespace(verify->error_output)), true)));
  }
  absl::StatusOr<std::string> heads =
      HostGitOutput(project, {"bundle", "list-heads", bundle}, "listing the bundle's refs");
  if (!heads.ok()) return refused(std::string(heads.status().message()));
  std::string expected = absl::StrCat(info.head_commit(), " ", info.ref());
  if (std::string(absl::StripAsciiWhitespace(*heads)) != expected) {
    return refused(absl::StrCat("it holds refs other than ", info.ref(), " at ",
                                info.head_commit().substr(0, 12)));
  }
  // A fetch that fails (a full disk, say) leaves its half-written pack behind: what was not
  // there before it is removed, so the space comes back.
  absl::StatusOr<std::string> packs = HostGitOutput(
      project, {"rev-parse", "--git-path", "objects/pack"}, "finding the repository's packs");
  if (!packs.ok()) return packs.status();
  std::string pack_dir(absl::StripAsciiWhitespace(*packs));
  if (!pack_dir.empty() && pack_dir[0] != '/') pack_dir = absl::StrCat(project, "/", pack_dir);
  auto temporary_packs = [&] {
    std::set<std::string> names;
    for (const std::string& name : ListDirectory(pack_dir)) {
      if (absl::StartsWith(name, "tmp_pack_") || absl::StartsWith(name, "tmp_idx_")) {
        names.insert(name);
      }
    }
    return names;
  };
  std::set<std::string> before = temporary_packs();
  absl::StatusOr<ProcessResult> fetched = RunHostGit(
      project, {"-c", "fetch.fsckObjects=true", "-c", "transfer.fsckObjects=true", "fetch",
                "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", bundle,
                absl::StrCat(info.ref(), ":refs/heads/", branch)});
  if (!fetched.ok()) return fetched.status();
  if (fetched->exit_code != 0) {
    for (const std::string& name : temporary_packs()) {
      if (before.count(name) == 0) unlink(absl::StrCat(pack_dir, "/", name).c_str());
    }
    return refused(absl::StrCat(
        "git fetch says: ",
        EscapeForTerminal(std::string(absl::StripAsciiWhitespace(fetched->error_output)), true)));
  }
  absl::StatusOr<std::string> tip =
      HostGitOutput(project, {"rev-parse", "--verify", absl::StrCat("refs/heads/", branch)},
                    "reading the branch");
  if (!tip.ok()) return tip.status();
  std::string from = session.workspace().branch().empty() ? info.base_commit().substr(0, 12)
                                                          : session.workspace().branch();
  return absl::StrCat("Promoted ", summary(), " to branch ", branch, " in ", project, " (tip ",
                      std::string(absl::StripAsciiWhitespace(*tip)).substr(0, 12),
                      ").\nReview it with: git -C ", project, " log -p ", from, "..", branch, "\n");
}

absl::StatusOr<std::string> SyncWorkspace(DaemonClient& client, const std::string& id, bool dry_run,
                                          uint64_t max_bytes, const ProjectCheck& check_project) {
  grpc::ClientContext get_context;
  v1::GetWorkspaceRequest get;
  get.set_session_id(id);
  get.set_entries(true);
  v1::WorkspaceInfo info;
  if (grpc::Status s = client.workspaces->Get(&get_context, get, &info); !s.ok()) {
    return FromGrpc(s);
  }
  const std::string project = info.base().path();
  if (check_project != nullptr) {
    if (absl::Status s = check_project(project); !s.ok()) return s;
  }
  absl::StatusOr<WorkspaceTree> now = DescribeWorkspaceWithTools(project, max_bytes);
  if (!now.ok()) return now.status();
  // What sync considers: files git tracks or does not ignore (all files outside git), never
  // git's own directory.
  bool git = IsGitRepository(project);
  std::set<std::string> eligible;
  if (git) {
    absl::StatusOr<std::string> listed =
        HostGitOutput(project, {"ls-files", "-z", "--cached", "--others", "--exclude-standard"},
                      "listing the project's files", {.max_output = 256 << 20});
    if (!listed.ok()) return listed.status();
    for (absl::string_view p : absl::StrSplit(*listed, '\0', absl::SkipEmpty())) {
      eligible.insert(std::string(p));
    }
  }
  auto considered = [&](const std::string& path) {
    return path != ".git" && path.rfind(".git/", 0) != 0 && (!git || eligible.count(path) > 0);
  };
  std::map<std::string, const v1::WorkspaceEntry*> before;
  for (const v1::WorkspaceEntry& e : info.entries()) before[e.path()] = &e;
  std::map<std::string, const BaseEntry*> after;
  for (const BaseEntry& e : now->entries) after[e.path] = &e;
  struct Op {
    const BaseEntry* entry;  // nullptr: removed
    std::string path;
  };
  std::vector<Op> ops;
  for (const BaseEntry& e : now->entries) {
    if (!considered(e.path)) continue;
    auto it = before.find(e.path);
    const v1::WorkspaceEntry* b = it == before.end() ? nullptr : it->second;
    if (b != nullptr && b->mode() == e.mode && b->sha256() == e.sha256 && b->target() == e.target) {
      continue;
    }
    ops.push_back({&e, e.path});
  }
  for (const auto& [path, entry] : before) {
    // Gone from the host (and not merely ignored by git now).
    if (path == ".git" || path.rfind(".git/", 0) == 0 || after.count(path) > 0) continue;
    ops.push_back({nullptr, path});
  }
  std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.path < b.path; });

  grpc::ClientContext context;
  v1::WorkspaceSyncReply reply;
  std::unique_ptr<grpc::ClientWriter<v1::WorkspaceSyncChunk>> writer =
      client.workspaces->Sync(&context, &reply);
  v1::WorkspaceSyncChunk first;
  first.set_session_id(id);
  first.set_dry_run(dry_run);
  *first.mutable_base() = info.base();
  first.mutable_base()->set_tree_digest(now->digest);
  first.mutable_base()->set_files(now->entries.size());
  first.mutable_base()->set_bytes(now->data_bytes);
  bool ok = writer->Write(first) &&
            WriteEntries<v1::WorkspaceSyncChunk>(now->entries, writer.get(),
                                                 &v1::WorkspaceSyncChunk::mutable_entries);
  UniqueFd root(open(project.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return ErrnoStatus("open", project);
  for (const Op& op : ops) {
    if (!ok) break;
    v1::WorkspaceSyncChunk chunk;
    v1::WorkspaceSyncOp* out = chunk.mutable_op();
    if (op.entry == nullptr) {
      out->mutable_entry()->set_path(op.path);
      out->set_removed(true);
      ok = writer->Write(chunk);
      continue;
    }
    ToProto(*op.entry, out->mutable_entry());
    ok = writer->Write(chunk);
    if (!S_ISREG(op.entry->mode)) continue;
    // The content as it was described: a file that changed since is refused by its digest.
    UniqueFd fd(openat(root.get(), op.path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus("open", absl::StrCat(project, "/", op.path));
    std::string buf(kUploadChunk, '\0');
    uint64_t left = op.entry->size;
    while (ok && left > 0) {
      ssize_t n = read(fd.get(), buf.data(), std::min<uint64_t>(left, buf.size()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return absl::AbortedError(
            absl::StrCat(project, "/", op.path, " changed while it was synced; try again"));
      }
      v1::WorkspaceSyncChunk piece;
      piece.set_content(buf.data(), static_cast<size_t>(n));
      ok = writer->Write(piece);
      left -= static_cast<uint64_t>(n);
    }
  }
  writer->WritesDone();
  if (grpc::Status s = writer->Finish(); !s.ok()) return FromGrpc(s);
  std::string out;
  auto list = [&](const char* title, const google::protobuf::RepeatedPtrField<std::string>& paths) {
    if (paths.empty()) return;
    absl::StrAppend(&out, title, "\n");
    for (const std::string& p : paths) absl::StrAppend(&out, "  ", p, "\n");
  };
  list(dry_run ? "Would copy into the session:" : "Copied into the session:", reply.copied());
  list("Conflicts (changed in the session too; left as the session has them):", reply.conflicts());
  list("Already the same in the session:", reply.unchanged());
  if (out.empty()) out = "Nothing changed on the host since the session's base.\n";
  return out;
}

}  // namespace airlock
