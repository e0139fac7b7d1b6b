// The Network service: a session's egress rules and the log of what its proxy decided.
#include <chrono>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/daemon/airlock_service.h"
#include "src/net/egress_rule.h"

namespace airlock {

void NetworkService::Fill(const SessionRecord& record, v1::NetworkPolicy* out) const {
  out->set_session_id(record.id);
  out->set_version(record.egress_version);
  int64_t now = NowUnixMs();
  for (const EgressGrant& g : record.egress) {
    if (g.expires_ms != 0 && g.expires_ms <= now) continue;
    v1::NetworkRule* rule = out->add_rules();
    rule->set_rule(g.rule);
    rule->set_source(g.source);
    rule->set_expires_unix_ms(g.expires_ms);
    rule->set_deny(g.deny);
  }
  for (const net::EgressCeiling::Line& line : sessions_->ceiling()->lines()) {
    out->add_ceiling(absl::StrCat(line.allow ? "allow " : "deny ", line.rule.ToString()));
  }
}

grpc::Status NetworkService::Get(grpc::ServerContext* context, const v1::GetNetworkRequest* request,
                                 v1::NetworkPolicy* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(), &v1::Network::Stub::Get,
                           *request, response)) {
    return *f;
  }
  absl::StatusOr<SessionRecord> record =
      store_->sessions().Get(who->Tenant(), request->session_id());
  if (!record.ok()) return ToGrpc(record.status());
  Fill(*record, response);
  return grpc::Status::OK;
}

grpc::Status NetworkService::Change(grpc::ServerContext* context,
                                    const v1::ChangeNetworkRequest* request,
                                    v1::NetworkPolicy* response) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kChange);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f =
          ForwardElsewhere(fleet_, context, *who, request->session_id(), &v1::Network::Stub::Change,
                           *request, response)) {
    return *f;
  }
  double ttl = request->ttl_seconds();
  if (!std::isfinite(ttl) || ttl < 0 || ttl > 366.0 * 24 * 3600) {
    return ToGrpc(absl::InvalidArgumentError("--ttl needs a duration between 1s and 366 days"));
  }
  int64_t expires = ttl > 0 ? NowUnixMs() + static_cast<int64_t>(ttl * 1000) : 0;
  absl::StatusOr<std::vector<EgressGrant>> add = sessions_->ResolveEgress(
      {request->allow().begin(), request->allow().end()},
      {request->allow_preset().begin(), request->allow_preset().end()}, "allow");
  if (!add.ok()) return ToGrpc(add.status());
  for (const std::string& text : request->deny()) {
    absl::StatusOr<net::EgressRule> rule =
        net::ParseEgressRule(text, net::RuleContext::kCeilingDeny);
    if (!rule.ok()) return ToGrpc(rule.status());
    add->push_back({rule->ToString(), "deny", 0, true});
  }
  for (EgressGrant& g : *add) g.expires_ms = expires;
  std::vector<std::string> remove(request->remove().begin(), request->remove().end());
  if (add->empty() && remove.empty()) {
    return ToGrpc(absl::InvalidArgumentError("name a rule to allow, deny or remove"));
  }
  std::string action = !request->deny().empty() ? "network.deny"
                       : !request->allow().empty() || !request->allow_preset().empty()
                           ? "network.allow"
                           : "network.rm";
  absl::StatusOr<SessionRecord> record =
      sessions_->ChangeEgress(*who, request->session_id(), *add, remove, action);
  if (!record.ok()) return ToGrpc(record.status());
  Fill(*record, response);
  return grpc::Status::OK;
}

grpc::Status NetworkService::Log(grpc::ServerContext* context, const v1::NetworkLogRequest* request,
                                 grpc::ServerWriter<v1::NetworkEvent>* writer) {
  absl::StatusOr<Principal> who = Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckSessionId(request->session_id()); !s.ok()) return ToGrpc(s);
  if (std::optional<grpc::Status> f = ForwardElsewhere(fleet_, context, *who, request->session_id(),
                                                       &v1::Network::Stub::Log, *request, writer)) {
    return *f;
  }
  absl::StatusOr<SessionRecord> session =
      store_->sessions().Get(who->Tenant(), request->session_id());
  if (!session.ok()) return ToGrpc(session.status());
  sessions_->FlushEgressEvents(*who, request->session_id());
  int64_t after = 0;
  uint32_t tail = request->tail();
  for (;;) {
    absl::StatusOr<std::vector<net::NetEvent>> events =
        store_->net_events().Read(who->Tenant(), request->session_id(), after, tail);
    if (!events.ok()) return ToGrpc(events.status());
    tail = 0;
    for (const net::NetEvent& e : *events) {
      v1::NetworkEvent out;
      out.set_seq(e.seq);
      out.set_unix_ms(e.unix_ms);
      out.set_kind(e.kind);
      out.set_name(e.name);
      out.set_address(e.address);
      out.set_port(e.port);
      out.set_allowed(e.allowed);
      out.set_rule(e.rule);
      out.set_reason(e.reason);
      out.set_bytes_out(e.bytes_out);
      out.set_bytes_in(e.bytes_in);
      out.set_repeats(e.repeats);
      out.set_last_unix_ms(e.last_ms);
      if (!writer->Write(out)) return grpc::Status::CANCELLED;
      after = e.seq;
    }
    if (events->size() >= 4096) continue;  // more pages
    if (!request->follow() || context->IsCancelled()) return grpc::Status::OK;
    if (events->empty()) {
      // Following ends with the session; a paused one may come back, so it is followed on.
      absl::StatusOr<SessionRecord> now =
          store_->sessions().Get(who->Tenant(), request->session_id());
      if (!now.ok() || now->state == SessionState::kStopped ||
          now->state == SessionState::kFailed) {
        return grpc::Status::OK;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
}

}  // namespace airlock
