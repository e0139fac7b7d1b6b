#include "src/daemon/fleet_forward.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/daemon/fleet_scaler.h"
#include "src/daemon/session_events.h"
#include "src/daemon/session_handoff.h"
#include "src/daemon/session_manager.h"

namespace airlock {
namespace {

constexpr size_t kMaxCallerBytes = 8192;
constexpr size_t kMaxCallerField = 1024;
constexpr size_t kMaxCallerGroups = 64;
// How long a create waits for a host of the pool to start and join the fleet.
constexpr absl::Duration kPoolHostJoin = absl::Seconds(90);
constexpr std::chrono::seconds kPoolHostListen(30);

bool ValidHostId(const std::string& id) {
  return !id.empty() && id.size() <= 128 && std::all_of(id.begin(), id.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

}  // namespace

std::string EncodeFleetCaller(const Principal& who, const std::vector<std::string>& groups) {
  nlohmann::json out{{"uid", who.uid},   {"gid", who.gid},         {"certificate", who.certificate},
                     {"oidc", who.oidc}, {"api_key", who.api_key}, {"groups", groups}};
  // ensure_ascii: metadata values are printable ASCII.
  return out.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<Principal> DecodeFleetCaller(std::string_view text,
                                            std::vector<std::string>* groups) {
  if (text.size() > kMaxCallerBytes) {
    return absl::InvalidArgumentError("a forwarded call's caller is over 8 KiB");
  }
  nlohmann::json in = nlohmann::json::parse(text, nullptr, false);
  if (!in.is_object()) return absl::InvalidArgumentError("a forwarded call's caller is no object");
  Principal who;
  auto number = [&](const char* name, uint32_t* out) {
    auto it = in.find(name);
    if (it == in.end() || !it->is_number_unsigned() || it->get<uint64_t>() > UINT32_MAX) {
      return false;
    }
    *out = static_cast<uint32_t>(it->get<uint64_t>());
    return true;
  };
  auto string = [&](const char* name, std::string* out) {
    auto it = in.find(name);
    if (it == in.end() || !it->is_string() ||
        it->get_ref<const std::string&>().size() > kMaxCallerField) {
      return false;
    }
    *out = it->get<std::string>();
    return true;
  };
  if (!number("uid", &who.uid) || !number("gid", &who.gid) ||
      !string("certificate", &who.certificate) || !string("oidc", &who.oidc) ||
      !string("api_key", &who.api_key)) {
    return absl::InvalidArgumentError("a forwarded call's caller lacks a field or has a bad one");
  }
  auto list = in.find("groups");
  if (list == in.end() || !list->is_array() || list->size() > kMaxCallerGroups) {
    return absl::InvalidArgumentError("a forwarded call's caller has bad groups");
  }
  groups->clear();
  for (const nlohmann::json& g : *list) {
    if (!g.is_string() || g.get_ref<const std::string&>().size() > kMaxCallerField) {
      return absl::InvalidArgumentError("a forwarded call's caller has bad groups");
    }
    groups->push_back(g.get<std::string>());
  }
  return who;
}

struct FleetPeers::Store {
  X509_STORE* store = nullptr;
  ~Store() { X509_STORE_free(store); }
};

FleetPeers::~FleetPeers() = default;

absl::StatusOr<std::unique_ptr<FleetPeers>> FleetPeers::Create(const std::string& ca_pem) {
  std::unique_ptr<FleetPeers> peers(new FleetPeers());
  peers->store_ = std::make_unique<Store>();
  peers->store_->store = X509_STORE_new();
  if (peers->store_->store == nullptr) return absl::InternalError("X509_STORE_new failed");
  BIO* bio = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
  if (bio == nullptr) return absl::InternalError("BIO_new_mem_buf failed");
  int added = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_cert(peers->store_->store, cert) == 1) ++added;
    X509_free(cert);
  }
  BIO_free(bio);
  if (added == 0) {
    return absl::InvalidArgumentError("--fleet-ca holds no PEM certificate");
  }
  return peers;
}

std::optional<std::string> FleetPeers::HostOf(const grpc::AuthContext& auth) const {
  if (!auth.IsPeerAuthenticated()) return std::nullopt;
  std::vector<grpc::string_ref> pems = auth.FindPropertyValues("x509_pem_cert");
  std::vector<grpc::string_ref> names = auth.FindPropertyValues("x509_common_name");
  if (pems.empty() || names.empty()) return std::nullopt;
  std::string name(names[0].data(), names[0].size());
  if (!ValidHostId(name)) return std::nullopt;
  BIO* bio = BIO_new_mem_buf(pems[0].data(), static_cast<int>(pems[0].size()));
  if (bio == nullptr) return std::nullopt;
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (cert == nullptr) return std::nullopt;
  bool verified = false;
  if (X509_STORE_CTX* ctx = X509_STORE_CTX_new(); ctx != nullptr) {
    verified =
        X509_STORE_CTX_init(ctx, store_->store, cert, nullptr) == 1 && X509_verify_cert(ctx) == 1;
    X509_STORE_CTX_free(ctx);
  }
  X509_free(cert);
  if (!verified) return std::nullopt;
  return name;
}

FleetForwarder::FleetForwarder(SessionHandoff* handoff, SessionManager* sessions,
                               providers::HostProvider* hosts, providers::PlacementPolicy policy,
                               Credentials credentials)
    : handoff_(handoff),
      sessions_(sessions),
      hosts_(hosts),
      policy_(policy),
      credentials_(std::move(credentials)) {}

std::shared_ptr<void> FleetForwarder::CreateUnderWay(const std::string& host) {
  if (scaler_ == nullptr) return nullptr;
  scaler_->CreateBegins(host);
  return std::shared_ptr<void>(nullptr,
                               [scaler = scaler_, host](void*) { scaler->CreateEnds(host); });
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> FleetForwarder::PlaceCreate(
    const std::string& asked, const providers::VmPlacement& vm, bool here, std::string* chosen) {
  const std::string& me = handoff_->host_id();
  if (here && !asked.empty() && asked != me) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a session with a workspace or volumes is made on the host called, which has them: "
        "leave out --host ",
        asked, ", or call host ", asked, " with them"));
  }
  std::string target = here ? me : asked;
  absl::StatusOr<std::vector<providers::HostInfo>> hosts = hosts_->Hosts();
  if (!hosts.ok()) {
    // Without etcd this host still makes its own sessions; it cannot reach the others.
    if (target.empty() || target == me) return nullptr;
    return absl::UnavailableError(absl::StrCat("the fleet's hosts could not be read from etcd (",
                                               hosts.status().message(), "); try again"));
  }
  // What the running sessions of each host hold, from the fleet's index.
  absl::StatusOr<std::vector<SessionManager::ListedSession>> listed =
      sessions_->List(SessionEventHub::kEveryTenant);
  if (!listed.ok()) return listed.status();
  std::map<std::string, providers::HostUse> use;
  for (const SessionManager::ListedSession& s : *listed) {
    if (s.record.state != SessionState::kRunning && s.record.state != SessionState::kCreating) {
      continue;
    }
    providers::HostUse& u = use[s.host.empty() ? me : s.host];
    u.vcpus += s.record.limits.vcpus;
    u.memory_bytes += s.record.limits.memory_bytes;
  }
  bool started_now = false;  // a host of the pool, started for this create
  if (target.empty()) {
    absl::StatusOr<std::string> placed = providers::ChooseHost(*hosts, use, vm, policy_);
    if (!placed.ok() && scaler_ != nullptr) {
      absl::StatusOr<std::string> started = scaler_->StartHost(vm, kPoolHostJoin);
      if (!started.ok()) {
        return absl::Status(placed.status().code(),
                            absl::StrCat(placed.status().message(),
                                         " (and the host pool: ", started.status().message(), ")"));
      }
      hosts = hosts_->Hosts();
      if (!hosts.ok()) return hosts.status();
      placed = started;
      started_now = true;
    }
    if (!placed.ok()) return placed.status();
    target = *placed;
  }
  auto host = std::find_if(hosts->begin(), hosts->end(),
                           [&](const providers::HostInfo& h) { return h.id == target; });
  if (host == hosts->end()) {
    return absl::NotFoundError(
        absl::StrCat("host ", target, " is not in the fleet (airlock hosts lists them)"));
  }
  if (absl::Status room = providers::CheckRoom(*host, use, vm); !room.ok()) {
    // A host being drained says so itself when it is this one.
    if (target == me && host->draining) return nullptr;
    return absl::Status(
        room.code(),
        absl::StrCat(room.message(), !asked.empty() && !here ? ": leave out --host" : ""));
  }
  if (target == me) return nullptr;
  *chosen = target;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      ChannelTo(target, host->capacity.address);
  // A host joins the fleet a moment before its fleet port listens.
  if (channel.ok() && started_now &&
      !(*channel)->WaitForConnected(std::chrono::system_clock::now() + kPoolHostListen)) {
    return absl::UnavailableError(
        absl::StrCat("host ", target, " of the host pool joined the fleet but its fleet port ",
                     host->capacity.address, " does not answer (its airlockd.log says why)"));
  }
  return channel;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> FleetForwarder::RouteFor(const Principal& who,
                                                                        const std::string& id) {
  if (handoff_ == nullptr || !who.via_host.empty() || sessions_->RunsHere(id)) return nullptr;
  absl::StatusOr<std::optional<std::string>> owner = handoff_->Owner(id);
  // etcd cannot say, or nobody runs it (paused: it is taken over here), or this host does:
  // the local path answers, and says why when it cannot.
  if (!owner.ok() || !owner->has_value() || **owner == handoff_->host_id()) return nullptr;
  return ChannelToHostOf(id, **owner);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> FleetForwarder::GatewayRouteFor(
    const std::string& id, std::string* host) {
  if (handoff_ == nullptr || sessions_->RunsHere(id)) return nullptr;
  absl::StatusOr<std::optional<std::string>> owner = handoff_->Owner(id);
  if (!owner.ok()) return nullptr;  // etcd cannot say: what this host knows answers
  if (owner->has_value()) {
    if (**owner == handoff_->host_id()) return nullptr;
    *host = **owner;
  } else {
    // Paused: the host that published it keeps its exposures and its snapshot, and resumes it
    // for the connection; a host that is down leaves it to this one.
    absl::StatusOr<SessionHandoff::Published> published = handoff_->Find(id);
    if (!published.ok() || published->host == handoff_->host_id()) return nullptr;
    if (!handoff_->AddressOf(published->host).ok()) return nullptr;
    *host = published->host;
  }
  return ChannelToHostOf(id, *host);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> FleetForwarder::ChannelToHostOf(
    const std::string& id, const std::string& owner) {
  absl::StatusOr<std::string> address = handoff_->AddressOf(owner);
  if (!address.ok()) return nullptr;  // its host is down: the local path says whose it is
  if (address->empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", id, " runs on host ", owner,
                     ", which takes no forwarded calls: call that host, or start its airlockd with "
                     "--fleet-listen, --fleet-cert, --fleet-key and --fleet-ca"));
  }
  if (credentials_.cert_pem.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session ", id, " runs on host ", owner, " (", *address,
        "), and this host forwards no calls: call that host, or start this airlockd with "
        "--fleet-listen, --fleet-cert, --fleet-key and --fleet-ca"));
  }
  return ChannelTo(owner, *address);
}

