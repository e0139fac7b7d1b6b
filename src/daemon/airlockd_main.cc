// airlockd: the control plane. Serves the gRPC API on a Unix socket (and, only with mutual TLS,
// on TCP), keeps state in SQLite under $AIRLOCK_HOME, and owns every session's VM.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "src/common/byte_size.h"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/common/log.h"
#include "src/daemon/airlock_service.h"
#include "src/daemon/daemon_telemetry.h"
#include "src/daemon/oidc_auth.h"
#include "src/daemon/session_handoff.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/daemon/unix_listener.h"
#include "src/image/tar_to_ext4.h"
#include "src/vm/qemu_driver.h"
#include "src/vm/snapshot_manifest.h"

namespace {

constexpr char kUsage[] =
    "usage: airlockd [--socket PATH] [--log-cap BYTES] [--group NAME] [--no-templates]\n"
    "                [--pool N] [--pool-memory SIZE] [--vmm-memory SIZE]\n"
    "                [--log-level debug|info|warning|error]\n"
    "                [--listen-tcp HOST:PORT --tls-cert PEM --tls-key PEM [--tls-client-ca PEM]\n"
    "                 [--oidc-issuer URL --oidc-audience ID --oidc-jwks FILE|URL\n"
    "                  [--oidc-jwks-ca PEM]]]\n"
    "                [--egress-ceiling FILE] [--egress-hosts FILE] [--upstream-ca FILE]\n"
    "                [--guest-ca FILE] [--guest-ca-for TENANT=FILE]...\n"
    "                [--shared-secrets FILE] [--egress-idle-timeout 10m]\n"
    "                [--quota-file FILE] [--operator PRINCIPAL]...\n"
    "                [--otlp-endpoint URL [--otlp-header NAME=VALUE]... [--otlp-interval 10s]]\n"
    "                [--blob-store URL [--s3-endpoint URL] [--s3-region R]\n"
    "                 --etcd URL [--etcd-ca PEM --etcd-cert PEM --etcd-key PEM]\n"
    "                 [--etcd-prefix /airlock] [--host-id ID] [--host-lease-ttl SECONDS]]\n"
    "Serves the Airlock API. State lives in $AIRLOCK_HOME (default /var/lib/airlock).\n"
    "  --socket PATH    Unix socket (default $AIRLOCK_SOCKET or /run/airlock/airlockd.sock)\n"
    "  --group NAME     group allowed to use the socket (default airlock; else root only)\n"
    "  --log-cap BYTES  command output kept per session (default 16 MiB)\n"
    "  --log-level L    the least level of airlockd's own log on stderr: debug, info\n"
    "                   (default), warning or error (or $AIRLOCK_LOG_LEVEL)\n"
    "  --no-templates   boot every VM instead of restoring the image's ready snapshot\n"
    "                   (slower; for measuring cold boots and for debugging)\n"
    "  --pool N         keep up to N VMs per image and shape restored ahead of need, so a\n"
    "                   create or `airlock run` takes one that already runs (default 2; 0:\n"
    "                   no pool). Each VM serves one session only; a kind nobody asks for in\n"
    "                   5 minutes is emptied (or $AIRLOCK_POOL)\n"
    "  --pool-memory SIZE  the guest RAM of all pooled VMs together, like 2g (default: an\n"
    "                   eighth of the host's memory)\n"
    "  --vmm-memory SIZE  host memory each VM process may use beyond its guest's RAM (TCG's\n"
    "                   code cache, QEMU's own); a VM past RAM + this is ended by the host,\n"
    "                   with that reason (default 384m under TCG, 128m under KVM; at least 64m)\n"
    "  --listen-tcp     also listen on TCP, with TLS (--tls-cert, --tls-key) and a way to\n"
    "                   know each caller: a client certificate signed by --tls-client-ca (its\n"
    "                   common name is the tenant: cert:NAME), or a bearer token from an OpenID\n"
    "                   Connect provider, or either\n"
    "  --oidc-issuer URL  the provider's issuer (the tokens' iss); with --oidc-audience ID (the\n"
    "                   tokens' aud) and --oidc-jwks FILE|URL (the provider's keys: its\n"
    "                   https:// jwks_uri, or a file saved from it; read again, at most every\n"
    "                   30 s, when a token names a key it lacks; --oidc-jwks-ca PEM verifies\n"
    "                   the provider's certificate instead of the host's CA store). Tokens are\n"
    "                   JWTs signed RS256 or ES256, sent as `authorization: Bearer JWT`; the\n"
    "                   tenant is oidc:ISSUER#SUBJECT. Refused tokens are audited\n"
    "  --egress-ceiling FILE  what sessions may ever be allowed to reach: lines of\n"
    "                   `allow RULE` / `deny RULE` (RULE as in --allow, plus * for any name\n"
    "                   and :* for any port). Default: `allow *:*`, i.e. public addresses\n"
    "                   only; internal ones (loopback, private, link-local, metadata) need\n"
    "                   an explicit `allow CIDR` line\n"
    "                   (or $AIRLOCK_EGRESS_CEILING)\n"
    "  --egress-hosts FILE  names resolved from this file (`ADDRESS NAME...` lines, as in\n"
    "                   /etc/hosts) before the host's resolver, for sessions' egress\n"
    "                   (or $AIRLOCK_EGRESS_HOSTS)\n"
    "  --egress-idle-timeout D  an egress connection that carries no byte either way for\n"
    "                   this long is ended (default 10m; 0: never; or\n"
    "                   $AIRLOCK_EGRESS_IDLE_TIMEOUT). Each tenant's open connections are\n"
    "                   also counted against its `connections` quota\n"
    "  --upstream-ca FILE  PEM certificates trusted, besides the host's store, when airlockd\n"
    "                   connects to a host a session's secret is bound to (a private CA)\n"
    "                   (or $AIRLOCK_UPSTREAM_CA)\n"
    "  --guest-ca FILE  PEM certificates every guest trusts besides its image's own: a network\n"
    "                   that inspects TLS (a company's proxy) re-signs with its CA. Added to\n"
    "                   the system bundle and named by SSL_CERT_FILE, REQUESTS_CA_BUNDLE,\n"
    "                   CURL_CA_BUNDLE, GIT_SSL_CAINFO, PIP_CERT and NODE_EXTRA_CA_CERTS in\n"
    "                   every command (or $AIRLOCK_GUEST_CA)\n"
    "  --guest-ca-for TENANT=FILE  the same for one tenant's guests only, on top of\n"
    "                   --guest-ca (TENANT as `airlock whoami` prints it; repeatable; or\n"
    "                   $AIRLOCK_GUEST_CA_FOR, entries separated by spaces)\n"
    "  --shared-secrets FILE  secrets airlockd reads itself, with its own environment, files\n"
    "                   and 1Password login, for the tenants and hosts each line names:\n"
    "                   `NAME SOURCE@HOST[,HOST...][?OPTIONS] TENANT...` (TENANT as `airlock\n"
    "                   whoami` prints it, or *); a tenant binds one with\n"
    "                   --secret VAR=shared:NAME@HOST. Every other source is read by the\n"
    "                   client with its user's rights (or $AIRLOCK_SHARED_SECRETS)\n"
    "  --quota-file FILE  what each tenant's sessions may hold at once: lines of\n"
    "                   `default KEY=VALUE...` and `tenant NAME KEY=VALUE...` with keys\n"
    "                   sessions, running, vcpus, memory, disk, logs, images, forks, pull\n"
    "                   (sizes like 8g). Defaults: sessions=64 running=16 vcpus=32\n"
    "                   memory=32g disk=512g logs=1g images=32g forks=16 pull=8g.\n"
    "                   `airlock quota` shows a tenant its own\n"
    "                   (or $AIRLOCK_QUOTA_FILE)\n"
    "  --operator PRINCIPAL  a read-only operator (repeat for more): sees every tenant's\n"
    "                   sessions, VMs, metrics, events and the audit log, and may change\n"
    "                   nothing (the dashboard connects as one). PRINCIPAL is uid:UID,\n"
    "                   cert:COMMON-NAME, oidc:ISSUER#SUBJECT or oidc-group:NAME\n"
    "                   (or $AIRLOCK_OPERATORS, entries separated by spaces)\n"
    "  --otlp-endpoint URL  send OpenTelemetry metrics, traces (a span per call, continuing\n"
    "                   a caller's traceparent) and the audit log as logs to this OTLP/HTTP\n"
    "                   collector, like http://collector:4318 (or $OTEL_EXPORTER_OTLP_ENDPOINT).\n"
    "                   Never waits for it: what it cannot take is dropped and counted\n"
    "  --otlp-header NAME=VALUE  a header for every request to it (an API key); repeatable\n"
    "  --otlp-interval D  how often metrics and logs are sent (default 10s)\n"
    "  --blob-store URL  hosts of a fleet hand paused sessions to each other: a pause uploads\n"
    "                   the snapshot here, by content (s3://BUCKET[/PREFIX], with\n"
    "                   --s3-endpoint https://HOST[:PORT] for a store other than AWS and\n"
    "                   --s3-region, credentials from $AWS_ACCESS_KEY_ID and\n"
    "                   $AWS_SECRET_ACCESS_KEY; or file:///DIR, a directory the hosts share),\n"
    "                   and a resume on any host fetches it. Needs --etcd, where the hosts\n"
    "                   keep which of them runs each session (a lease per host) and each\n"
    "                   session's last snapshot. Every host of a fleet needs the same\n"
    "                   $AIRLOCK_HOME/host.key (it signs snapshots) and the images its\n"
    "                   sessions use\n"
    "  --etcd URL       an etcd endpoint, http://127.0.0.1:2379 or https://HOST:PORT\n"
    "                   (repeatable); --etcd-ca, --etcd-cert and --etcd-key for TLS\n"
    "  --etcd-prefix P  the fleet's keys in etcd (default /airlock)\n"
    "  --host-id ID     this host in the fleet (default: the host name)\n"
    "  --host-lease-ttl S  seconds after which a host that stopped answering loses its\n"
    "                   sessions to the others (default 10)\n"
    "Pulls airlockd makes for users other than root never use the host's registry logins, and\n"
    "reach registries on loopback, private or link-local addresses only with\n"
    "AIRLOCK_REGISTRY_ALLOW_INTERNAL=1.\n";

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
  const char* env_socket = std::getenv("AIRLOCK_SOCKET");
  std::string socket_path = env_socket ? env_socket : "/run/airlock/airlockd.sock";
  std::string group = "airlock";
  std::string tcp, cert, key, client_ca;
  airlock::OperatorList operators;
  airlock::DaemonTelemetry::Options otlp;
  otlp.version = AIRLOCK_VERSION;
  if (const char* env_otlp = std::getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) otlp.endpoint = env_otlp;
  if (const char* env_operators = std::getenv("AIRLOCK_OPERATORS")) {
    for (absl::string_view entry : absl::StrSplit(env_operators, ' ', absl::SkipEmpty())) {
      if (absl::Status s = operators.Add(entry); !s.ok()) {
        return Fail(absl::StrCat("$AIRLOCK_OPERATORS: ", s.message()));
      }
    }
  }
  airlock::OidcAuthenticator::Options oidc;
  // The egress files may also come from the environment (as for a daemon the CLI starts).
  const char* env_ceiling = std::getenv("AIRLOCK_EGRESS_CEILING");
  const char* env_hosts = std::getenv("AIRLOCK_EGRESS_HOSTS");
  std::string ceiling_file = env_ceiling ? env_ceiling : "";
  std::string hosts_file = env_hosts ? env_hosts : "";
  const char* env_upstream_ca = std::getenv("AIRLOCK_UPSTREAM_CA");
  std::string upstream_ca = env_upstream_ca ? env_upstream_ca : "";
  const char* env_guest_ca = std::getenv("AIRLOCK_GUEST_CA");
  std::string guest_ca = env_guest_ca ? env_guest_ca : "";
  std::map<std::string, std::string> tenant_guest_ca;
  auto add_tenant_guest_ca = [&](absl::string_view entry) {
    size_t eq = entry.rfind('=');
    if (eq == absl::string_view::npos || eq == 0 || eq + 1 == entry.size()) return false;
    tenant_guest_ca[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
    return true;
  };
  if (const char* env_for = std::getenv("AIRLOCK_GUEST_CA_FOR")) {
    for (absl::string_view entry : absl::StrSplit(env_for, ' ', absl::SkipEmpty())) {
      if (!add_tenant_guest_ca(entry)) {
        return Fail("$AIRLOCK_GUEST_CA_FOR holds TENANT=FILE entries, like uid:1000=/etc/ca.pem");
      }
    }
  }
  const char* env_idle = std::getenv("AIRLOCK_EGRESS_IDLE_TIMEOUT");
  std::string idle_timeout = env_idle ? env_idle : "10m";
  const char* env_shared = std::getenv("AIRLOCK_SHARED_SECRETS");
  std::string shared_secrets = env_shared ? env_shared : "";
  const char* env_quota = std::getenv("AIRLOCK_QUOTA_FILE");
  std::string quota_file = env_quota ? env_quota : "";
  uint64_t log_cap = 16ull << 20;
  bool templates = true;
  uint64_t vmm_memory_bytes = 0;  // QemuDriver's default
  airlock::VmPoolOptions pool;
  pool.memory_budget_bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                             static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 8;
  if (const char* env_pool = std::getenv("AIRLOCK_POOL");
      env_pool != nullptr &&
      (!absl::SimpleAtoi(env_pool, &pool.max_per_kind) || pool.max_per_kind > 64)) {
    return Fail("AIRLOCK_POOL is a number of VMs from 0 to 64");
  }
  std::string blob_url;
  airlock::providers::BlobStoreOptions blob_options;
  airlock::providers::EtcdConfig etcd_config;
  airlock::HandoffOptions handoff_options;
  {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    handoff_options.host_id = name;
  }
  const char* env_level = std::getenv("AIRLOCK_LOG_LEVEL");
  std::string log_level = env_level ? env_level : "info";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string number;
    bool ok = true;
    if (arg == "--socket")
      ok = value(&socket_path);
    else if (arg == "--group")
      ok = value(&group);
    else if (arg == "--listen-tcp")
      ok = value(&tcp);
    else if (arg == "--tls-cert")
      ok = value(&cert);
    else if (arg == "--tls-key")
      ok = value(&key);
    else if (arg == "--tls-client-ca")
      ok = value(&client_ca);
    else if (arg == "--oidc-issuer")
      ok = value(&oidc.settings.issuer);
    else if (arg == "--oidc-audience")
      ok = value(&oidc.settings.audience);
    else if (arg == "--oidc-jwks")
      ok = value(&oidc.jwks);
    else if (arg == "--oidc-jwks-ca")
      ok = value(&oidc.jwks_ca);
    else if (arg == "--egress-ceiling")
      ok = value(&ceiling_file);
    else if (arg == "--egress-hosts")
      ok = value(&hosts_file);
    else if (arg == "--upstream-ca")
      ok = value(&upstream_ca);
    else if (arg == "--guest-ca")
      ok = value(&guest_ca);
    else if (arg == "--shared-secrets")
      ok = value(&shared_secrets);
    else if (arg == "--guest-ca-for") {
      std::string entry;
      ok = value(&entry);
      if (ok && !add_tenant_guest_ca(entry)) {
        return Fail("--guest-ca-for takes TENANT=FILE, like --guest-ca-for uid:1000=/etc/ca.pem");
      }
    } else if (arg == "--quota-file")
      ok = value(&quota_file);
    else if (arg == "--log-cap")
      ok = value(&number) && absl::SimpleAtoi(number, &log_cap) && log_cap >= 4096;
    else if (arg == "--log-level")
      ok = value(&log_level);
    else if (arg == "--operator") {
      std::string entry;
      ok = value(&entry);
      if (ok) {
        if (absl::Status s = operators.Add(entry); !s.ok()) return Fail(std::string(s.message()));
      }
    } else if (arg == "--otlp-endpoint") {
      ok = value(&otlp.endpoint);
    } else if (arg == "--otlp-header") {
      std::string header;
      ok = value(&header);
      size_t eq = header.find('=');
      if (ok && (eq == std::string::npos || eq == 0)) {
        return Fail("--otlp-header NAME=VALUE, like --otlp-header x-api-key=KEY");
      }
      if (ok) otlp.headers.emplace_back(header.substr(0, eq), header.substr(eq + 1));
    } else if (arg == "--egress-idle-timeout") {
      ok = value(&idle_timeout);
    } else if (arg == "--otlp-interval") {
      std::string interval;
      ok = value(&interval);
      if (ok && !absl::ParseDuration(interval, &otlp.interval)) {
        return Fail("--otlp-interval takes a duration like 10s or 1m");
      }
    } else if (arg == "--blob-store") {
      ok = value(&blob_url);
    } else if (arg == "--s3-endpoint") {
      ok = value(&blob_options.endpoint);
    } else if (arg == "--s3-region") {
      ok = value(&blob_options.region);
    } else if (arg == "--etcd") {
      ok = value(&number);
      etcd_config.endpoints.push_back(number);
    } else if (arg == "--etcd-ca") {
      ok = value(&etcd_config.ca_file);
    } else if (arg == "--etcd-cert") {
      ok = value(&etcd_config.cert_file);
    } else if (arg == "--etcd-key") {
      ok = value(&etcd_config.key_file);
    } else if (arg == "--etcd-prefix") {
      ok = value(&handoff_options.prefix);
    } else if (arg == "--host-id") {
      ok = value(&handoff_options.host_id);
    } else if (arg == "--host-lease-ttl") {
      ok = value(&number) && absl::SimpleAtoi(number, &handoff_options.ttl_seconds);
    } else if (arg == "--no-templates") {
      templates = false;
    } else if (arg == "--pool") {
      ok =
          value(&number) && absl::SimpleAtoi(number, &pool.max_per_kind) && pool.max_per_kind <= 64;
    } else if (arg == "--pool-memory") {
      ok = value(&number) && airlock::ParseByteSize(number, 1, &pool.memory_budget_bytes);
    } else if (arg == "--vmm-memory") {
      ok = value(&number) && airlock::ParseByteSize(number, 1, &vmm_memory_bytes) &&
           vmm_memory_bytes >= (64u << 20);
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "airlockd: bad argument %s\n%s", arg.c_str(), kUsage);
      return 2;
    }
  }
  std::optional<airlock::LogLevel> level = airlock::ParseLogLevel(log_level);
  if (!level) {
    std::fprintf(stderr, "airlockd: --log-level %s: give debug, info, warning or error\n",
                 log_level.c_str());
    return 2;
  }
  airlock::SetLogLevel(*level);
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
  airlock::SessionEventHub events;  // outlives the store, which publishes into it
  absl::StatusOr<std::unique_ptr<airlock::StateStore>> store =
      airlock::StateStore::Open(paths.home + "/state.db", log_cap);
  if (!store.ok()) return Fail(std::string(store.status().message()));
  (*store)->set_events(&events);
  // Before the session manager, which uses it until it is destroyed.
  std::unique_ptr<airlock::SessionHandoff> handoff;
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
    handoff_options.capacity_json =
        airlock::providers::EncodeHostCapacity(airlock::providers::MachineCapacity());
    absl::StatusOr<std::unique_ptr<airlock::SessionHandoff>> started =
        airlock::SessionHandoff::Start(*std::move(blobs), *std::move(etcd), handoff_options,
                                       *std::move(host_key));
    if (!started.ok()) return Fail(absl::StrCat("joining the fleet: ", started.status().message()));
    handoff = *std::move(started);
    airlock::LogInfo(absl::StrCat("host ", handoff->host_id(), " joined the fleet at ", blob_url));
  }
  airlock::QemuDriver driver(paths.qemu, vmm_memory_bytes);
  airlock::providers::LocalHost machine(&driver, handoff_options.host_id,
                                        airlock::providers::MachineCapacity());
  std::unique_ptr<airlock::FleetHosts> fleet;
  if (handoff != nullptr) fleet = std::make_unique<airlock::FleetHosts>(handoff.get(), &machine);
  airlock::providers::HostProvider* hosts = &machine;
  if (fleet != nullptr) hosts = fleet.get();
  std::unique_ptr<airlock::providers::LocalNetwork> network;  // outlives the sessions' proxies
  airlock::SessionManager sessions(store->get(), paths, hosts);
  sessions.set_handoff(handoff.get());
  sessions.set_use_templates(templates);
  sessions.set_pool(pool);
  const char* registry_internal = std::getenv("AIRLOCK_REGISTRY_ALLOW_INTERNAL");
  sessions.set_registry_internal(registry_internal != nullptr &&
                                 std::string(registry_internal) == "1");
  airlock::EgressSettings egress;
  std::shared_ptr<airlock::net::Resolver> resolver =
      std::make_shared<airlock::net::SystemResolver>();
  absl::StatusOr<std::shared_ptr<const airlock::net::EgressCeiling>> ceiling =
      LoadCeiling(ceiling_file);
  if (!ceiling.ok()) return Fail(std::string(ceiling.status().message()));
  egress.ceiling = *std::move(ceiling);
  if (absl::Duration idle; idle_timeout == "0") {
    egress.idle_timeout_ms = 0;
  } else if (absl::ParseDuration(idle_timeout, &idle) && idle >= absl::Seconds(1) &&
             idle <= absl::Hours(24 * 7)) {
    egress.idle_timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(idle));
  } else {
    return Fail("--egress-idle-timeout takes a duration from 1s to 168h, like 10m, or 0 (never)");
  }
  if (!hosts_file.empty()) {
    absl::StatusOr<std::string> text = airlock::ReadFileToString(hosts_file, 1 << 20);
    if (!text.ok()) return Fail(std::string(text.status().message()));
    auto named = airlock::net::StaticResolver::Parse(*text, resolver);
    if (!named.ok()) return Fail(absl::StrCat(hosts_file, ": ", named.status().message()));
    resolver = *std::move(named);
  }
  sessions.set_egress(std::move(egress));
  network = std::make_unique<airlock::providers::LocalNetwork>(std::move(resolver));
  sessions.set_network(network.get());
  absl::StatusOr<std::unique_ptr<airlock::SessionSecrets>> secrets =
      airlock::MakeSessionSecrets(upstream_ca, guest_ca, shared_secrets, tenant_guest_ca);
  if (!secrets.ok()) return Fail(std::string(secrets.status().message()));
  sessions.set_secrets(*std::move(secrets));
  if (!quota_file.empty()) {
    absl::StatusOr<airlock::Quotas> quotas = airlock::Quotas::Load(quota_file);
    if (!quotas.ok()) return Fail(std::string(quotas.status().message()));
    sessions.set_quotas(*std::move(quotas));
  } else {
    sessions.set_quotas(airlock::Quotas());
  }
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
  airlock::WorkspacesService workspaces_service(&sessions, store->get(), &peers, &uploads,
                                                paths.scratch);
  airlock::VmsService vms_service(&sessions, &peers);
  airlock::ImagesService images_service(paths, &sessions, store->get(), &peers);
  images_service.RemoveBuildLeftovers();
  airlock::NetworkService network_service(&sessions, store->get(), &peers);
  airlock::SecretsService secrets_service(&sessions, store->get(), &peers);
  airlock::AuditService audit_service(store->get(), &peers);
  grpc::ServerBuilder builder;
  builder.RegisterService(&sessions_service);
  builder.RegisterService(&vms_service);
  builder.RegisterService(&images_service);
  builder.RegisterService(&network_service);
  builder.RegisterService(&secrets_service);
  builder.RegisterService(&workspaces_service);
  builder.RegisterService(&audit_service);
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
        airlock::LogIfFailed(audit->Audit(unknown, "", "auth.refuse", "bearer token", why),
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
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return Fail("could not start the gRPC server");

  absl::StatusOr<std::unique_ptr<airlock::UnixListener>> listener =
      airlock::UnixListener::Bind(socket_path, group);
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
        LoadCeiling(ceiling_file);
    if (!reloaded.ok()) {
      airlock::LogError(absl::StrCat("egress ceiling not reloaded: ", reloaded.status().message()));
      continue;
    }
    sessions.set_ceiling(*std::move(reloaded));
    airlock::LogInfo(absl::StrCat("egress ceiling reloaded from ",
                                  ceiling_file.empty() ? "(default)" : ceiling_file));
  }
  airlock::LogInfo("shutting down");
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
