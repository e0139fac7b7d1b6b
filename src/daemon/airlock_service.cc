#include "src/daemon/airlock_service.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <deque>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "src/common/byte_size.h"
#include "src/common/exit_codes.h"
#include "src/common/file_util.h"
#include "src/common/log.h"
#include "src/common/process_stats.h"
#include "src/daemon/agent_transcripts.h"
#include "src/daemon/oidc_auth.h"
#include "src/daemon/timeline.h"
#include "src/daemon/upload_messages.h"
#include "src/image/build_context.h"
#include "src/image/dockerfile.h"
#include "src/image/image_store.h"
#include "src/image/oci_export.h"
#include "src/image/tar_to_ext4.h"
#include "src/telemetry/tracer.h"

namespace airlock {
namespace {

void FillSession(const SessionRecord& r, v1::Session* out) {
  out->set_id(r.id);
  out->set_image(r.image);
  out->set_image_digest(r.image_digest);
  out->set_state(static_cast<v1::SessionState>(static_cast<int>(r.state)));
  out->set_reason(r.reason);
  out->set_created_unix_ms(r.created_ms);
  out->set_last_used_unix_ms(r.last_used_ms);
  out->set_hostname(r.hostname);
  out->set_tenant(r.tenant);
  v1::Limits* l = out->mutable_limits();
  l->set_vcpus(r.limits.vcpus);
  l->set_memory_bytes(r.limits.memory_bytes);
  l->set_pids(r.limits.pids);
  l->set_disk_bytes(r.limits.disk_bytes);
  l->set_ttl_seconds(r.limits.ttl_seconds);
  l->set_idle_timeout_seconds(r.limits.idle_timeout_seconds);
  l->set_net_bytes_per_second(r.limits.net_bytes_per_second);
  for (const VolumeAttachment& v : r.volumes) {
    v1::VolumeMount* m = out->add_volumes();
    m->set_name(v.name);
    m->set_path(v.path);
    m->set_read_only(v.read_only);
  }
  if (r.workspace.present()) {
    v1::WorkspaceBase* w = out->mutable_workspace();
    w->set_path(r.workspace.path);
    w->set_head(r.workspace.head);
    w->set_branch(r.workspace.branch);
    w->set_tree_digest(r.workspace.tree_digest);
    w->set_files(r.workspace.files);
    w->set_bytes(r.workspace.bytes);
  }
}

}  // namespace

SessionLimits FromProto(const v1::Limits& l) {
  SessionLimits limits;
  limits.vcpus = l.vcpus();
  limits.memory_bytes = l.memory_bytes();
  limits.pids = l.pids();
  limits.disk_bytes = l.disk_bytes();
  limits.ttl_seconds = l.ttl_seconds();
  if (l.has_idle_timeout_seconds()) limits.idle_timeout_seconds = l.idle_timeout_seconds();
  limits.net_bytes_per_second = l.net_bytes_per_second();
  return limits;
}

namespace {

// The caller and, for a bearer token, the groups it names.
std::optional<Principal> Caller(grpc::ServerContext* context, const PeerRegistry* peers,
                                std::vector<std::string>* groups) {
  if (std::optional<Principal> unix_peer = peers->Lookup(context->peer())) return unix_peer;
  std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
  // A fleet host forwards calls for their callers, whom it names; it never calls for itself.
  if (const FleetPeers* fleet = peers->fleet(); fleet != nullptr && auth) {
    if (std::optional<std::string> host = fleet->HostOf(*auth)) {
      auto header = context->client_metadata().find(kFleetCallerHeader);
      if (header == context->client_metadata().end()) return std::nullopt;
      absl::StatusOr<Principal> p =
          DecodeFleetCaller(std::string_view(header->second.data(), header->second.size()), groups);
      if (!p.ok()) return std::nullopt;
      p->via_host = *host;
      return *std::move(p);
    }
  }
  // A bearer token names the caller of this call, even on a connection with a client
  // certificate (a connection may carry calls of several token holders). OidcAuthenticator
  // refused bad tokens before the call reached here, saying why.
  if (OidcAuthenticator* oidc = peers->oidc()) {
    auto header = context->client_metadata().find("authorization");
    if (header != context->client_metadata().end()) {
      absl::StatusOr<OidcIdentity> id = oidc->VerifyAuthorization(
          absl::string_view(header->second.data(), header->second.size()));
      if (!id.ok()) return std::nullopt;
      Principal p;
      p.oidc = absl::StrCat(id->issuer, "#", id->subject);
      *groups = std::move(id->groups);
      return p;
    }
  }
  if (auth && auth->IsPeerAuthenticated()) {
    std::vector<grpc::string_ref> names = auth->FindPropertyValues("x509_common_name");
    if (!names.empty() && names[0].size() > 0 && names[0].size() <= 128) {
      Principal p;
      p.certificate.assign(names[0].data(), names[0].size());
      return p;
    }
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<Principal> Authorize(grpc::ServerContext* context, const PeerRegistry* peers,
                                    Access access) {
  std::vector<std::string> groups;
  std::optional<Principal> who = Caller(context, peers, &groups);
  if (!who) {
    return absl::UnauthenticatedError("airlockd could not identify the caller of this connection");
  }
  who->read_only_operator = peers->operators().Names(*who, groups);
  who->groups = std::move(groups);
  if (access == Access::kChange && who->read_only_operator) {
    return absl::PermissionDeniedError(
        absl::StrCat(who->Tenant(),
                     " is a read-only operator (airlockd --operator): it may look at every "
                     "tenant's sessions but not change anything"));
  }
  return *std::move(who);
}

std::string TenantForLookup(const Principal& who, StateStore& store, const std::string& id) {
  if (!who.read_only_operator) return who.Tenant();
  absl::StatusOr<std::string> owner = store.sessions().TenantOf(id);
  return owner.ok() ? *owner : who.Tenant();
}

std::vector<SecretRequest> FromProto(
    const google::protobuf::RepeatedPtrField<v1::SecretBinding>& bindings) {
  std::vector<SecretRequest> out;
  for (const v1::SecretBinding& b : bindings) out.push_back({b.spec(), b.value()});
  return out;
}

std::vector<VolumeRequest> FromProto(
    const google::protobuf::RepeatedPtrField<v1::VolumeMount>& volumes) {
  std::vector<VolumeRequest> out;
  for (const v1::VolumeMount& v : volumes) out.push_back({v.name(), v.path(), v.read_only()});
  return out;
}

namespace {

grpc::Status EveryTenantDenied() {
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      "only root and read-only operators (airlockd --operator) may see every "
                      "tenant's sessions; leave out all_tenants (--all-tenants) to see your own");
}

}  // namespace

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::Status SessionsService::Create(grpc::ServerContext* context,
                                     const v1::CreateSessionRequest* request,
                                     v1::Session* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  // In a fleet, the host with room makes it (or the one asked for); a forwarded create is made
  // where it arrived if it still has room (another create may have come first).
  if (fleet_ != nullptr) {
    absl::StatusOr<SessionLimits> limits =
        SessionManager::ResolveLimits(FromProto(request->limits()));
    if (!limits.ok()) return ToGrpc(limits.status());
    bool forwarded = !who->via_host.empty();
    bool here = forwarded || !request->workspace().empty() || request->volumes_size() > 0;
    std::string target;
    absl::StatusOr<std::shared_ptr<grpc::Channel>> placed = fleet_->PlaceCreate(
        forwarded ? sessions_->handoff()->host_id() : request->host(),
        {.vcpus = limits->vcpus, .memory_bytes = limits->memory_bytes}, here, &target);
    if (!placed.ok()) return ToGrpc(placed.status());
    if (*placed != nullptr) {
      std::shared_ptr<void> under_way = fleet_->CreateUnderWay(target);
      return ForwardTo(*placed, context, *who, &v1::Sessions::Stub::Create, *request, response);
    }
  } else if (fleet_ == nullptr && !request->host().empty() &&
             (sessions_->handoff() == nullptr ||
              request->host() != sessions_->handoff()->host_id())) {
    return ToGrpc(absl::FailedPreconditionError(
        absl::StrCat("this host makes sessions only on itself: --host ", request->host(),
                     " needs a fleet whose hosts forward calls (airlockd --fleet-listen); leave "
                     "it out, or call that host")));
  }
  absl::StatusOr<std::vector<EgressGrant>> egress = sessions_->ResolveEgress(
      {request->allow().begin(), request->allow().end()},
      {request->allow_preset().begin(), request->allow_preset().end()}, "create");
  if (!egress.ok()) return ToGrpc(egress.status());
  absl::StatusOr<std::unique_ptr<PendingWorkspace>> workspace =
      uploads_->TakeFor(who->Tenant(), request->workspace());
  if (!workspace.ok()) return ToGrpc(workspace.status());
  absl::StatusOr<SessionRecord> session = sessions_->Create(
      *who, request->image(), FromProto(request->limits()), *egress, FromProto(request->secrets()),
      workspace->get(), /*one_shot=*/false, FromProto(request->volumes()));
  if (!session.ok()) return ToGrpc(session.status());
  FillSession(*session, response);
  if (sessions_->handoff() != nullptr) response->set_host(sessions_->handoff()->host_id());
  return grpc::Status::OK;
}

grpc::Status SessionsService::Get(grpc::ServerContext* context,
                                  const v1::GetSessionRequest* request, v1::Session* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->id()); !s.ok()) return ToGrpc(s);
  absl::StatusOr<SessionManager::ListedSession> session =
      sessions_->Find(TenantForLookup(*who, *store_, request->id()), request->id());
  if (!session.ok()) return ToGrpc(session.status());
  FillSession(session->record, response);
  response->set_host(session->host);
  return grpc::Status::OK;
}

grpc::Status SessionsService::List(grpc::ServerContext* context,
                                   const v1::ListSessionsRequest* request,
                                   v1::ListSessionsResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (request->all_tenants() && !who->SeesEveryTenant()) return EveryTenantDenied();
  absl::StatusOr<std::vector<SessionManager::ListedSession>> sessions =
      sessions_->List(request->all_tenants() ? SessionEventHub::kEveryTenant : who->Tenant());
  if (!sessions.ok()) return ToGrpc(sessions.status());
  for (const SessionManager::ListedSession& s : *sessions) {
    v1::Session* out = response->add_sessions();
    FillSession(s.record, out);
    out->set_host(s.host);
  }
  return grpc::Status::OK;
}

grpc::Status SessionsService::Remove(grpc::ServerContext* context,
                                     const v1::RemoveSessionRequest* request,
                                     v1::RemoveSessionResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f = ForwardElsewhere(
          fleet_, context, *who, request->id(), &v1::Sessions::Stub::Remove, *request, response)) {
    return *f;
  }
  return ToGrpc(sessions_->Remove(*who, request->id()));
}

