// The Workspaces service: uploads of captured projects, and what a session did to its workspace.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/log.h"
#include "src/common/sha256.h"
#include "src/common/workspace_change.h"
#include "src/daemon/airlock_service.h"
#include "src/daemon/session_workspace.h"
#include "src/image/image_store.h"
#include "src/vm/snapshot.h"
#include "src/vm/vm_launcher.h"
#include "src/workspace/workspace_capture.h"

namespace airlock {
namespace {

// Content one sync may carry.
constexpr uint64_t kMaxSyncBytes = 1ull << 30;

// The manifest of a workspace, as the daemon keeps it (entries and synced paths).
constexpr size_t kMaxWorkspaceManifestBytes = 512ull << 20;

bool IsHex(absl::string_view s, size_t length) {
  return s.size() == length &&
         std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isxdigit(c); });
}

absl::Status CheckBase(const v1::WorkspaceBase& base) {
  if (base.path().empty() || base.path().size() > 4096 || base.path()[0] != '/') {
    return absl::InvalidArgumentError("a workspace's path must be absolute (at most 4096 bytes)");
  }
  if (!base.head().empty() && !IsHex(base.head(), 40) && !IsHex(base.head(), 64)) {
    return absl::InvalidArgumentError("a workspace's head must be a commit id");
  }
  if (base.branch().size() > 255 || !absl::StartsWith(base.tree_digest(), "sha256:") ||
      !IsHex(base.tree_digest().substr(7), 64)) {
    return absl::InvalidArgumentError("a workspace's branch or tree digest is malformed");
  }
  return absl::OkStatus();
}

absl::Status CheckEntry(const v1::WorkspaceEntry& e) {
  if (!IsCleanRelativePath(e.path())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a workspace entry's path is not a clean relative path: ", e.path().substr(0, 100)));
  }
  uint32_t type = e.mode() & S_IFMT;
  if ((e.mode() & ~static_cast<uint32_t>(S_IFMT | 07777)) != 0 ||
      (type != S_IFREG && type != S_IFLNK) || (type == S_IFREG && !IsHex(e.sha256(), 64)) ||
      e.target().size() > kMaxChangePath) {
    return absl::InvalidArgumentError(
        absl::StrCat("the workspace entry ", e.path(), " has a bad mode, digest or target"));
  }
  return absl::OkStatus();
}

WorkspaceRecord FromProto(const v1::WorkspaceBase& base) {
  WorkspaceRecord r;
  r.path = base.path();
  r.head = base.head();
  r.branch = base.branch();
  r.tree_digest = base.tree_digest();
  r.files = base.files();
  r.bytes = base.bytes();
  return r;
}

}  // namespace

