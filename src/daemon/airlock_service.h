// The gRPC services of airlockd (proto/airlock/v1/airlock.proto). Each call first resolves the
// caller's Principal from its connection; requests are client input and are checked before
// use. Thread-safe: gRPC's sync server calls these from its own threads.
#ifndef AIRLOCK_DAEMON_AIRLOCK_SERVICE_H_
#define AIRLOCK_DAEMON_AIRLOCK_SERVICE_H_

#include "proto/airlock/v1/airlock.grpc.pb.h"
#include "src/common/host_paths.h"
#include "src/daemon/exec_runner.h"
#include "src/daemon/exposures.h"
#include "src/daemon/fleet_forward.h"
#include "src/daemon/image_builds.h"
#include "src/daemon/port_forward.h"
#include "src/daemon/session_events.h"
#include "src/daemon/session_files.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/daemon/unix_listener.h"
#include "src/daemon/workspace_uploads.h"

namespace airlock {

class SessionsService final : public v1::Sessions::Service {
 public:
  SessionsService(SessionManager* sessions, StateStore* store, const PeerRegistry* peers,
                  WorkspaceUploads* uploads, SessionEventHub* events)
      : sessions_(sessions),
        store_(store),
        peers_(peers),
        uploads_(uploads),
        events_(events),
        files_(sessions, store),
        exec_(sessions, store, uploads),
        forwarder_(sessions, store) {}

  grpc::Status Create(grpc::ServerContext* context, const v1::CreateSessionRequest* request,
                      v1::Session* response) override;
  grpc::Status Get(grpc::ServerContext* context, const v1::GetSessionRequest* request,
                   v1::Session* response) override;
  grpc::Status List(grpc::ServerContext* context, const v1::ListSessionsRequest* request,
                    v1::ListSessionsResponse* response) override;
  grpc::Status Exec(grpc::ServerContext* context,
                    grpc::ServerReaderWriter<v1::ExecResponse, v1::ExecRequest>* stream) override;
  grpc::Status Remove(grpc::ServerContext* context, const v1::RemoveSessionRequest* request,
                      v1::RemoveSessionResponse* response) override;
  grpc::Status Logs(grpc::ServerContext* context, const v1::LogsRequest* request,
                    grpc::ServerWriter<v1::LogEntry>* writer) override;
  grpc::Status Metrics(grpc::ServerContext* context, const v1::MetricsRequest* request,
                       grpc::ServerWriter<v1::MetricsSample>* writer) override;
  grpc::Status Pause(grpc::ServerContext* context, const v1::PauseSessionRequest* request,
                     v1::Session* response) override;
  grpc::Status Resume(grpc::ServerContext* context, const v1::ResumeSessionRequest* request,
                      v1::Session* response) override;
  grpc::Status Quota(grpc::ServerContext* context, const v1::GetQuotaRequest* request,
                     v1::QuotaReport* response) override;
  grpc::Status Timeline(grpc::ServerContext* context, const v1::TimelineRequest* request,
                        grpc::ServerWriter<v1::TimelineEvent>* writer) override;
  grpc::Status Fork(grpc::ServerContext* context, const v1::ForkSessionRequest* request,
                    v1::ForkSessionResponse* response) override;
  grpc::Status WriteFile(grpc::ServerContext* context, const v1::WriteFileRequest* request,
                         v1::WriteFileResponse* response) override;
  grpc::Status ReadFile(grpc::ServerContext* context, const v1::ReadFileRequest* request,
                        v1::ReadFileResponse* response) override;
  grpc::Status WriteFileStream(grpc::ServerContext* context,
                               grpc::ServerReader<v1::WriteFileChunk>* reader,
                               v1::WriteFileResponse* response) override;
  grpc::Status ReadFileStream(grpc::ServerContext* context,
                              const v1::ReadFileStreamRequest* request,
                              grpc::ServerWriter<v1::ReadFileChunk>* writer) override;
  grpc::Status ForwardPort(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::PortForwardResponse, v1::PortForwardRequest>* stream) override;
  grpc::Status Watch(grpc::ServerContext* context, const v1::WatchRequest* request,
                     grpc::ServerWriter<v1::SessionEvent>* writer) override;
  grpc::Status Expose(grpc::ServerContext* context, const v1::ExposeRequest* request,
                      v1::Exposure* response) override;
  grpc::Status ListExposures(grpc::ServerContext* context, const v1::ListExposuresRequest* request,
                             v1::ListExposuresResponse* response) override;
  grpc::Status Unexpose(grpc::ServerContext* context, const v1::UnexposeRequest* request,
                        v1::UnexposeResponse* response) override;