grpc::Status SessionsService::Pause(grpc::ServerContext* context,
                                    const v1::PauseSessionRequest* request, v1::Session* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f = ForwardElsewhere(
          fleet_, context, *who, request->id(), &v1::Sessions::Stub::Pause, *request, response)) {
    return *f;
  }
  absl::StatusOr<SessionRecord> session = sessions_->Pause(*who, request->id());
  if (!session.ok()) return ToGrpc(session.status());
  FillSession(*session, response);
  return grpc::Status::OK;
}

grpc::Status SessionsService::Resume(grpc::ServerContext* context,
                                     const v1::ResumeSessionRequest* request,
                                     v1::Session* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f = ForwardElsewhere(
          fleet_, context, *who, request->id(), &v1::Sessions::Stub::Resume, *request, response)) {
    return *f;
  }
  absl::StatusOr<SessionRecord> session = sessions_->Resume(*who, request->id());
  if (!session.ok()) return ToGrpc(session.status());
  FillSession(*session, response);
  return grpc::Status::OK;
}

grpc::Status SessionsService::Fork(grpc::ServerContext* context,
                                   const v1::ForkSessionRequest* request,
                                   v1::ForkSessionResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f = ForwardElsewhere(
          fleet_, context, *who, request->id(), &v1::Sessions::Stub::Fork, *request, response)) {
    return *f;
  }
  absl::StatusOr<std::vector<SessionRecord>> forks =
      sessions_->Fork(*who, request->id(), request->count());
  if (!forks.ok()) return ToGrpc(forks.status());
  for (const SessionRecord& s : *forks) FillSession(s, response->add_sessions());
  return grpc::Status::OK;
}

grpc::Status SessionsService::Timeline(grpc::ServerContext* context,
                                       const v1::TimelineRequest* request,
                                       grpc::ServerWriter<v1::TimelineEvent>* writer) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(),
                           &v1::Sessions::Stub::Timeline, *request, writer)) {
    return *f;
  }
  if (request->output_bytes() > kTimelineMaxOutputBytes) {
    return ToGrpc(absl::InvalidArgumentError(
        absl::StrCat("output_bytes is at most ", kTimelineMaxOutputBytes, " (1 MiB)")));
  }
  absl::StatusOr<std::vector<v1::TimelineEvent>> events =
      BuildTimeline(*store_, TenantForLookup(*who, *store_, request->session_id()),
                    request->session_id(), request->output_bytes());
  if (!events.ok()) return ToGrpc(events.status());
  for (const v1::TimelineEvent& e : *events) {
    if (!writer->Write(e)) return grpc::Status::CANCELLED;
  }
  return grpc::Status::OK;
}