grpc::Status WorkspacesService::Upload(grpc::ServerContext* context,
                                       grpc::ServerReader<v1::WorkspaceUploadChunk>* reader,
                                       v1::WorkspaceUploadReply* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  v1::WorkspaceUploadChunk chunk;
  if (!reader->Read(&chunk) || !chunk.has_base()) {
    return ToGrpc(absl::InvalidArgumentError("an upload starts with the workspace's base"));
  }
  if (absl::Status s = CheckBase(chunk.base()); !s.ok()) return ToGrpc(s);
  uint64_t image_bytes = chunk.image_bytes();
  if (image_bytes < (1 << 20) || image_bytes > kWorkspaceDiskBytes) {
    return ToGrpc(absl::InvalidArgumentError(absl::StrCat(
        "a workspace image must be between 1 MiB and ", kWorkspaceDiskBytes >> 30, " GiB")));
  }
  absl::StatusOr<UniqueFd> image = UnnamedFile(scratch_);
  if (!image.ok()) return ToGrpc(image.status());
  // A host disk that runs full says where, and what to do.
  auto failed = [&](const char* what) {
    absl::Status s = ErrnoStatus(what);
    return ToGrpc(absl::Status(s.code(), absl::StrCat(s.message(), sessions_->DiskSpaceHint())));
  };
  if (ftruncate(image->get(), static_cast<off_t>(kWorkspaceDiskBytes)) != 0) {
    return failed("size a workspace image");
  }
  v1::WorkspaceInfo manifest;
  *manifest.mutable_base() = chunk.base();
  std::string last_path;
  do {
    if (!chunk.data().empty()) {
      if (chunk.offset() > image_bytes || chunk.data().size() > image_bytes - chunk.offset()) {
        return ToGrpc(absl::InvalidArgumentError("workspace data beyond the image's size"));
      }
      const std::string& data = chunk.data();
      for (size_t done = 0; done < data.size();) {
        ssize_t n = pwrite(image->get(), data.data() + done, data.size() - done,
                           static_cast<off_t>(chunk.offset() + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return failed("write a workspace image");
        done += static_cast<size_t>(n);
      }
    }
    for (const v1::WorkspaceEntry& e : chunk.entries()) {
      if (absl::Status s = CheckEntry(e); !s.ok()) return ToGrpc(s);
      if (!last_path.empty() && e.path() <= last_path) {
        return ToGrpc(absl::InvalidArgumentError("workspace entries must be sorted by path"));
      }
      last_path = e.path();
      if (static_cast<uint64_t>(manifest.entries_size()) >= kMaxWorkspaceEntries) {
        return ToGrpc(absl::InvalidArgumentError("too many workspace entries"));
      }
      *manifest.add_entries() = e;
    }
  } while (reader->Read(&chunk));
  unsigned char magic[2] = {0, 0};
  if (pread(image->get(), magic, 2, 1024 + 56) != 2 || magic[0] != 0x53 || magic[1] != 0xef) {
    return ToGrpc(absl::InvalidArgumentError("the uploaded workspace is not an ext4 image"));
  }
  PendingWorkspace pending;
  pending.tenant = who->Tenant();
  pending.image = *std::move(image);
  pending.base = FromProto(manifest.base());
  pending.manifest = manifest.SerializeAsString();
  absl::StatusOr<std::string> token = uploads_->Add(std::move(pending));
  if (!token.ok()) return ToGrpc(token.status());
  response->set_token(*token);
  return grpc::Status::OK;
}

absl::StatusOr<v1::WorkspaceInfo> WorkspacesService::LoadBase(const SessionRecord& record) {
  if (!record.workspace.present()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session ", record.id,
        " has no workspace; create a session with one: airlock session create --workspace DIR"));
  }
  absl::StatusOr<std::string> bytes = ReadFileToString(
      sessions_->layout().WorkspaceManifest(record.id), kMaxWorkspaceManifestBytes);
  if (!bytes.ok()) return bytes.status();
  v1::WorkspaceInfo info;
  if (!info.ParseFromString(*bytes)) {
    return absl::DataLossError(
        absl::StrCat("the workspace manifest of session ", record.id, " is damaged"));
  }
  info.set_session_id(record.id);
  info.set_synced_unix_ms(record.workspace.synced_ms);
  return info;
}

grpc::Status WorkspacesService::Get(grpc::ServerContext* context,
                                    const v1::GetWorkspaceRequest* request,
                                    v1::WorkspaceInfo* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(), &v1::Workspaces::Stub::Get,
                           *request, response)) {
    return *f;
  }
  absl::StatusOr<SessionRecord> record =
      store_->sessions().Get(who->Tenant(), request->session_id());
  if (!record.ok()) return ToGrpc(record.status());
  absl::StatusOr<v1::WorkspaceInfo> info = LoadBase(*record);
  if (!info.ok()) return ToGrpc(info.status());
  if (!request->entries()) info->clear_entries();
  *response = *std::move(info);
  return grpc::Status::OK;
}

grpc::Status WorkspacesService::Diff(grpc::ServerContext* context,
                                     const v1::WorkspaceDiffRequest* request,
                                     grpc::ServerWriter<v1::WorkspaceChange>* writer) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(),
                           &v1::Workspaces::Stub::Diff, *request, writer)) {
    return *f;
  }
  absl::StatusOr<SessionRecord> record =
      store_->sessions().Get(who->Tenant(), request->session_id());
  if (!record.ok()) return ToGrpc(record.status());
  absl::StatusOr<v1::WorkspaceInfo> base = LoadBase(*record);
  if (!base.ok()) return ToGrpc(base.status());
  absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(*who, record->id);
  if (!live.ok()) return ToGrpc(live.status());
  uint64_t changes = 0;
  absl::Status listed = ListWorkspaceChanges(
      (*live)->vm->channel(), *base, [&](v1::WorkspaceChange change) -> absl::Status {
        if (context->IsCancelled() || !writer->Write(change)) {
          return absl::CancelledError("the client went away");
        }
        ++changes;
        return absl::OkStatus();
      });
  // In the session's timeline: who looked at its work, and what there was.
  LogIfFailed(store_->audit().Audit(*who, who->Tenant(), "workspace.diff", record->id,
                                    listed.ok() ? absl::StrCat(changes, " changed paths")
                                                : absl::StrCat("failed: ", listed.message())),
              absl::StrCat("session ", record->id, ": its diff not audited"));
  return ToGrpc(listed);
}