  // Guest ports as URLs; before serving (required).
  void set_exposures(Exposures* exposures) { exposures_ = exposures; }
  // In a fleet, calls for a session another host runs go there (fleet_forward.h); before
  // serving.
  void set_fleet(FleetForwarder* fleet) { fleet_ = fleet; }

 private:
  SessionManager* sessions_;
  StateStore* store_;
  const PeerRegistry* peers_;
  WorkspaceUploads* uploads_;
  SessionEventHub* events_;
  SessionFiles files_;
  ExecRunner exec_;
  PortForwarder forwarder_;
  Exposures* exposures_ = nullptr;
  FleetForwarder* fleet_ = nullptr;
};

// Workspaces: uploads of captured projects, and a session's changes, bundles and syncs, thin
// over session_workspace.h.
class WorkspacesService final : public v1::Workspaces::Service {
 public:
  WorkspacesService(SessionManager* sessions, StateStore* store, const PeerRegistry* peers,
                    WorkspaceUploads* uploads, std::string scratch)
      : sessions_(sessions),
        store_(store),
        peers_(peers),
        uploads_(uploads),
        scratch_(std::move(scratch)) {}
  grpc::Status Upload(grpc::ServerContext* context,
                      grpc::ServerReader<v1::WorkspaceUploadChunk>* reader,
                      v1::WorkspaceUploadReply* response) override;
  grpc::Status Get(grpc::ServerContext* context, const v1::GetWorkspaceRequest* request,
                   v1::WorkspaceInfo* response) override;
  grpc::Status Diff(grpc::ServerContext* context, const v1::WorkspaceDiffRequest* request,
                    grpc::ServerWriter<v1::WorkspaceChange>* writer) override;
  grpc::Status Bundle(grpc::ServerContext* context, const v1::WorkspaceBundleRequest* request,
                      grpc::ServerWriter<v1::WorkspaceBundleChunk>* writer) override;
  grpc::Status Sync(grpc::ServerContext* context,
                    grpc::ServerReader<v1::WorkspaceSyncChunk>* reader,
                    v1::WorkspaceSyncReply* response) override;

  // In a fleet, calls for a session another host runs go there (fleet_forward.h).
  void set_fleet(FleetForwarder* fleet) { fleet_ = fleet; }

 private:
  // The session's record and its base manifest (NOT_FOUND / FAILED_PRECONDITION without one).
  absl::StatusOr<v1::WorkspaceInfo> LoadBase(const SessionRecord& record);
  SessionManager* sessions_;
  StateStore* store_;
  const PeerRegistry* peers_;
  WorkspaceUploads* uploads_;
  std::string scratch_;
  FleetForwarder* fleet_ = nullptr;
};

class VmsService final : public v1::Vms::Service {
 public:
  VmsService(SessionManager* sessions, StateStore* store, const PeerRegistry* peers)
      : sessions_(sessions), store_(store), peers_(peers) {}
  grpc::Status List(grpc::ServerContext* context, const v1::ListVmsRequest* request,
                    v1::ListVmsResponse* response) override;
  grpc::Status Hosts(grpc::ServerContext* context, const v1::ListHostsRequest* request,
                     v1::ListHostsResponse* response) override;
  grpc::Status DrainHost(grpc::ServerContext* context, const v1::DrainHostRequest* request,
                         v1::Host* response) override;
  grpc::Status CollectBlobs(grpc::ServerContext* context, const v1::CollectBlobsRequest* request,
                            v1::BlobCollection* response) override;

