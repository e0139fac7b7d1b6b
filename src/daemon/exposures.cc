#include "src/daemon/exposures.h"

#include "absl/cleanup/cleanup.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/common/log.h"
#include "src/common/sha256.h"

namespace airlock {
namespace {

// The gateway's connection as a forwarded port's client: the head read so far first, then what
// the client sends; the guest server's bytes back as they come. A reset before the server sent
// anything is answered 502 with why.
class GatewayClient final : public PortForwardClient {
 public:
  explicit GatewayClient(gateway::GatewayConnection& connection) : connection_(connection) {}

  bool Read(v1::PortForwardRequest* message) override {
    message->Clear();
    if (std::string head = connection_.TakeBuffered(); !head.empty()) {
      message->set_data(std::move(head));
      return true;
    }
    if (ended_) return false;
    char buf[64 * 1024];
    ssize_t n = connection_.Read(buf, sizeof buf);
    if (n > 0) {
      message->set_data(buf, static_cast<size_t>(n));
      return true;
    }
    ended_ = true;
    if (n < 0) {
      failed_ = true;
      return false;
    }
    message->set_eof(true);
    return true;
  }
  bool Write(const v1::PortForwardResponse& response) override {
    switch (response.kind_case()) {
      case v1::PortForwardResponse::kData:
        return connection_.Write(response.data());
      case v1::PortForwardResponse::kEof:
        connection_.EndWrite();
        return true;
      case v1::PortForwardResponse::kReset:
        if (!connection_.Respond(
                502, "Bad Gateway",
                absl::StrCat("airlockd's gateway could not reach the server in the "
                             "session: ",
                             response.reset()))) {
          connection_.Cut();  // halfway through the server's answer: the client sees it cut
        } else {
          connection_.EndWrite();
        }
        return true;
      default:
        return true;
    }
  }
  bool Cancelled() override { return failed_ || connection_.cut(); }
  void Cancel() override { connection_.Cut(); }