grpc::Status SessionsService::Watch(grpc::ServerContext* context, const v1::WatchRequest* request,
                                    grpc::ServerWriter<v1::SessionEvent>* writer) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (!request->session_id().empty()) {
    if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  }
  bool every_tenant = request->all_tenants() && request->session_id().empty();
  if (every_tenant && !who->SeesEveryTenant()) return EveryTenantDenied();
  std::string tenant = every_tenant ? SessionEventHub::kEveryTenant
                                    : TenantForLookup(*who, *store_, request->session_id());
  // Subscribed before the check, so that nothing between the two is missed; in a fleet, other
  // hosts' sessions too (from the fleet's index).
  std::shared_ptr<SessionEventHub::Subscription> events =
      events_->Subscribe(tenant, request->session_id());
  std::shared_ptr<void> fleet = sessions_->WatchFleet();
  if (!request->session_id().empty()) {
    absl::StatusOr<SessionManager::ListedSession> session =
        sessions_->Find(tenant, request->session_id());
    if (!session.ok()) return ToGrpc(session.status());
  }
  while (!context->IsCancelled()) {
    std::optional<SessionEvent> e = events->Next(absl::Now() + absl::Milliseconds(500));
    if (!e) continue;
    v1::SessionEvent out;
    out.set_kind(static_cast<v1::SessionEvent::Kind>(static_cast<int>(e->kind)));
    out.set_unix_ms(e->unix_ms);
    out.set_session_id(e->session_id);
    if (e->kind == SessionEvent::Kind::kState) {
      out.set_state(static_cast<v1::SessionState>(static_cast<int>(e->state)));
    }
    out.set_reason(e->kind == SessionEvent::Kind::kExecExit ? e->message : e->reason);
    out.set_exec_id(static_cast<uint64_t>(e->exec_id));
    for (const std::string& a : e->argv) out.add_argv(a);
    out.set_exit_code(e->exit_code);
    out.set_destination(e->destination);
    out.set_lost(e->lost);
    out.set_tenant(e->tenant);
    out.set_host(e->host);
    if (!writer->Write(out)) break;
  }
  return grpc::Status::OK;
}

grpc::Status SessionsService::Quota(grpc::ServerContext* context,
                                    const v1::GetQuotaRequest* /*request*/,
                                    v1::QuotaReport* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  auto [quota, used] = sessions_->QuotaOf(*who);
  response->set_tenant(who->Tenant());
  for (const QuotaLine& line : DescribeQuota(quota, used)) {
    v1::QuotaItem* item = response->add_items();
    item->set_name(line.name);
    item->set_limit(line.limit);
    item->set_used(line.used);
    item->set_bytes(line.bytes);
    item->set_what(line.what);
    item->set_per_request(line.per_request);
  }
  return grpc::Status::OK;
}

namespace {

// The whole-file calls: one message each way.
constexpr uint64_t kMaxFileBytes = 3 << 20;
}  // namespace

grpc::Status SessionsService::WriteFile(grpc::ServerContext* context,
                                        const v1::WriteFileRequest* request,
                                        v1::WriteFileResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(),
                           &v1::Sessions::Stub::WriteFile, *request, response)) {
    return *f;
  }
  if (request->content().size() > kMaxFileBytes) {
    return ToGrpc(absl::InvalidArgumentError(
        "WriteFile takes at most 3 MiB; use WriteFileStream (the SDKs' files.write) for more"));
  }
  absl::StatusOr<uint64_t> written =
      files_.Write(*who, request->session_id(), request->path(), request->mode(),
                   [&](std::string* piece, bool* last) {
                     *piece = request->content();
                     *last = true;
                     return absl::OkStatus();
                   });
  if (!written.ok()) return ToGrpc(written.status());
  response->set_bytes(*written);
  return grpc::Status::OK;
}

grpc::Status SessionsService::WriteFileStream(grpc::ServerContext* context,
                                              grpc::ServerReader<v1::WriteFileChunk>* reader,
                                              v1::WriteFileResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  v1::WriteFileChunk chunk;
  if (!reader->Read(&chunk)) {
    return ToGrpc(absl::InvalidArgumentError(
        "WriteFileStream starts with a message naming the session and the file"));
  }
  if (absl::Status s = CheckSessionId(chunk.session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, chunk.session_id(),
                           &v1::Sessions::Stub::WriteFileStream, chunk, reader, response)) {
    return *f;
  }
  UploadMessages<v1::WriteFileChunk> messages(context, reader, "the file was left as it was");
  bool first = true;
  absl::StatusOr<uint64_t> written = files_.Write(
      *who, chunk.session_id(), chunk.path(), chunk.mode(),
      [&](std::string* piece, bool* last) -> absl::Status {
        if (!first) {
          if (absl::Status s = messages.Next(&chunk); !s.ok()) return s;
          if (!chunk.session_id().empty() || !chunk.path().empty() || chunk.mode() != 0) {
            return absl::InvalidArgumentError(
                "only the first message of WriteFileStream names the session, path and mode");
          }
        }
        first = false;
        *piece = std::move(*chunk.mutable_data());
        *last = chunk.last();
        return absl::OkStatus();
      });
  if (!written.ok()) return ToGrpc(written.status());
  response->set_bytes(*written);
  return grpc::Status::OK;
}

grpc::Status SessionsService::ReadFile(grpc::ServerContext* context,
                                       const v1::ReadFileRequest* request,
                                       v1::ReadFileResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(),
                           &v1::Sessions::Stub::ReadFile, *request, response)) {
    return *f;
  }
  uint64_t max = request->max_bytes() == 0
                     ? kMaxFileBytes
                     : std::min<uint64_t>(request->max_bytes(), kMaxFileBytes);
  std::string* content = response->mutable_content();
  absl::StatusOr<uint64_t> read =
      files_.Read(*who, request->session_id(), request->path(), max, [&](std::string piece) {
        content->append(piece);
        return absl::OkStatus();
      });
  if (!read.ok()) return ToGrpc(read.status());
  return grpc::Status::OK;
}

grpc::Status SessionsService::ReadFileStream(grpc::ServerContext* context,
                                             const v1::ReadFileStreamRequest* request,
                                             grpc::ServerWriter<v1::ReadFileChunk>* writer) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(),
                           &v1::Sessions::Stub::ReadFileStream, *request, writer)) {
    return *f;
  }
  v1::ReadFileChunk chunk;
  absl::StatusOr<uint64_t> read =
      files_.Read(*who, request->session_id(), request->path(), request->max_bytes(),
                  [&](std::string piece) -> absl::Status {
                    *chunk.mutable_data() = std::move(piece);
                    if (context->IsCancelled() || !writer->Write(chunk)) {
                      return absl::CancelledError("the client went away");
                    }
                    return absl::OkStatus();
                  });
  if (!read.ok()) return ToGrpc(read.status());
  return grpc::Status::OK;
}

