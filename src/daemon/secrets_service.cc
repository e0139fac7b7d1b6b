// The Secrets service: a session's secret bindings, never their values.
#include "absl/strings/str_cat.h"
#include "src/daemon/airlock_service.h"

namespace airlock {

grpc::Status SecretsService::Fill(const Principal& who, const SessionRecord& record,
                                  v1::ListSecretsResponse* out) const {
  absl::StatusOr<std::map<std::string, int64_t>> used =
      store_->net_events().LastSecretUses(who.Tenant(), record.id);
  if (!used.ok()) return ToGrpc(used.status());
  out->set_session_id(record.id);
  for (const SecretGrant& g : record.secrets) {
    v1::SecretInfo* info = out->add_secrets();
    info->set_name(g.spec.name);
    info->set_source(g.spec.source);
    for (const std::string& h : g.spec.hosts) info->add_hosts(h);
    info->set_body(g.spec.body);
    info->set_placeholder(g.placeholder);
    info->set_available(sessions_->SecretAvailable(record.id, g.spec.name));
    auto it = used->find(g.spec.name);
    info->set_last_used_unix_ms(it == used->end() ? 0 : it->second);
  }
  return grpc::Status::OK;
}

grpc::Status SecretsService::List(grpc::ServerContext* context,
                                  const v1::ListSecretsRequest* request,
                                  v1::ListSecretsResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(), &v1::Secrets::Stub::List,
                           *request, response)) {
    return *f;
  }
  absl::StatusOr<SessionRecord> record =
      store_->sessions().Get(who->Tenant(), request->session_id());
  if (!record.ok()) return ToGrpc(record.status());
  return Fill(*who, *record, response);
}

grpc::Status SecretsService::Set(grpc::ServerContext* context, const v1::SetSecretsRequest* request,
                                 v1::ListSecretsResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(), &v1::Secrets::Stub::Set,
                           *request, response)) {
    return *f;
  }
  if (request->secrets().empty()) {
    return ToGrpc(absl::InvalidArgumentError("name a secret to set: NAME=SOURCE@HOST"));
  }
  absl::StatusOr<SessionRecord> record =
      sessions_->SetSecrets(*who, request->session_id(), FromProto(request->secrets()));
  if (!record.ok()) return ToGrpc(record.status());
  return Fill(*who, *record, response);
}

grpc::Status SecretsService::Remove(grpc::ServerContext* context,
                                    const v1::RemoveSecretsRequest* request,
                                    v1::ListSecretsResponse* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(), &v1::Secrets::Stub::Remove,
                           *request, response)) {
    return *f;
  }
  if (request->names().empty()) {
    return ToGrpc(absl::InvalidArgumentError("name a secret to remove"));
  }
  absl::StatusOr<SessionRecord> record = sessions_->RemoveSecrets(
      *who, request->session_id(), {request->names().begin(), request->names().end()});
  if (!record.ok()) return ToGrpc(record.status());
  return Fill(*who, *record, response);
}

}  // namespace airlock