 private:
  gateway::GatewayConnection& connection_;
  bool ended_ = false;
  std::atomic<bool> failed_{false};
};

}  // namespace

absl::Status Exposures::CheckPort(uint32_t port) const {
  if (port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port ", port, " is not a TCP port; give one from 1 to 65535"));
  }
  return absl::OkStatus();
}

ExposureView Exposures::View(const Exposure& e) const {
  ExposureView view{.exposure = e};
  if (gateway_ != nullptr) {
    view.url = gateway_->ExposureUrl(e.port, e.session_id);
    view.host = gateway::ExposureHost(e.port, e.session_id, gateway_->domain());
    if (!e.is_public) absl::StrAppend(&view.url, "?", gateway::kTokenParameter, "=", e.token);
  }
  return view;
}

absl::StatusOr<ExposureView> Exposures::Expose(const Principal& who, const std::string& id,
                                               uint32_t port, bool is_public) {
  if (absl::Status s = CheckSessionId(id); !s.ok()) return s;
  if (absl::Status s = CheckPort(port); !s.ok()) return s;
  if (who.read_only_operator) {
    return absl::PermissionDeniedError("a read-only operator cannot expose ports");
  }
  if (gateway_ == nullptr) {
    return absl::FailedPreconditionError(
        "airlockd serves no HTTP gateway: start it with --http-listen ADDRESS:PORT (its default, "
        "127.0.0.1:8790, was taken or turned off); `airlock port-forward` works without one");
  }
  if (is_public && !allow_public_) {
    return absl::PermissionDeniedError(
        "this airlockd does not allow public ports (its operator started it with --http-public "
        "deny): expose it with a token (leave out --public)");
  }
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(who.Tenant(), id);
  if (!record.ok()) return record.status();
  if (record->state != SessionState::kRunning && record->state != SessionState::kPaused) {
    return absl::FailedPreconditionError(absl::StrCat("session ", id, " is ",
                                                      SessionStateName(record->state),
                                                      "; only a running or paused session's "
                                                      "ports can be exposed"));
  }
  absl::StatusOr<Exposure> e =
      store_->exposures().Put(who, who.Tenant(), id, static_cast<uint16_t>(port), is_public);
  if (!e.ok()) return e.status();
  return View(*e);
}

absl::StatusOr<std::vector<ExposureView>> Exposures::List(const Principal& who,
                                                          const std::string& id) {
  if (absl::Status s = CheckSessionId(id); !s.ok()) return s;
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(who.Tenant(), id);
  if (!record.ok()) return record.status();
  absl::StatusOr<std::vector<Exposure>> all = store_->exposures().List(who.Tenant(), id);
  if (!all.ok()) return all.status();
  std::vector<ExposureView> out;
  for (const Exposure& e : *all) out.push_back(View(e));
  return out;
}

absl::Status Exposures::Unexpose(const Principal& who, const std::string& id, uint32_t port) {
  if (absl::Status s = CheckSessionId(id); !s.ok()) return s;
  if (absl::Status s = CheckPort(port); !s.ok()) return s;
  if (who.read_only_operator) {
    return absl::PermissionDeniedError("a read-only operator cannot change exposures");
  }
  if (absl::StatusOr<SessionRecord> record = store_->sessions().Get(who.Tenant(), id);
      !record.ok()) {
    return record.status();
  }
  if (absl::Status s =
          store_->exposures().Remove(who, who.Tenant(), id, static_cast<uint16_t>(port));
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  if (auto it = open_.find({id, static_cast<uint16_t>(port)}); it != open_.end()) {
    for (gateway::GatewayConnection* c : it->second) c->Cut();
  }
  return absl::OkStatus();
}

void Exposures::Serve(const gateway::GatewayRequest& request,
                      gateway::GatewayConnection& connection) {
  if (fleet_ != nullptr &&
      fleet_->Relay(request.session_id, gateway_ != nullptr ? gateway_->domain() : "",
                    connection)) {
    return;
  }
  if (api_ != nullptr && api_->ServeEnvd(request, connection)) return;
  absl::StatusOr<std::optional<Exposure>> found =
      store_->exposures().Find(request.session_id, request.port);
  if (!found.ok()) {
    LogError(absl::StrCat("gateway: ", found.status().message()));
    connection.Respond(503, "Service Unavailable", "airlockd could not read its state; try again");
    return;
  }
  if (!found->has_value() && api_ != nullptr) {
    *found = api_->SandboxPort(request.session_id, request.port);
  }
  if (!found->has_value()) {
    connection.Respond(404, "Not Found",
                       absl::StrCat("port ", request.port, " of session ", request.session_id,
                                    " is not exposed (its owner runs `airlock expose ",
                                    request.session_id, " ", request.port, "`)"));
    return;
  }
  const Exposure& e = **found;
  bool by_query = SecretEquals(request.query_token, e.token);
  bool admitted = (e.is_public && allow_public_) || by_query;
  for (const std::string& token : request.tokens)
    admitted = admitted || SecretEquals(token, e.token);
  if (const std::string* traffic = request.Header("e2b-traffic-access-token"); traffic != nullptr) {
    admitted = admitted || SecretEquals(*traffic, e.token);  // E2B's SDKs send it so
  }
  if (!admitted) {
    refused_++;
    bool none = request.query_token.empty() && request.tokens.empty();
    connection.Respond(
        401, "Unauthorized",
        none ? absl::StrCat("this port needs its token: open the URL `airlock expose` printed (it "
                            "carries ?",
                            gateway::kTokenParameter, "=...), or send it as X-Airlock-Token")
             : absl::StrCat("the token is not this port's: `airlock expose ls ", e.session_id,
                            "` prints the URL with the right one"));
    return;
  }
  if (by_query && !request.by_header && !request.websocket &&
      (request.method == "GET" || request.method == "HEAD")) {
    // The token becomes a cookie of this host alone, and leaves the address bar (and so the
    // guest server's logs and the pages' Referer).
    connection.Respond(302, "Found",
                       "the token is kept in a cookie of this host; follow the Location",
                       absl::StrCat("Location: ", request.target_without_token,
                                    "\r\nSet-Cookie: ", gateway::kTokenCookie, "=", e.token,
                                    "; Path=/; HttpOnly; SameSite=Lax",
                                    connection.tls() ? "; Secure" : "", "\r\n"));
    return;
  }
  Relay(e, request, connection);
}

void Exposures::Relay(const Exposure& e, const gateway::GatewayRequest& request,
                      gateway::GatewayConnection& connection) {
  if (absl::Status s = sessions_->TakeConnection(e.tenant); !s.ok()) {
    connection.Respond(503, "Service Unavailable", s.message());
    return;
  }
  absl::Cleanup give = [&] { sessions_->GiveConnection(e.tenant); };
  std::pair<std::string, uint16_t> key = {e.session_id, e.port};
  {
    absl::MutexLock lock(&mu_);
    open_[key].insert(&connection);
  }
  absl::Cleanup forget = [&] {
    absl::MutexLock lock(&mu_);
    if (auto it = open_.find(key); it != open_.end()) {
      it->second.erase(&connection);
      if (it->second.empty()) open_.erase(it);
    }
  };
  Principal owner = PrincipalOfTenant(e.tenant);
  absl::StatusOr<std::shared_ptr<LiveSession>> live =
      sessions_->Live(owner, e.session_id, [&connection] { connection.Cut(); });
  if (!live.ok()) {
    connection.Respond(502, "Bad Gateway",
                       absl::StrCat("session ", e.session_id,
                                    " cannot take the connection: ", live.status().message()));
    return;
  }
  std::string what = absl::StrCat("through the HTTP gateway from ", connection.peer(), " (",
                                  absl::CHexEscape(request.method), " ",
                                  absl::CHexEscape(request.target_without_token.substr(0, 200)),
                                  request.websocket ? ", WebSocket" : "", ")");
  GatewayClient client(connection);
  absl::Status relayed = forwarder_.Relay(owner, **live, e.port, what, client, "session.http");
  if (!relayed.ok()) LogDebug(absl::StrCat("gateway: ", relayed.message()));
}

}  // namespace airlock