namespace {

// A call's stream as the client of a runner (ExecClient, PortForwardClient): reads, writes and
// cancellation of the stream and its context.
template <typename Interface, typename Response, typename Request>
class StreamClient final : public Interface {
 public:
  StreamClient(grpc::ServerContext* context, grpc::ServerReaderWriter<Response, Request>* stream)
      : context_(context), stream_(stream) {}
  bool Read(Request* message) override { return stream_->Read(message); }
  bool Write(const Response& response) override { return stream_->Write(response); }
  bool Cancelled() override { return context_->IsCancelled(); }
  void Cancel() override { context_->TryCancel(); }

 private:
  grpc::ServerContext* context_;
  grpc::ServerReaderWriter<Response, Request>* stream_;
};

}  // namespace

grpc::Status SessionsService::Exec(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::ExecResponse, v1::ExecRequest>* stream) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  v1::ExecRequest first;
  if (!stream->Read(&first) || !first.has_start()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message of Exec must be an ExecStart");
  }
  if (absl::Status s = ValidateExecStart(first.start()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, first.start().session_id(),
                           &v1::Sessions::Stub::Exec, first, stream)) {
    return *f;
  }
  StreamClient<ExecClient, v1::ExecResponse, v1::ExecRequest> client(context, stream);
  return ToGrpc(exec_.Run(*who, first.start(), client));
}

grpc::Status SessionsService::ForwardPort(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::PortForwardResponse, v1::PortForwardRequest>* stream) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  v1::PortForwardRequest first;
  if (!stream->Read(&first) || !first.has_start()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message of ForwardPort must be a PortForwardStart");
  }
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, first.start().session_id(),
                           &v1::Sessions::Stub::ForwardPort, first, stream)) {
    return *f;
  }
  StreamClient<PortForwardClient, v1::PortForwardResponse, v1::PortForwardRequest> client(context,
                                                                                          stream);
  // Where the client is, for the audit: an address over TCP, else this host's Unix socket.
  std::string peer = context->peer();
  if (absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:")) {
    peer = peer.substr(5);
  } else {
    peer = "this host";
  }
  return ToGrpc(forwarder_.Run(*who, first.start(), peer, client));
}

namespace {

void FillExposure(const ExposureView& view, v1::Exposure* out) {
  out->set_session_id(view.exposure.session_id);
  out->set_port(view.exposure.port);
  out->set_public_(view.exposure.is_public);
  out->set_url(view.url);
  out->set_token(view.exposure.token);
  out->set_created_unix_ms(view.exposure.created_ms);
  out->set_host(view.host);
}

}  // namespace

grpc::Status SessionsService::Expose(grpc::ServerContext* context, const v1::ExposeRequest* request,
                                     v1::Exposure* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  // A port's URL is served by the gateway of the host that runs the session.
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(),
                           &v1::Sessions::Stub::Expose, *request, response)) {
    return *f;
  }
  absl::StatusOr<ExposureView> view =
      exposures_->Expose(*who, request->session_id(), request->port(), request->public_());
  if (!view.ok()) return ToGrpc(view.status());
  FillExposure(*view, response);
  return grpc::Status::OK;
}

grpc::Status SessionsService::ListExposures(grpc::ServerContext* context,
                                            const v1::ListExposuresRequest* request,
                                            v1::ListExposuresResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (!request->session_id().empty()) {
    if (std::optional<grpc::Status> f =
            ForwardElsewhere(fleet_, context, *who, request->session_id(),
                             &v1::Sessions::Stub::ListExposures, *request, response)) {
      return *f;
    }
  }
  absl::StatusOr<std::vector<ExposureView>> views = exposures_->List(*who, request->session_id());
  if (!views.ok()) return ToGrpc(views.status());
  for (const ExposureView& view : *views) FillExposure(view, response->add_exposures());
  return grpc::Status::OK;
}

grpc::Status SessionsService::Unexpose(grpc::ServerContext* context,
                                       const v1::UnexposeRequest* request,
                                       v1::UnexposeResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(),
                           &v1::Sessions::Stub::Unexpose, *request, response)) {
    return *f;
  }
  return ToGrpc(exposures_->Unexpose(*who, request->session_id(), request->port()));
}