grpc::Status WorkspacesService::Bundle(grpc::ServerContext* context,
                                       const v1::WorkspaceBundleRequest* request,
                                       grpc::ServerWriter<v1::WorkspaceBundleChunk>* writer) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(),
                           &v1::Workspaces::Stub::Bundle, *request, writer)) {
    return *f;
  }
  if (request->branch().size() > 255) {
    return ToGrpc(absl::InvalidArgumentError("the branch name is over 255 bytes"));
  }
  absl::StatusOr<SessionRecord> record =
      store_->sessions().Get(who->Tenant(), request->session_id());
  if (!record.ok()) return ToGrpc(record.status());
  absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(*who, record->id);
  if (!live.ok()) return ToGrpc(live.status());
  GuestChannel& channel = (*live)->vm->channel();
  absl::StatusOr<v1::WorkspaceBundleInfo> info =
      PrepareBundle(channel, (*live)->record, request->include_uncommitted(), request->dry_run());
  if (!info.ok()) return ToGrpc(info.status());
  v1::WorkspaceBundleChunk first;
  *first.mutable_info() = *info;
  if (!writer->Write(first)) return ToGrpc(absl::CancelledError("the client went away"));
  if (request->dry_run()) return grpc::Status::OK;
  absl::StatusOr<std::string> digest =
      StreamBundle(channel, (*live)->record, *info, [&](std::string_view bytes) -> absl::Status {
        v1::WorkspaceBundleChunk chunk;
        chunk.set_data(bytes.data(), bytes.size());
        if (context->IsCancelled() || !writer->Write(chunk)) {
          return absl::CancelledError("the client went away");
        }
        return absl::OkStatus();
      });
  std::string outcome = digest.ok()
                            ? absl::StrCat("ok; ", info->commits(), " commit(s) ",
                                           info->base_commit(), "..", info->head_commit(),
                                           " for branch ", request->branch(), ", bundle ", *digest)
                            : absl::StrCat("failed: ", digest.status().message());
  LogIfFailed(store_->audit().Audit(*who, who->Tenant(), "workspace.promote", record->id, outcome),
              absl::StrCat("session ", record->id, ": its promote not audited"));
  return ToGrpc(digest.status());
}