 private:
  SessionManager* sessions_;
  StateStore* store_;
  const PeerRegistry* peers_;
};

class ImagesService final : public v1::Images::Service {
 public:
  ImagesService(HostPaths paths, SessionManager* sessions, StateStore* store,
                const PeerRegistry* peers)
      : paths_(std::move(paths)),
        sessions_(sessions),
        store_(store),
        peers_(peers),
        builder_(paths_, sessions, store,
                 [this](const std::vector<std::string>& digests) { RemoveTemplatesOf(digests); }) {}
  // What builds of an earlier airlockd left (ImageBuilder::RemoveLeftovers). Call at start.
  void RemoveBuildLeftovers() { builder_.RemoveLeftovers(); }
  grpc::Status List(grpc::ServerContext* context, const v1::ListImagesRequest* request,
                    v1::ListImagesResponse* response) override;
  grpc::Status Pull(grpc::ServerContext* context, const v1::PullImageRequest* request,
                    grpc::ServerWriter<v1::ImageProgress>* writer) override;
  grpc::Status Import(grpc::ServerContext* context,
                      grpc::ServerReader<v1::ImportImageChunk>* reader,
                      v1::Image* response) override;
  grpc::Status Build(grpc::ServerContext* context, const v1::BuildImageRequest* request,
                     grpc::ServerWriter<v1::BuildProgress>* writer) override;
  grpc::Status BuildDockerfile(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::BuildProgress, v1::DockerfileBuildChunk>* stream) override;
  grpc::Status Prune(grpc::ServerContext* context, const v1::PruneImagesRequest* request,
                     v1::PruneImagesResponse* response) override;
  grpc::Status Export(grpc::ServerContext* context, const v1::ExportImageRequest* request,
                      grpc::ServerWriter<v1::ExportImageChunk>* writer) override;
  grpc::Status Remove(grpc::ServerContext* context, const v1::RemoveImagesRequest* request,
                      v1::RemoveImagesResponse* response) override;

 private:
  // Only root may change the image store: it is the host's, shared by every tenant. Fills
  // *in_use with the digests of the images sessions (creating, running, paused) use.
  grpc::Status AuthorizeStoreChange(grpc::ServerContext* context, const char* what, Principal* who,
                                    std::vector<std::string>* in_use);
  // Removes the templates made from these images (their names start with the digest).
  void RemoveTemplatesOf(const std::vector<std::string>& digests);
  HostPaths paths_;
  SessionManager* sessions_;
  StateStore* store_;
  const PeerRegistry* peers_;
  ImageBuilder builder_;
};

// Egress of a session: thin over SessionManager's policy and the state store's event log.
class NetworkService final : public v1::Network::Service {
 public:
  NetworkService(SessionManager* sessions, StateStore* store, const PeerRegistry* peers)
      : sessions_(sessions), store_(store), peers_(peers) {}
  grpc::Status Get(grpc::ServerContext* context, const v1::GetNetworkRequest* request,
                   v1::NetworkPolicy* response) override;
  grpc::Status Change(grpc::ServerContext* context, const v1::ChangeNetworkRequest* request,
                      v1::NetworkPolicy* response) override;
  grpc::Status Log(grpc::ServerContext* context, const v1::NetworkLogRequest* request,
                   grpc::ServerWriter<v1::NetworkEvent>* writer) override;

  // In a fleet, calls for a session another host runs go there (fleet_forward.h).
  void set_fleet(FleetForwarder* fleet) { fleet_ = fleet; }