grpc::Status SessionsService::Logs(grpc::ServerContext* context, const v1::LogsRequest* request,
                                   grpc::ServerWriter<v1::LogEntry>* writer) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(), &v1::Sessions::Stub::Logs,
                           *request, writer)) {
    return *f;
  }
  absl::StatusOr<SessionRecord> session =
      store_->sessions().Get(who->Tenant(), request->session_id());
  if (!session.ok()) return ToGrpc(session.status());
  // Following a session wakes it if it was paused, and the stream keeps it in use (awake) for
  // as long as it lasts.
  std::shared_ptr<LiveSession> in_use;
  if (request->follow() &&
      (session->state == SessionState::kPaused || session->state == SessionState::kRunning)) {
    absl::StatusOr<std::shared_ptr<LiveSession>> live =
        sessions_->Live(*who, request->session_id());
    if (!live.ok()) return ToGrpc(live.status());
    in_use = *std::move(live);
  }
  int64_t after = 0;
  uint32_t tail = request->tail();
  for (;;) {
    absl::StatusOr<std::vector<LogRecord>> records = store_->commands().ReadOutput(
        who->Tenant(), request->session_id(), after, request->since_unix_ms(), tail);
    if (!records.ok()) return ToGrpc(records.status());
    tail = 0;
    for (const LogRecord& r : *records) {
      v1::LogEntry entry;
      entry.set_unix_ms(r.unix_ms);
      entry.set_exec_id(static_cast<uint64_t>(r.exec_id));
      entry.set_stream(static_cast<v1::LogEntry::Stream>(static_cast<int>(r.stream)));
      entry.set_data(r.data);
      if (!writer->Write(entry)) return grpc::Status::CANCELLED;
      after = r.seq;
    }
    if (!records->empty() && records->size() >= 4096) continue;  // more pages
    if (!request->follow() || context->IsCancelled()) return grpc::Status::OK;
    if (records->empty()) {
      absl::StatusOr<SessionRecord> now =
          store_->sessions().Get(who->Tenant(), request->session_id());
      if (!now.ok() ||
          (now->state != SessionState::kRunning && now->state != SessionState::kCreating)) {
        return grpc::Status::OK;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

grpc::Status SessionsService::Metrics(grpc::ServerContext* context,
                                      const v1::MetricsRequest* request,
                                      grpc::ServerWriter<v1::MetricsSample>* writer) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(),
                           &v1::Sessions::Stub::Metrics, *request, writer)) {
    return *f;
  }
  uint32_t interval = request->interval_ms() == 0 ? 1000 : std::max(100u, request->interval_ms());
  // Another tenant's session (for root and operators) is only looked at: never woken from a
  // pause, and its idle clock keeps running.
  std::string tenant = TenantForLookup(*who, *store_, request->session_id());
  std::optional<GuestMetrics> previous;
  for (;;) {
    absl::StatusOr<std::shared_ptr<LiveSession>> live =
        tenant == who->Tenant() ? sessions_->Live(*who, request->session_id())
                                : sessions_->Running(tenant, request->session_id());
    if (!live.ok()) return previous ? grpc::Status::OK : ToGrpc(live.status());
    absl::StatusOr<GuestMetrics> m = (*live)->vm->channel().Metrics(absl::Now() + absl::Seconds(5));
    if (!m.ok()) return ToGrpc(m.status());
    if (previous || request->once()) {
      GuestMetrics before = previous.value_or(GuestMetrics{});
      v1::MetricsSample sample;
      sample.set_session_id(request->session_id());
      sample.set_unix_ms(NowUnixMs());
      uint64_t total = m->cpu_total_ticks - before.cpu_total_ticks;
      uint64_t busy = m->cpu_busy_ticks - before.cpu_busy_ticks;
      sample.set_cpu_percent(total > 0 ? 100.0 * static_cast<double>(busy) / total : 0);
      sample.set_memory_used_bytes(m->memory_total_bytes - m->memory_available_bytes);
      sample.set_memory_total_bytes(m->memory_total_bytes);
      sample.set_processes(m->processes);
      sample.set_disk_used_bytes(m->disk_used_bytes);
      sample.set_disk_total_bytes(m->disk_total_bytes);
      net::EgressPath::Counters net = sessions_->EgressCounters(tenant, request->session_id());
      sample.set_net_bytes_out(net.bytes_out);
      sample.set_net_bytes_in(net.bytes_in);
      sample.set_net_connections(net.connections);
      sample.set_net_denied(net.denied);
      if (!writer->Write(sample) || request->once()) return grpc::Status::OK;
    }
    previous = *m;
    for (uint32_t waited = 0; waited < interval; waited += 50) {
      if (context->IsCancelled()) return grpc::Status::OK;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

grpc::Status VmsService::List(grpc::ServerContext* context, const v1::ListVmsRequest* request,
                              v1::ListVmsResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (request->all_tenants() && !who->SeesEveryTenant()) return EveryTenantDenied();
  std::vector<std::shared_ptr<LiveSession>> live = sessions_->LiveSessions(
      request->all_tenants() ? SessionEventHub::kEveryTenant : who->Tenant());
  response->set_boots(sessions_->counters().boots);
  response->set_restores(sessions_->counters().restores);
  response->set_snapshots(sessions_->counters().snapshots);
  response->set_pool_takes(sessions_->counters().pool_takes);
  if (who->SeesEveryTenant()) {
    for (const PooledVmInfo& p : sessions_->PooledVms()) {
      v1::PooledVm* vm = response->add_pooled();
      vm->set_image(p.image);
      vm->set_pid(p.pid);
      vm->set_accelerator(p.accelerator);
      vm->set_vcpus(p.shape.vcpus);
      vm->set_memory_bytes(uint64_t{p.shape.memory_mib} << 20);
      vm->set_host_rss_bytes(ProcessRss(p.pid));
    }
  }
  std::vector<uint64_t> before;
  for (const auto& s : live) before.push_back(ProcessTicks(s->vm->pid()));
  constexpr int kSampleMs = 200;
  if (!live.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(kSampleMs));
  double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  for (size_t i = 0; i < live.size(); ++i) {
    const LiveSession& s = *live[i];
    v1::Vm* vm = response->add_vms();
    vm->set_session_id(s.record.id);
    vm->set_tenant(s.record.tenant);
    vm->set_pid(s.vm->pid());
    vm->set_accelerator(s.vm->accelerator());
    vm->set_vcpus(s.record.limits.vcpus);
    uint64_t after = ProcessTicks(s.vm->pid());
    vm->set_host_cpu_percent(
        after >= before[i] ? 100.0 * (after - before[i]) / tick / (kSampleMs / 1000.0) : 0);
    vm->set_host_rss_bytes(ProcessRss(s.vm->pid()));
  }
  return grpc::Status::OK;
}

namespace {

void HostToProto(const providers::HostInfo& info, v1::Host* host) {
  host->set_id(info.id);
  host->set_this_host(info.this_host);
  host->set_vcpus(info.capacity.vcpus);
  host->set_memory_bytes(info.capacity.memory_bytes);
  host->clear_session_ids();
  for (const std::string& id : info.sessions) host->add_session_ids(id);
  host->set_draining(info.draining);
  host->set_up(info.up);
}

}  // namespace

grpc::Status VmsService::Hosts(grpc::ServerContext* context, const v1::ListHostsRequest*,
                               v1::ListHostsResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (!who->SeesEveryTenant()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "only root and read-only operators (airlockd --operator) may see the "
                        "hosts and every tenant's sessions on them");
  }
  absl::StatusOr<std::vector<providers::HostInfo>> hosts = sessions_->Hosts();
  if (!hosts.ok()) return ToGrpc(hosts.status());
  response->set_fleet(sessions_->handoff() != nullptr);
  for (const providers::HostInfo& info : *hosts) HostToProto(info, response->add_hosts());
  return grpc::Status::OK;
}

grpc::Status VmsService::DrainHost(grpc::ServerContext* context,
                                   const v1::DrainHostRequest* request, v1::Host* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  if (!who->SeesEveryTenant()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "only root may drain a host: it pauses every tenant's sessions there");
  }
  SessionHandoff* handoff = sessions_->handoff();
  if (handoff == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this airlockd has no fleet (airlockd --etcd and --blob-store): a "
                        "single host has nowhere to send its sessions; pause them with "
                        "`airlock pause`");
  }
  const std::string& host = request->host();
  bool id_ok =
      !host.empty() && host.size() <= 253 && std::all_of(host.begin(), host.end(), [](char c) {
        return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
               c == '.';
      });
  if (!id_ok) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "give a host id as `airlock hosts` lists it (letters, digits, '-', '_', "
                        "'.'; at most 253)");
  }
  absl::Status set = handoff->SetDraining(host, !request->undo(), who->Name());
  LogIfFailed(
      store_->audit().Audit(*who, who->Tenant(), request->undo() ? "host.undrain" : "host.drain",
                            host, set.ok() ? "ok" : std::string(set.message())),
      "host drain: not audited");
  if (!set.ok()) return ToGrpc(set);
  if (host == handoff->host_id()) sessions_->RefreshDraining();
  absl::StatusOr<std::vector<providers::HostInfo>> hosts = sessions_->Hosts();
  if (!hosts.ok()) return ToGrpc(hosts.status());
  response->set_id(host);
  response->set_draining(!request->undo());
  response->set_up(false);
  for (const providers::HostInfo& info : *hosts) {
    if (info.id == host) HostToProto(info, response);
  }
  return grpc::Status::OK;
}