grpc::Status WorkspacesService::Sync(grpc::ServerContext* context,
                                     grpc::ServerReader<v1::WorkspaceSyncChunk>* reader,
                                     v1::WorkspaceSyncReply* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  v1::WorkspaceSyncChunk chunk;
  if (!reader->Read(&chunk) || !chunk.has_base()) {
    return ToGrpc(absl::InvalidArgumentError("a sync starts with the session and the project"));
  }
  if (absl::Status s = CheckSessionId(chunk.session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, chunk.session_id(), &v1::Workspaces::Stub::Sync,
                           chunk, reader, response)) {
    return *f;
  }
  if (absl::Status s = CheckBase(chunk.base()); !s.ok()) return ToGrpc(s);
  bool dry_run = chunk.dry_run();
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(who->Tenant(), chunk.session_id());
  if (!record.ok()) return ToGrpc(record.status());
  absl::StatusOr<v1::WorkspaceInfo> base = LoadBase(*record);
  if (!base.ok()) return ToGrpc(base.status());
  absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(*who, record->id);
  if (!live.ok()) return ToGrpc(live.status());
  GuestChannel& channel = (*live)->vm->channel();

  // What the session changed itself: those paths are conflicts, unless it made the same change.
  std::map<std::string, v1::WorkspaceChange> changed;
  absl::Status listed = ListWorkspaceChanges(channel, *base, [&](v1::WorkspaceChange c) {
    std::string path = c.path();
    changed[path] = std::move(c);
    return absl::OkStatus();
  });
  if (!listed.ok()) return ToGrpc(listed);

  v1::WorkspaceInfo next;
  *next.mutable_base() = chunk.base();
  next.mutable_base()->set_head(record->workspace.head);  // the session's history is its own
  next.mutable_base()->set_branch(record->workspace.branch);
  std::set<std::string> synced(base->synced().begin(), base->synced().end());
  std::vector<SyncWrite> writes;
  std::string last_path;
  uint64_t content_bytes = 0;
  SyncWrite* pending = nullptr;  // a file whose content is still arriving
  auto finish_pending = [&]() -> absl::Status {
    if (pending == nullptr) return absl::OkStatus();
    if (pending->content.size() != pending->entry.size() ||
        Sha256Hex(pending->content) != pending->entry.sha256()) {
      return absl::InvalidArgumentError(absl::StrCat("the content sent for ", pending->entry.path(),
                                                     " does not match its size and digest"));
    }
    pending = nullptr;
    return absl::OkStatus();
  };
  do {
    for (const v1::WorkspaceEntry& e : chunk.entries()) {
      if (absl::Status s = CheckEntry(e); !s.ok()) return ToGrpc(s);
      if (!last_path.empty() && e.path() <= last_path) {
        return ToGrpc(absl::InvalidArgumentError("workspace entries must be sorted by path"));
      }
      last_path = e.path();
      if (static_cast<uint64_t>(next.entries_size()) >= kMaxWorkspaceEntries) {
        return ToGrpc(absl::InvalidArgumentError("too many workspace entries"));
      }
      *next.add_entries() = e;
    }
    if (chunk.has_op()) {
      if (absl::Status s = finish_pending(); !s.ok()) return ToGrpc(s);
      const v1::WorkspaceSyncOp& op = chunk.op();
      if (!IsCleanRelativePath(op.entry().path()) ||
          (!op.removed() && !CheckEntry(op.entry()).ok())) {
        return ToGrpc(absl::InvalidArgumentError("a sync names a bad path or entry"));
      }
      content_bytes += op.entry().size();
      if (content_bytes > kMaxSyncBytes) {
        return ToGrpc(absl::ResourceExhaustedError(
            "more than 1 GiB changed on the host; create a new session from the project instead"));
      }
      writes.push_back({op.entry(), op.removed(), ""});
      if (!op.removed() && (op.entry().mode() & S_IFMT) == S_IFREG) pending = &writes.back();
    }
    if (!chunk.content().empty()) {
      if (pending == nullptr ||
          pending->content.size() + chunk.content().size() > pending->entry.size()) {
        return ToGrpc(absl::InvalidArgumentError("sync content that belongs to no file"));
      }
      pending->content += chunk.content();
    }
  } while (reader->Read(&chunk));
  if (absl::Status s = finish_pending(); !s.ok()) return ToGrpc(s);

  std::vector<SyncWrite> apply;
  for (SyncWrite& w : writes) {
    const std::string& path = w.entry.path();
    auto it = changed.find(path);
    if (it == changed.end()) {
      response->add_copied(path);
      synced.insert(path);
      apply.push_back(std::move(w));
      continue;
    }
    const v1::WorkspaceChange& c = it->second;
    bool same = w.removed ? c.new_mode() == 0
                          : c.new_mode() == w.entry.mode() &&
                                ((w.entry.mode() & S_IFMT) == S_IFLNK
                                     ? c.new_target() == w.entry.target()
                                     : c.has_new_content() && c.new_content() == w.content);
    if (same) {
      response->add_unchanged(path);
      synced.insert(path);
    } else {
      response->add_conflicts(path);
    }
  }
  if (dry_run) return grpc::Status::OK;
  if (absl::Status s = ApplySyncWrites(channel, apply); !s.ok()) return ToGrpc(s);
  for (const std::string& path : synced) next.add_synced(path);
  WorkspaceRecord advanced = record->workspace;
  advanced.tree_digest = next.base().tree_digest();
  advanced.files = next.base().files();
  advanced.bytes = next.base().bytes();
  advanced.synced_ms = NowUnixMs();
  std::string outcome =
      absl::StrCat("ok; ", response->copied_size(), " copied, ", response->conflicts_size(),
                   " conflicts, base ", advanced.tree_digest);
  return ToGrpc(
      sessions_->AdvanceWorkspace(*who, *record, advanced, next.SerializeAsString(), outcome));
}

}  // namespace airlock