 private:
  void Fill(const SessionRecord& record, v1::NetworkPolicy* out) const;
  SessionManager* sessions_;
  StateStore* store_;
  const PeerRegistry* peers_;
  FleetForwarder* fleet_ = nullptr;
};

// Secrets of a session: names, sources, hosts and placeholders (never values), thin over
// SessionManager.
class SecretsService final : public v1::Secrets::Service {
 public:
  SecretsService(SessionManager* sessions, StateStore* store, const PeerRegistry* peers)
      : sessions_(sessions), store_(store), peers_(peers) {}
  grpc::Status List(grpc::ServerContext* context, const v1::ListSecretsRequest* request,
                    v1::ListSecretsResponse* response) override;
  grpc::Status Set(grpc::ServerContext* context, const v1::SetSecretsRequest* request,
                   v1::ListSecretsResponse* response) override;
  grpc::Status Remove(grpc::ServerContext* context, const v1::RemoveSecretsRequest* request,
                      v1::ListSecretsResponse* response) override;

  // In a fleet, calls for a session another host runs go there (fleet_forward.h).
  void set_fleet(FleetForwarder* fleet) { fleet_ = fleet; }

 private:
  grpc::Status Fill(const Principal& who, const SessionRecord& record,
                    v1::ListSecretsResponse* out) const;
  SessionManager* sessions_;
  StateStore* store_;
  const PeerRegistry* peers_;
  FleetForwarder* fleet_ = nullptr;
};

// The host's audit log, for root over the socket: thin over the state store's chain.
class AuditService final : public v1::Audit::Service {
 public:
  AuditService(StateStore* store, const PeerRegistry* peers) : store_(store), peers_(peers) {}
  grpc::Status List(grpc::ServerContext* context, const v1::ListAuditRequest* request,
                    grpc::ServerWriter<v1::AuditRecord>* writer) override;
  grpc::Status Verify(grpc::ServerContext* context, const v1::VerifyAuditRequest* request,
                      v1::AuditVerification* response) override;

 private:
  // The caller, if it is root over the socket; else the status to answer with.
  grpc::Status Authorize(grpc::ServerContext* context, const char* what) const;
  StateStore* store_;
  const PeerRegistry* peers_;
};

// API keys for the gateway's E2B-compatible API: the caller's own tenant's; read-only operators
// may not make any.
class ApiKeysService final : public v1::ApiKeys::Service {
 public:
  ApiKeysService(StateStore* store, const PeerRegistry* peers) : store_(store), peers_(peers) {}
  grpc::Status Create(grpc::ServerContext* context, const v1::CreateApiKeyRequest* request,
                      v1::ApiKey* response) override;
  grpc::Status List(grpc::ServerContext* context, const v1::ListApiKeysRequest* request,
                    v1::ListApiKeysResponse* response) override;
  grpc::Status Remove(grpc::ServerContext* context, const v1::RemoveApiKeyRequest* request,
                      v1::RemoveApiKeyResponse* response) override;

 private:
  StateStore* store_;
  const PeerRegistry* peers_;
};

// Limits as requested; zero (and an unset idle timeout) take the defaults in ResolveLimits.
SessionLimits FromProto(const v1::Limits& limits);
// Secret bindings as a request carries them.
std::vector<SecretRequest> FromProto(
    const google::protobuf::RepeatedPtrField<v1::SecretBinding>& bindings);
// Volume attachments as a request carries them.
std::vector<VolumeRequest> FromProto(
    const google::protobuf::RepeatedPtrField<v1::VolumeMount>& volumes);

// What a call does. Every handler says which before it does anything: a read-only operator
// (operators.h) may make kRead calls only.
enum class Access { kRead, kChange };

// The caller of a call: Unix callers by their peer credentials, TCP callers by a verified bearer
// token or the common name of the verified client certificate; never from anything the request
// says. UNAUTHENTICATED when it cannot tell; PERMISSION_DENIED for a read-only operator's kChange.
absl::StatusOr<Principal> Authorize(grpc::ServerContext* context, const PeerRegistry* peers,
                                    Access access);

// The tenant a session id is looked up in for `who`: its own, or for a read-only operator (who
// owns nothing) the tenant that holds the session, if any. Root is a tenant like any other
// here: it sees others' sessions only when it asks for all_tenants.
std::string TenantForLookup(const Principal& who, StateStore& store, const std::string& id);

// absl::Status -> grpc::Status with the same code and message.
grpc::Status ToGrpc(const absl::Status& status);

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_AIRLOCK_SERVICE_H_