grpc::Status VmsService::CollectBlobs(grpc::ServerContext* context,
                                      const v1::CollectBlobsRequest* request,
                                      v1::BlobCollection* response) {
  absl::StatusOr<Principal> who =
      Authorize(context, peers_, request->dry_run() ? Access::kRead : Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  if (!who->SeesEveryTenant()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "only root may collect the fleet's blobs (read-only operators: "
                        "--dry-run); the blob store holds every tenant's snapshots");
  }
  SessionHandoff* handoff = sessions_->handoff();
  if (handoff == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this airlockd has no fleet blob store to collect (airlockd --etcd and "
                        "--blob-store); a single host's snapshots are removed with their sessions");
  }
  constexpr uint64_t kMaxGraceSeconds = 365ull * 24 * 3600;
  if (request->grace_seconds() > kMaxGraceSeconds) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the grace is at most a year; give a shorter one");
  }
  uint64_t grace = request->grace_seconds() == 0 ? 3600 : request->grace_seconds();
  absl::StatusOr<SessionHandoff::BlobCollection> run =
      handoff->CollectBlobs(absl::Seconds(grace), request->dry_run());
  if (!request->dry_run()) {
    LogIfFailed(
        store_->audit().Audit(
            *who, who->Tenant(), "blobs.collect", handoff->host_id(),
            run.ok() ? absl::StrCat("ok: ", run->marked.size(), " marked, ", run->removed.size(),
                                    " removed (", run->removed_bytes, " bytes)")
                     : std::string(run.status().message())),
        "blob collection: not audited");
  }
  if (!run.ok()) return ToGrpc(run.status());
  response->set_blobs(run->blobs);
  response->set_referenced(run->referenced);
  response->set_records(run->records);
  response->set_pinned(run->pinned);
  response->set_waiting(run->waiting);
  for (const std::string& digest : run->marked) response->add_marked(digest);
  for (const SessionHandoff::BlobCollection::Removed& r : run->removed) {
    v1::BlobCollection::Removed* removed = response->add_removed();
    removed->set_digest(r.digest);
    removed->set_bytes(r.bytes);
  }
  response->set_removed_bytes(run->removed_bytes);
  response->set_grace_seconds(grace);
  return grpc::Status::OK;
}

namespace {

void ToProto(const ImageInfo& info, v1::Image* image) {
  image->set_name(info.name);
  image->set_digest(info.digest);
  image->set_size_bytes(info.size_bytes);
  image->set_created_unix(info.created);
  image->set_source(info.source);
}

}  // namespace

grpc::Status ImagesService::List(grpc::ServerContext* context, const v1::ListImagesRequest* request,
                                 v1::ListImagesResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  // The operator's images and the caller's own pulls; never another tenant's names.
  absl::StatusOr<std::vector<ImageInfo>> images = sessions_->images().For(*who).List();
  if (!images.ok()) return ToGrpc(images.status());
  for (const ImageInfo& i : *images) ToProto(i, response->add_images());
  return grpc::Status::OK;
}

grpc::Status ImagesService::Pull(grpc::ServerContext* context, const v1::PullImageRequest* request,
                                 grpc::ServerWriter<v1::ImageProgress>* writer) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  const std::string& ref = request->reference();
  if (ref.empty() || ref.size() > 1024) {
    return ToGrpc(absl::InvalidArgumentError(
        "name an image to pull, like python:3.11-slim or ghcr.io/org/tool:1"));
  }
  // At most ten progress messages a second. A client that goes away does not stop the pull:
  // the blobs are the store's, and the next pull of them is free.
  absl::Time shown = absl::InfinitePast();
  bool listening = true;
  auto progress = [&](uint64_t done, uint64_t total) {
    absl::Time now = absl::Now();
    if (!listening || (now - shown < absl::Milliseconds(100) && done < total)) return;
    shown = now;
    v1::ImageProgress p;
    p.set_done_bytes(done);
    p.set_total_bytes(total);
    listening = !context->IsCancelled() && writer->Write(p);
  };
  absl::StatusOr<ImageInfo> info = sessions_->images().Pull(
      *who, ref, {.if_missing = request->if_missing(), .progress = progress});
  if (!info.ok()) return ToGrpc(info.status());
  v1::ImageProgress last;
  ToProto(*info, last.mutable_image());
  writer->Write(last);
  return grpc::Status::OK;
}

grpc::Status ImagesService::Import(grpc::ServerContext* context,
                                   grpc::ServerReader<v1::ImportImageChunk>* reader,
                                   v1::Image* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  v1::ImportImageChunk chunk;
  if (!reader->Read(&chunk)) {
    return ToGrpc(absl::InvalidArgumentError("Import starts with a message naming the image"));
  }
  const std::string name = chunk.name();
  const bool rootfs = chunk.rootfs();
  if (rootfs && name.empty()) {
    return ToGrpc(absl::InvalidArgumentError(
        "a root filesystem tar has no name of its own: give the name to import it as"));
  }
  if (!name.empty()) {
    if (absl::Status s = ImageStore::ValidateName(name); !s.ok()) return ToGrpc(s);
  }
  // What the caller may still add: all of an image for root, the rest of its quota otherwise.
  uint64_t cap = std::min(sessions_->images().AccessFor(*who).max_bytes, kMaxImageBytes);
  absl::StatusOr<UniqueFd> archive = UnnamedFile(paths_.scratch);
  if (!archive.ok()) return ToGrpc(archive.status());
  UploadMessages<v1::ImportImageChunk> messages(context, reader, "nothing was imported");
  uint64_t received = 0;
  for (bool first = true;; first = false) {
    if (!first) {
      if (absl::Status s = messages.Next(&chunk); !s.ok()) return ToGrpc(s);
      if (!chunk.name().empty() || chunk.rootfs()) {
        return ToGrpc(absl::InvalidArgumentError(
            "only the first message of Import names the image and says what it is"));
      }
    }
    if (chunk.data().size() > kMaxFilePiece) {
      return ToGrpc(absl::InvalidArgumentError(
          "a piece of an image is at most 1 MiB; send the archive in more messages"));
    }
    received += chunk.data().size();
    if (received > cap) {
      return ToGrpc(absl::ResourceExhaustedError(absl::StrCat(
          "the archive is larger than ", FormatBytes(cap),
          who->IsHostRoot() ? ", the most an image may be"
                            : ", what your images quota has left (airlock quota shows it)")));
    }
    if (absl::Status s = WriteAll(archive->get(), chunk.data()); !s.ok()) {
      return ToGrpc(sessions_->SayDiskSpace(s));
    }
    if (chunk.last()) break;
  }
  // The unnamed file by its /proc name: nothing to clean up, whatever happens next.
  std::string path = absl::StrCat("/proc/self/fd/", archive->get());
  ImageStore images = sessions_->images().For(*who);
  ImageService::QuotaCheck within_quota = sessions_->images().CheckQuotaAfter(*who);
  absl::StatusOr<ImageInfo> info =
      rootfs ? images.ImportRootfsTar(path, name) : images.ImportArchive(path, name);
  if (info.ok()) {
    if (absl::Status s = within_quota(*info); !s.ok()) info = s;
  }
  LogIfFailed(
      store_->audit().Audit(*who, who->Tenant(), "image.import", info.ok() ? info->name : name,
                            info.ok() ? absl::StrCat("ok; ", info->digest, "; ", received, " bytes")
                                      : absl::StrCat("failed: ", info.status().message())),
      absl::StrCat("image import of ", name, " not audited"));
  if (!info.ok()) return ToGrpc(sessions_->SayDiskSpace(info.status()));
  ToProto(*info, response);
  return grpc::Status::OK;
}