std::shared_ptr<grpc::Channel> FleetForwarder::ChannelTo(const std::string& host,
                                                         const std::string& address) {
  std::string key = absl::StrCat(host, "@", address);
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[key];
  if (channel == nullptr) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = credentials_.ca_pem;
    tls.pem_private_key = credentials_.key_pem;
    tls.pem_cert_chain = credentials_.cert_pem;
    grpc::ChannelArguments args;
    // The owner's certificate must name the host that owns the session, wherever it listens.
    args.SetSslTargetNameOverride(host);
    args.SetMaxReceiveMessageSize(4 << 20);
    channel = grpc::CreateCustomChannel(address, grpc::SslCredentials(tls), args);
  }
  return channel;
}

std::unique_ptr<grpc::ClientContext> FleetForwarder::ContextFor(grpc::ServerContext* context,
                                                                const Principal& who) {
  auto client = std::make_unique<grpc::ClientContext>();
  client->AddMetadata(kFleetCallerHeader, EncodeFleetCaller(who, who.groups));
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    client->set_deadline(context->deadline());
  }
  return client;
}

CancelPropagation::CancelPropagation(grpc::ServerContext* server, grpc::ClientContext* client) {
  thread_ = std::thread([this, server, client] {
    absl::MutexLock lock(&mu_);
    while (!done_) {
      if (server->IsCancelled()) {
        client->TryCancel();
        return;
      }
      mu_.AwaitWithTimeout(absl::Condition(&done_), absl::Milliseconds(200));
    }
  });
}

CancelPropagation::~CancelPropagation() {
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }
  thread_.join();
}

}  // namespace airlock
