// airlockd: the control plane. Serves the gRPC API on a Unix socket (and, only with mutual TLS,
// on TCP), keeps state in SQLite under $AIRLOCK_HOME, and owns every session's VM.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "src/common/byte_size.h"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/common/log.h"
#include "src/daemon/airlock_service.h"
#include "src/daemon/api_service.h"
#include "src/daemon/daemon_flags.h"
#include "src/daemon/daemon_telemetry.h"
#include "src/daemon/exposures.h"
#include "src/daemon/fleet_gateway.h"
#include "src/daemon/fleet_scaler.h"
#include "src/daemon/oidc_auth.h"
#include "src/daemon/session_handoff.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/daemon/unix_listener.h"
#include "src/daemon/volume_service.h"
#include "src/gateway/http_gateway.h"
#include "src/image/tar_to_ext4.h"
#include "src/vm/qemu_driver.h"
#include "src/vm/snapshot_manifest.h"

namespace {

int g_signal_pipe[2];

void OnSignal(int signal) {
  char c = signal == SIGHUP ? 'h' : 'x';
  (void)!write(g_signal_pipe[1], &c, 1);
}

// The operator's egress ceiling from a file (empty: the default).
absl::StatusOr<std::shared_ptr<const airlock::net::EgressCeiling>> LoadCeiling(
    const std::string& path) {
  if (path.empty()) {
    return std::make_shared<const airlock::net::EgressCeiling>(
        airlock::net::EgressCeiling::Default());
  }
  absl::StatusOr<std::string> text = airlock::ReadFileToString(path, 1 << 20);
  if (!text.ok()) return text.status();
  absl::StatusOr<airlock::net::EgressCeiling> ceiling = airlock::net::ParseEgressCeiling(*text);
  if (!ceiling.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", ceiling.status().message()));
  }
  return std::make_shared<const airlock::net::EgressCeiling>(*std::move(ceiling));
}

int Fail(const std::string& message) {
  airlock::LogError(message);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  airlock::ReadTarNamesAsUtf8();
  // airlockd holds secrets' values in memory: no core dumps, no ptrace by other users.
  prctl(PR_SET_DUMPABLE, 0);
  rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  // Every session's egress connections are descriptors of this one process: the soft limit a
  // shell hands down (often 1024) would run out for every tenant at once, so take the hard one.
  if (rlimit files; getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &files) != 0) {
      airlock::LogWarning(absl::StrCat("could not raise the open-file limit to ", files.rlim_max,
                                       ": ", strerror(errno)));
    }
  }
  std::variant<airlock::DaemonFlags, int> parsed = airlock::ParseDaemonFlags(argc, argv);
  if (const int* code = std::get_if<int>(&parsed)) return *code;
  const airlock::DaemonFlags& flags = std::get<airlock::DaemonFlags>(parsed);
  const std::string& socket_path = flags.socket_path;
  const std::string &tcp = flags.tcp, &cert = flags.cert, &key = flags.key,
                    &client_ca = flags.client_ca;
  airlock::OperatorList operators;
  for (const std::string& entry : flags.operators) {
    if (absl::Status s = operators.Add(entry); !s.ok()) {
      return Fail(absl::StrCat("--operator (or $AIRLOCK_OPERATORS): ", s.message()));
    }
  }
  airlock::DaemonTelemetry::Options otlp;
  otlp.version = AIRLOCK_VERSION;
  otlp.endpoint = flags.otlp_endpoint;
  otlp.headers = flags.otlp_headers;
  otlp.interval = flags.otlp_interval;
  airlock::OidcAuthenticator::Options oidc;
  oidc.settings.issuer = flags.oidc_issuer;
  oidc.settings.audience = flags.oidc_audience;
  oidc.jwks = flags.oidc_jwks;
  oidc.jwks_ca = flags.oidc_jwks_ca;
  airlock::VmPoolOptions pool;
  pool.max_per_kind = static_cast<uint32_t>(flags.pool);
  pool.memory_budget_bytes = flags.pool_memory_bytes != 0
                                 ? flags.pool_memory_bytes
                                 : static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                                       static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 8;
  airlock::providers::BlobStoreOptions blob_options;
  blob_options.endpoint = flags.s3_endpoint;
  blob_options.region = flags.s3_region;
  blob_options.stall_timeout = absl::Seconds(flags.blob_store_timeout_seconds);
  airlock::providers::EtcdConfig etcd_config;
  etcd_config.endpoints = flags.etcd;
  etcd_config.ca_file = flags.etcd_ca;
  etcd_config.cert_file = flags.etcd_cert;
  etcd_config.key_file = flags.etcd_key;
  airlock::HandoffOptions handoff_options;
  handoff_options.prefix = flags.etcd_prefix;
  handoff_options.ttl_seconds = flags.host_lease_ttl_seconds;
  handoff_options.host_id = flags.host_id;
  if (handoff_options.host_id.empty()) {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    handoff_options.host_id = name;
  }
  airlock::SetLogLevel(airlock::ParseLogLevel(flags.log_level).value_or(airlock::LogLevel::kInfo));
  bool use_oidc =
      !oidc.settings.issuer.empty() || !oidc.settings.audience.empty() || !oidc.jwks.empty();
  if (!tcp.empty() && (cert.empty() || key.empty() || (client_ca.empty() && !use_oidc))) {
    return Fail(
        "refusing to listen on TCP without TLS and a way to know each caller: give --tls-cert, "
        "--tls-key and --tls-client-ca (client certificates) or --oidc-issuer, --oidc-audience "
        "and --oidc-jwks (bearer tokens), or both (no unauthenticated network listener, ever)");
  }
  if (use_oidc && tcp.empty()) {
    return Fail("--oidc-* settings are for the TCP listener: give --listen-tcp too");
  }
  if (geteuid() != 0) return Fail("airlockd runs as root (it starts VMs and owns their files)");
  signal(SIGPIPE, SIG_IGN);

  airlock::HostPaths paths = airlock::DefaultHostPaths();
  if (absl::Status s = airlock::MakeDirectories(paths.home, 0755); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  // One airlockd per home, decided before anything reads its state: a second one (a CLI that
  // found the first too busy to answer within its wait starts one) must not recover, and so
  // take over, the VMs of a daemon that is alive. The lock goes with the process, however it
  // ends; the descriptor is not inherited by the VMs (close-on-exec).
  int home_lock = open((paths.home + "/airlockd.lock").c_str(),
                       O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (home_lock < 0)
    return Fail(absl::StrCat("open ", paths.home, "/airlockd.lock: ", strerror(errno)));
  if (flock(home_lock, LOCK_EX | LOCK_NB) != 0) {
    absl::StatusOr<std::string> pid = airlock::ReadFileToString(paths.home + "/airlockd.pid", 64);
    return Fail(absl::StrCat(
        "another airlockd",
        pid.ok() ? absl::StrCat(" (pid ", absl::StripAsciiWhitespace(*pid), ")") : "", " is using ",
        paths.home, "; stop it first, or give this one another AIRLOCK_HOME"));
  }
  airlock::SessionEventHub events;  // outlives the store, which publishes into it
  absl::StatusOr<std::unique_ptr<airlock::StateStore>> store =
      airlock::StateStore::Open(paths.home + "/state.db", flags.log_cap);
  if (!store.ok()) return Fail(std::string(store.status().message()));
  (*store)->set_events(&events);
  // Before the session manager, which uses it until it is destroyed.
  std::unique_ptr<airlock::SessionHandoff> handoff;
  // What this host offers VMs: the machine, or less (--capacity-memory, --capacity-vcpus).
  airlock::providers::HostCapacity offered = airlock::providers::MachineCapacity();
  if (flags.capacity_memory_bytes != 0) offered.memory_bytes = flags.capacity_memory_bytes;
  if (flags.capacity_vcpus != 0) offered.vcpus = flags.capacity_vcpus;
  const std::string& blob_url = flags.blob_store;
  if (blob_url.empty() != etcd_config.endpoints.empty()) {
    return Fail(
        "--blob-store and --etcd go together: hosts of a fleet share the snapshots (the blob "
        "store) and which host runs each session (etcd); on one host, give neither");
  }
  if (!blob_url.empty()) {
    blob_options.url = blob_url;
    absl::StatusOr<std::unique_ptr<airlock::providers::BlobStore>> blobs =
        airlock::providers::OpenBlobStore(blob_options);
    if (!blobs.ok()) return Fail(absl::StrCat("--blob-store: ", blobs.status().message()));
    absl::StatusOr<std::unique_ptr<airlock::providers::EtcdClient>> etcd =
        airlock::providers::EtcdClient::Create(etcd_config);
    if (!etcd.ok()) return Fail(absl::StrCat("--etcd: ", etcd.status().message()));
    absl::StatusOr<std::string> host_key = airlock::LoadOrCreateHostKey(paths.home + "/host.key");
    if (!host_key.ok()) return Fail(std::string(host_key.status().message()));
    airlock::providers::HostCapacity capacity = offered;
    capacity.address = flags.fleet_listen;
    handoff_options.capacity_json = airlock::providers::EncodeHostCapacity(capacity);
    handoff_options.generations_dir = paths.home + "/fleet-generations";
    absl::StatusOr<std::unique_ptr<airlock::SessionHandoff>> started =
        airlock::SessionHandoff::Start(*std::move(blobs), *std::move(etcd), handoff_options,
                                       *std::move(host_key));
    if (!started.ok()) return Fail(absl::StrCat("joining the fleet: ", started.status().message()));
    handoff = *std::move(started);
    airlock::LogInfo(absl::StrCat("host ", handoff->host_id(), " joined the fleet at ", blob_url));
  }
  airlock::QemuDriver driver(paths.qemu, flags.vmm_memory_bytes);
  airlock::providers::LocalHost machine(&driver, handoff_options.host_id, offered);
  std::unique_ptr<airlock::FleetHosts> fleet;
  if (handoff != nullptr) fleet = std::make_unique<airlock::FleetHosts>(handoff.get(), &machine);
  airlock::providers::HostProvider* hosts = &machine;
  if (fleet != nullptr) hosts = fleet.get();
  std::unique_ptr<airlock::providers::LocalNetwork> network;  // outlives the sessions' proxies
  airlock::SessionManagerOptions options{.store = store->get(),
                                         .paths = paths,
                                         .hosts = hosts,
                                         .handoff = handoff.get(),
                                         .use_templates = flags.templates,
                                         .activity_record = flags.activity_record,
                                         .pool = pool};
  const char* registry_internal = std::getenv("AIRLOCK_REGISTRY_ALLOW_INTERNAL");
  options.registry_internal = registry_internal != nullptr && std::string(registry_internal) == "1";
  airlock::EgressSettings& egress = options.egress;
  std::shared_ptr<airlock::net::Resolver> resolver =
      std::make_shared<airlock::net::SystemResolver>();
  absl::StatusOr<std::shared_ptr<const airlock::net::EgressCeiling>> ceiling =
      LoadCeiling(flags.ceiling_file);
  if (!ceiling.ok()) return Fail(std::string(ceiling.status().message()));
  egress.ceiling = *std::move(ceiling);
  egress.idle_timeout_ms = flags.egress_idle_timeout_ms;
  if (const std::string& hosts_file = flags.hosts_file; !hosts_file.empty()) {
    absl::StatusOr<std::string> text = airlock::ReadFileToString(hosts_file, 1 << 20);
    if (!text.ok()) return Fail(std::string(text.status().message()));
    auto named = airlock::net::StaticResolver::Parse(*text, resolver);
    if (!named.ok()) return Fail(absl::StrCat(hosts_file, ": ", named.status().message()));
    resolver = *std::move(named);
  }
  network = std::make_unique<airlock::providers::LocalNetwork>(std::move(resolver));
  options.network = network.get();
  absl::StatusOr<std::unique_ptr<airlock::SessionSecrets>> secrets = airlock::MakeSessionSecrets(
      flags.upstream_ca, flags.guest_ca, flags.shared_secrets, flags.tenant_guest_ca);
  if (!secrets.ok()) return Fail(std::string(secrets.status().message()));
  options.secrets = *std::move(secrets);
  if (!flags.quota_file.empty()) {
    absl::StatusOr<airlock::Quotas> quotas = airlock::Quotas::Load(flags.quota_file);
    if (!quotas.ok()) return Fail(std::string(quotas.status().message()));
    options.quotas = *std::move(quotas);
  }
  airlock::SessionManager sessions(std::move(options));
  if (absl::Status s = sessions.Recover(); !s.ok()) return Fail(std::string(s.message()));

  std::unique_ptr<airlock::DaemonTelemetry> telemetry;
  if (!otlp.endpoint.empty()) {
    absl::StatusOr<std::unique_ptr<airlock::DaemonTelemetry>> t =
        airlock::DaemonTelemetry::Create(otlp, store->get(), &sessions);
    if (!t.ok()) return Fail(std::string(t.status().message()));
    telemetry = *std::move(t);
  }
  airlock::PeerRegistry peers;
  peers.set_operators(std::move(operators));
  airlock::WorkspaceUploads uploads;
  airlock::SessionsService sessions_service(&sessions, store->get(), &peers, &uploads, &events);
  airlock::Exposures exposures(&sessions, store->get(), flags.http_public == "allow");
  sessions_service.set_exposures(&exposures);
  // Forwarding between the hosts of a fleet: this host's certificate, and the fleet's CA.
  airlock::FleetForwarder::Credentials fleet_credentials;
  std::unique_ptr<airlock::FleetForwarder> fleet_forwarder;
  if (!flags.fleet_listen.empty()) {
    absl::StatusOr<std::string> cert_pem = airlock::ReadFileToString(flags.fleet_cert, 1 << 20);
    absl::StatusOr<std::string> key_pem = airlock::ReadFileToString(flags.fleet_key, 1 << 20);
    absl::StatusOr<std::string> ca_pem = airlock::ReadFileToString(flags.fleet_ca, 1 << 20);
    for (const auto* pem : {&cert_pem, &key_pem, &ca_pem}) {
      if (!pem->ok()) return Fail(absl::StrCat("--fleet-*: ", pem->status().message()));
    }
    if (!client_ca.empty()) {
      absl::StatusOr<std::string> tenants_ca = airlock::ReadFileToString(client_ca, 1 << 20);
      if (tenants_ca.ok() && *tenants_ca == *ca_pem) {
        return Fail(
            "--fleet-ca is the CA of the tenants' certificates (--client-ca): a tenant could act "
            "as a host, for anyone. Give the fleet a CA of its own");
      }
    }
    absl::StatusOr<std::unique_ptr<airlock::FleetPeers>> fleet_peers =
        airlock::FleetPeers::Create(*ca_pem);
    if (!fleet_peers.ok()) return Fail(std::string(fleet_peers.status().message()));
    peers.set_fleet(*std::move(fleet_peers));
    fleet_credentials = {.cert_pem = *cert_pem, .key_pem = *key_pem, .ca_pem = *ca_pem};
    fleet_forwarder = std::make_unique<airlock::FleetForwarder>(
        handoff.get(), &sessions, hosts,
        flags.placement == "pack" ? airlock::providers::PlacementPolicy::kPack
                                  : airlock::providers::PlacementPolicy::kSpread,
        fleet_credentials);
    sessions_service.set_fleet(fleet_forwarder.get());
  }
  // Hosts started for creates no host has room for, and released when idle (--host-pool).
  std::unique_ptr<airlock::providers::ProcessHostPool> host_pool;
  std::unique_ptr<airlock::FleetScaler> scaler;
  if (!flags.host_pool.empty()) {
    absl::StatusOr<std::string> text = airlock::ReadFileToString(flags.host_pool, 1 << 20);
    absl::StatusOr<airlock::providers::HostPoolConfig> pool =
        text.ok() ? airlock::providers::ParseHostPool(*text)
                  : absl::StatusOr<airlock::providers::HostPoolConfig>(text.status());
    if (!pool.ok()) {
      return Fail(absl::StrCat("--host-pool ", flags.host_pool, ": ", pool.status().message()));
    }
    host_pool = std::make_unique<airlock::providers::ProcessHostPool>(pool->hosts);
    scaler = std::make_unique<airlock::FleetScaler>(handoff.get(), hosts, host_pool.get(),
                                                    pool->release_after);
    fleet_forwarder->set_scaler(scaler.get());
  }
  airlock::E2bSandboxes e2b(&sessions, store->get(), &uploads);
  e2b.set_domain(flags.http_domain);
  if (!flags.e2b_templates.empty()) {
    absl::StatusOr<std::string> text = airlock::ReadFileToString(flags.e2b_templates, 1 << 20);
    absl::StatusOr<std::map<std::string, std::string>> templates =
        text.ok() ? airlock::gateway::e2b::ParseTemplateMap(*text)
                  : absl::StatusOr<std::map<std::string, std::string>>(text.status());
    if (!templates.ok()) {
      return Fail(absl::StrCat("--e2b-templates ", flags.e2b_templates, ": ",
                               templates.status().message()));
    }
    e2b.set_templates(*std::move(templates));
  }
  e2b.set_volume_bytes(flags.e2b_volume_bytes);
  e2b.Start();
  exposures.set_api(&e2b);
  airlock::ApiKeysService api_keys_service(store->get(), &peers);
  airlock::VolumesService volumes_service(&sessions, &peers, paths);
  airlock::WorkspacesService workspaces_service(&sessions, store->get(), &peers, &uploads,
                                                paths.scratch);
  airlock::VmsService vms_service(&sessions, store->get(), &peers);
  airlock::ImagesService images_service(paths, &sessions, store->get(), &peers);
  images_service.RemoveBuildLeftovers();
  airlock::NetworkService network_service(&sessions, store->get(), &peers);
  airlock::SecretsService secrets_service(&sessions, store->get(), &peers);
  workspaces_service.set_fleet(fleet_forwarder.get());
  network_service.set_fleet(fleet_forwarder.get());
  secrets_service.set_fleet(fleet_forwarder.get());
  airlock::AuditService audit_service(store->get(), &peers);
  airlock::ApiService api_service(&peers, AIRLOCK_VERSION);
  grpc::ServerBuilder builder;
  builder.RegisterService(&sessions_service);
  builder.RegisterService(&vms_service);
  builder.RegisterService(&images_service);
  builder.RegisterService(&network_service);
  builder.RegisterService(&secrets_service);
  builder.RegisterService(&workspaces_service);
  builder.RegisterService(&audit_service);
  builder.RegisterService(&api_keys_service);
  builder.RegisterService(&volumes_service);
  builder.RegisterService(&api_service);
  // The HTTP gateway's connections for sessions another host of the fleet holds go there.
  std::unique_ptr<airlock::FleetGatewayRelay> gateway_relay;
  std::unique_ptr<airlock::FleetGatewayService> gateway_relay_service;
  if (fleet_forwarder != nullptr) {
    gateway_relay = std::make_unique<airlock::FleetGatewayRelay>(fleet_forwarder.get());
    exposures.set_fleet(gateway_relay.get());
    gateway_relay_service =
        std::make_unique<airlock::FleetGatewayService>(peers.fleet(), &exposures);
    builder.RegisterService(gateway_relay_service.get());
  }
  builder.SetMaxReceiveMessageSize(4 << 20);
  if (telemetry) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> spans;
    spans.push_back(telemetry->CallSpans());
    builder.experimental().SetInterceptorCreators(std::move(spans));
  }
  if (!tcp.empty()) {
    absl::StatusOr<std::string> cert_pem = airlock::ReadFileToString(cert, 1 << 20);
    absl::StatusOr<std::string> key_pem = airlock::ReadFileToString(key, 1 << 20);
    absl::StatusOr<std::string> ca_pem =
        client_ca.empty() ? "" : airlock::ReadFileToString(client_ca, 1 << 20);
    for (const auto* pem : {&cert_pem, &key_pem, &ca_pem}) {
      if (!pem->ok()) return Fail(std::string(pem->status().message()));
    }
    // Certificates alone: every client has one. With tokens too: a certificate, if sent, must
    // verify; the token is checked for every call.
    grpc::SslServerCredentialsOptions tls(
        client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
        : use_oidc        ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY
                          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_root_certs = *ca_pem;
    tls.pem_key_cert_pairs.push_back({*key_pem, *cert_pem});
    std::shared_ptr<grpc::ServerCredentials> credentials = grpc::SslServerCredentials(tls);
    if (use_oidc) {
      oidc.certificates_accepted = !client_ca.empty();
      airlock::StateStore* audit = store->get();
      oidc.refused = [audit](const std::string& why) {
        airlock::Principal unknown;
        unknown.oidc = "(refused token)";
        airlock::LogIfFailed(audit->audit().Audit(unknown, "", "auth.refuse", "bearer token", why),
                             "refused bearer token not audited");
      };
      absl::StatusOr<std::shared_ptr<airlock::OidcAuthenticator>> authenticator =
          airlock::OidcAuthenticator::Create(std::move(oidc));
      if (!authenticator.ok()) return Fail(std::string(authenticator.status().message()));
      credentials->SetAuthMetadataProcessor(*authenticator);
      peers.set_oidc(*authenticator);
    }
    builder.AddListeningPort(tcp, credentials);
  }
  if (!flags.fleet_listen.empty()) {
    grpc::SslServerCredentialsOptions tls(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_root_certs = fleet_credentials.ca_pem;
    tls.pem_key_cert_pairs.push_back({fleet_credentials.key_pem, fleet_credentials.cert_pem});
    builder.AddListeningPort(flags.fleet_listen, grpc::SslServerCredentials(tls));
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return Fail("could not start the gRPC server");
  // The HTTP gateway: guest ports as URLs. The default port may be another airlockd's (another
  // $AIRLOCK_HOME): then this one serves without, and `airlock expose` says how to start one.
  std::unique_ptr<airlock::gateway::HttpGateway> gateway;
  if (flags.http_listen != "off") {
    absl::StatusOr<std::unique_ptr<airlock::gateway::HttpGateway>> started =
        airlock::gateway::HttpGateway::Start({.listen = flags.http_listen,
                                              .domain = flags.http_domain,
                                              .tls_cert_file = flags.http_cert,
                                              .tls_key_file = flags.http_key},
                                             &exposures);
    if (started.ok()) {
      gateway = *std::move(started);
      exposures.set_gateway(gateway.get());
      airlock::LogInfo(absl::StrCat("HTTP gateway on ", gateway->BaseUrl(), " (exposed ports are ",
                                    "PORT-ID.", flags.http_domain, ")"));
    } else if (flags.http_listen_given || !absl::IsUnavailable(started.status())) {
      return Fail(std::string(started.status().message()));
    } else {
      airlock::LogWarning(absl::StrCat(started.status().message(), "; serving without it"));
    }
  }

  absl::StatusOr<std::unique_ptr<airlock::UnixListener>> listener =
      airlock::UnixListener::Bind(socket_path, flags.group);
  if (!listener.ok()) return Fail(std::string(listener.status().message()));
  (*listener)->Serve(server.get(), &peers);
  std::string pid_file = paths.home + "/airlockd.pid";
  if (absl::Status s = airlock::WriteFileAtomically(pid_file, absl::StrCat(getpid(), "\n"), 0644);
      !s.ok()) {
    return Fail(std::string(s.message()));
  }
  airlock::LogInfo(absl::StrCat("serving on ", socket_path, " (state in ", paths.home, ")"));

  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) return Fail("pipe failed");
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);
  for (;;) {
    char c;
    ssize_t n = read(g_signal_pipe[0], &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1 || c != 'h') break;
    // SIGHUP: the ceiling file again; a broken file keeps the ceiling in force.
    absl::StatusOr<std::shared_ptr<const airlock::net::EgressCeiling>> reloaded =
        LoadCeiling(flags.ceiling_file);
    if (!reloaded.ok()) {
      airlock::LogError(absl::StrCat("egress ceiling not reloaded: ", reloaded.status().message()));
      continue;
    }
    sessions.set_ceiling(*std::move(reloaded));
    airlock::LogInfo(absl::StrCat("egress ceiling reloaded from ",
                                  flags.ceiling_file.empty() ? "(default)" : flags.ceiling_file));
  }
  airlock::LogInfo("shutting down");
  gateway.reset();  // its connections end before the sessions pause
  e2b.Stop();       // and so do the commands E2B's SDKs started
  (*listener)->Stop();
  unlink(pid_file.c_str());
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  // Pause what can be paused, so that it survives a reboot of the host too and comes back on
  // next use; what cannot be paused runs on, and the next airlockd finds it again.
  auto [paused, busy] = sessions.PauseAll();
  sessions.DetachAll();
  if (paused + busy > 0) {
    airlock::LogInfo(absl::StrCat("paused ", paused, " running session(s); ", busy,
                                  " could not be paused and run on"));
  }
  return 0;
}