grpc::Status ImagesService::Build(grpc::ServerContext* context,
                                  const v1::BuildImageRequest* request,
                                  grpc::ServerWriter<v1::BuildProgress>* writer) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  ImageBuildSpec spec;
  spec.suite = request->suite();
  spec.packages.assign(request->packages().begin(), request->packages().end());
  spec.npm.assign(request->npm().begin(), request->npm().end());
  spec.env.assign(request->env().begin(), request->env().end());
  spec.tag = request->tag();
  // Every field before anything runs.
  if (absl::Status s = ValidateImageBuild(spec); !s.ok()) return ToGrpc(s);
  // Progress lines as they come; a client that went away stops the build (ImageBuilder says
  // which steps cannot be stopped mid-way).
  bool listening = true;
  auto progress = [&](const std::string& line) {
    if (!listening) return;
    v1::BuildProgress p;
    p.set_line(line);
    listening = !context->IsCancelled() && writer->Write(p);
  };
  auto cancelled = [&] { return context->IsCancelled(); };
  absl::StatusOr<ImageInfo> info = builder_.Build(*who, spec, progress, cancelled);
  LogIfFailed(
      store_->audit().Audit(*who, who->Tenant(), "image.build", spec.tag,
                            info.ok() ? absl::StrCat("ok; ", info->digest, "; debian ", spec.suite)
                                      : absl::StrCat("failed: ", info.status().message())),
      absl::StrCat("image build of ", spec.tag, " not audited"));
  if (!info.ok()) {
    if (!absl::IsCancelled(info.status()) && !absl::IsInvalidArgument(info.status())) {
      LogWarning(absl::StrCat("image build of ", spec.tag, " for ", who->Name(),
                              " failed: ", info.status().message()));
    }
    return ToGrpc(sessions_->SayDiskSpace(info.status()));
  }
  v1::BuildProgress last;
  ToProto(*info, last.mutable_image());
  writer->Write(last);
  return grpc::Status::OK;
}

grpc::Status ImagesService::BuildDockerfile(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::BuildProgress, v1::DockerfileBuildChunk>* stream) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  v1::DockerfileBuildChunk chunk;
  if (!stream->Read(&chunk)) {
    return ToGrpc(absl::InvalidArgumentError(
        "BuildDockerfile starts with a message holding the Dockerfile and the tag"));
  }
  DockerfileBuildSpec spec;
  spec.dockerfile = chunk.dockerfile();
  spec.tag = chunk.tag();
  spec.build_args = {chunk.build_args().begin(), chunk.build_args().end()};
  spec.target = chunk.target();
  spec.no_cache = chunk.no_cache();
  if (absl::Status s = ImageStore::ValidateName(spec.tag); !s.ok()) return ToGrpc(s);
  if (spec.dockerfile.size() > kMaxDockerfileBytes) {
    return ToGrpc(absl::InvalidArgumentError("a Dockerfile is at most 4 MiB"));
  }
  absl::StatusOr<std::vector<EgressGrant>> egress = sessions_->ResolveEgress(
      {chunk.allow().begin(), chunk.allow().end()},
      {chunk.allow_preset().begin(), chunk.allow_preset().end()}, "image build");
  if (!egress.ok()) return ToGrpc(egress.status());
  spec.egress = *egress;
  spec.secrets = FromProto(chunk.secrets());
  // The context, into an unnamed file (nothing to clean up whatever happens); at most what
  // the caller's images may still take.
  uint64_t cap = std::min<uint64_t>(sessions_->images().AccessFor(*who).max_bytes,
                                    kMaxContextBytes + (1ull << 30));
  absl::StatusOr<UniqueFd> tar = UnnamedFile(paths_.scratch);
  if (!tar.ok()) return ToGrpc(tar.status());
  uint64_t received = 0;
  for (bool first = true;; first = false) {
    if (!first) {
      if (context->IsCancelled() || !stream->Read(&chunk)) {
        return ToGrpc(
            absl::CancelledError("the context ended without its last piece; nothing was built"));
      }
      if (!chunk.dockerfile().empty() || !chunk.tag().empty()) {
        return ToGrpc(absl::InvalidArgumentError(
            "only the first message of BuildDockerfile holds the Dockerfile and the tag"));
      }
    }
    if (chunk.context().size() > kMaxFilePiece) {
      return ToGrpc(absl::InvalidArgumentError(
          "a piece of the build context is at most 1 MiB; send it in more messages"));
    }
    received += chunk.context().size();
    if (received > cap) {
      return ToGrpc(absl::ResourceExhaustedError(
          absl::StrCat("the build context is larger than ", FormatBytes(cap),
                       "; leave out what the build does not need with .dockerignore")));
    }
    if (absl::Status s = WriteAll(tar->get(), chunk.context()); !s.ok()) {
      return ToGrpc(sessions_->SayDiskSpace(s));
    }
    if (chunk.last()) break;
  }
  spec.context_tar = absl::StrCat("/proc/self/fd/", tar->get());
  bool listening = true;
  auto progress = [&](const std::string& line) {
    if (!listening) return;
    v1::BuildProgress p;
    p.set_line(line);
    listening = !context->IsCancelled() && stream->Write(p);
  };
  auto cancelled = [&] { return context->IsCancelled(); };
  absl::StatusOr<ImageInfo> info = builder_.BuildDockerfile(*who, spec, progress, cancelled);
  LogIfFailed(store_->audit().Audit(*who, who->Tenant(), "image.build", spec.tag,
                                    info.ok() ? absl::StrCat("ok; ", info->digest, "; Dockerfile")
                                              : absl::StrCat("failed: ", info.status().message())),
              absl::StrCat("image build of ", spec.tag, " not audited"));
  if (!info.ok()) return ToGrpc(sessions_->SayDiskSpace(info.status()));
  v1::BuildProgress last;
  ToProto(*info, last.mutable_image());
  stream->Write(last);
  return grpc::Status::OK;
}

grpc::Status ImagesService::AuthorizeStoreChange(grpc::ServerContext* context, const char* what,
                                                 Principal* who, std::vector<std::string>* in_use) {
  absl::StatusOr<Principal> caller = Authorize(context, peers_, Access::kChange);
  if (!caller.ok()) return ToGrpc(caller.status());
  if (!caller->IsHostRoot()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("only root may ", what, " images (they are the host's)"));
  }
  *who = *caller;
  absl::StatusOr<std::vector<std::string>> digests = sessions_->images().InUse();
  if (!digests.ok()) return ToGrpc(digests.status());
  *in_use = *std::move(digests);
  return grpc::Status::OK;
}

void ImagesService::RemoveTemplatesOf(const std::vector<std::string>& digests) {
  std::string templates = paths_.home + "/templates";
  DIR* dir = opendir(templates.c_str());
  if (dir == nullptr) return;
  std::vector<std::string> stale;
  while (dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    for (const std::string& digest : digests) {
      if (name.rfind(digest.substr(7, 16), 0) == 0) stale.push_back(templates + "/" + name);
    }
  }
  closedir(dir);
  for (const std::string& path : stale)
    LogIfFailed(RemoveTree(path), absl::StrCat("template ", path, " not removed"));
}

grpc::Status ImagesService::Prune(grpc::ServerContext* context,
                                  const v1::PruneImagesRequest* request,
                                  v1::PruneImagesResponse* response) {
  Principal who;
  std::vector<std::string> in_use;
  if (grpc::Status s = AuthorizeStoreChange(context, "prune", &who, &in_use); !s.ok()) return s;
  ImageStore images = sessions_->images().Operators();
  absl::StatusOr<ImageStore::PruneResult> pruned = images.Prune(in_use);
  if (!pruned.ok()) return ToGrpc(pruned.status());
  RemoveTemplatesOf(pruned->removed);
  for (const std::string& d : pruned->removed) response->add_removed(d);
  response->set_freed_bytes(pruned->freed_bytes);
  LogIfFailed(store_->audit().Audit(who, who.Tenant(), "images.prune", "",
                                    absl::StrCat(pruned->removed.size(), " removed, ",
                                                 pruned->freed_bytes, " bytes")),
              "image prune not audited");
  return grpc::Status::OK;
}

grpc::Status ImagesService::Export(grpc::ServerContext* context,
                                   const v1::ExportImageRequest* request,
                                   grpc::ServerWriter<v1::ExportImageChunk>* writer) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  absl::StatusOr<ImageInfo> info = sessions_->images().For(*who).Resolve(request->name());
  if (!info.ok()) return ToGrpc(info.status());
  if (absl::Status s = MakeDirectories(paths_.scratch, 0700); !s.ok()) return ToGrpc(s);
  std::string pending;
  auto send = [&](absl::string_view bytes) -> absl::Status {
    pending.append(bytes.data(), bytes.size());
    while (pending.size() >= kMaxFilePiece || (bytes.empty() && !pending.empty())) {
      v1::ExportImageChunk chunk;
      size_t n = std::min(pending.size(), kMaxFilePiece);
      chunk.set_data(pending.data(), n);
      if (context->IsCancelled() || !writer->Write(chunk)) {
        return absl::CancelledError("the client stopped reading the image");
      }
      pending.erase(0, n);
    }
    return absl::OkStatus();
  };
  absl::Status exported = ExportOciLayout(*info, info->name, paths_.scratch, send);
  if (exported.ok()) exported = send("");  // what is left
  return ToGrpc(exported);
}

grpc::Status ImagesService::Remove(grpc::ServerContext* context,
                                   const v1::RemoveImagesRequest* request,
                                   v1::RemoveImagesResponse* response) {
  Principal who;
  std::vector<std::string> in_use;
  if (grpc::Status s = AuthorizeStoreChange(context, "remove", &who, &in_use); !s.ok()) return s;
  if (request->names().empty()) {
    return ToGrpc(absl::InvalidArgumentError("name at least one image to remove"));
  }
  ImageStore images = sessions_->images().Operators();
  // Every name first: a typo removes nothing.
  for (const std::string& name : request->names()) {
    absl::StatusOr<ImageInfo> info = images.Resolve(name);
    if (!info.ok() && info.status().code() != absl::StatusCode::kDataLoss) {
      return ToGrpc(info.status());
    }
  }
  for (const std::string& name : request->names()) {
    absl::StatusOr<ImageStore::RemoveResult> removed = images.Remove(name, in_use);
    if (!removed.ok()) return ToGrpc(removed.status());
    if (removed->freed) RemoveTemplatesOf({removed->digest});
    v1::RemoveImagesResponse::Removed* out = response->add_images();
    out->set_name(name);
    out->set_digest(removed->digest);
    out->set_freed(removed->freed);
    out->set_freed_bytes(removed->freed_bytes);
    out->set_sessions(
        static_cast<uint32_t>(std::count(in_use.begin(), in_use.end(), removed->digest)));
    LogIfFailed(store_->audit().Audit(
                    who, who.Tenant(), "images.remove", "",
                    absl::StrCat(name, " ", removed->digest,
                                 removed->freed ? " freed" : " kept for sessions or other tags")),
                absl::StrCat("removal of image ", name, " not audited"));
  }
  return grpc::Status::OK;
}

}  // namespace airlock

namespace airlock {

grpc::Status ApiKeysService::Create(grpc::ServerContext* context,
                                    const v1::CreateApiKeyRequest* request, v1::ApiKey* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  absl::StatusOr<std::string> key = store_->api_keys().Create(*who, request->name());
  if (!key.ok()) return ToGrpc(key.status());
  response->set_name(request->name());
  response->set_key(*key);
  response->set_created_unix_ms(NowUnixMs());
  return grpc::Status::OK;
}

grpc::Status ApiKeysService::List(grpc::ServerContext* context, const v1::ListApiKeysRequest*,
                                  v1::ListApiKeysResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  absl::StatusOr<std::vector<ApiKeyInfo>> keys = store_->api_keys().List(who->Tenant());
  if (!keys.ok()) return ToGrpc(keys.status());
  for (const ApiKeyInfo& k : *keys) {
    v1::ApiKey* out = response->add_keys();
    out->set_name(k.name);
    out->set_created_unix_ms(k.created_ms);
  }
  return grpc::Status::OK;
}

grpc::Status ApiKeysService::Remove(grpc::ServerContext* context,
                                    const v1::RemoveApiKeyRequest* request,
                                    v1::RemoveApiKeyResponse*) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  return ToGrpc(store_->api_keys().Remove(*who, request->name()));
}

}  // namespace airlock
