#include "src/daemon/daemon_flags.h"

#include <cstdio>
#include <cstdlib>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "src/common/byte_size.h"

namespace airlock {
namespace {

constexpr char kDescription[] =
    "Serves the Airlock API. State lives in $AIRLOCK_HOME (default /var/lib/airlock).";

constexpr char kFooter[] =
    "Pulls airlockd makes for users other than root never use the host's registry logins, and\n"
    "reach registries on loopback, private or link-local addresses only with\n"
    "AIRLOCK_REGISTRY_ALLOW_INTERNAL=1.";

// "NAME=VALUE" into its two halves, both non-empty (VALUE may hold '=' for `name_last`).
bool SplitPair(absl::string_view entry, bool name_last, std::pair<std::string, std::string>* out) {
  size_t eq = name_last ? entry.rfind('=') : entry.find('=');
  if (eq == absl::string_view::npos || eq == 0 || eq + 1 == entry.size()) return false;
  *out = {std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1))};
  return true;
}

// Entries of a variable that holds several, separated by spaces.
std::vector<std::string> EnvList(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return {};
  return absl::StrSplit(value, ' ', absl::SkipEmpty());
}

int Refuse(const std::string& message) {
  std::fprintf(stderr, "airlockd: %s\n", message.c_str());
  return 2;
}

}  // namespace

std::variant<DaemonFlags, int> ParseDaemonFlags(int argc, const char* const* argv) {
  DaemonFlags f;
  std::string pool_memory, vmm_memory, idle_timeout = "10m", otlp_interval = "10s";
  std::string capacity_memory;
  std::string e2b_volume_size;
  std::vector<std::string> guest_ca_for, otlp_headers;
  CLI::App app(kDescription, "airlockd");
  app.footer(kFooter);
  app.get_formatter()->column_width(26);
  app.add_option("--socket", f.socket_path, "Unix socket")
      ->envname("AIRLOCK_SOCKET")
      ->capture_default_str();
  app.add_option("--group", f.group, "group allowed to use the socket (else root only)")
      ->capture_default_str();
  app.add_option("--log-cap", f.log_cap, "command output kept per session, in bytes")
      ->check(CLI::Validator(
          [](std::string& text) {
            uint64_t n = 0;
            return absl::SimpleAtoi(text, &n) && n >= 4096 ? std::string()
                                                           : std::string("give 4096 or more");
          },
          "at least 4096"))
      ->capture_default_str();
  app.add_option("--log-level", f.log_level,
                 "the least level of airlockd's own log on stderr: debug, info,\n"
                 "warning or error")
      ->envname("AIRLOCK_LOG_LEVEL")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}))
      ->capture_default_str();
  app.add_flag_function(
      "--no-templates", [&f](int64_t) { f.templates = false; },
      "boot every VM instead of restoring the image's ready snapshot\n"
      "(slower; for measuring cold boots and for debugging)");
  app.add_flag_function(
      "--no-activity-record", [&f](int64_t) { f.activity_record = false; },
      "keep no activity record (the programs and files each session's\n"
      "guest sees, in `airlock log`); for measuring its cost");
  app.add_option("--pool", f.pool,
                 "keep up to N VMs per image and shape restored ahead of need, so a\n"
                 "create or `airlock run` takes one that already runs (0: no pool).\n"
                 "Each VM serves one session only; a kind nobody asks for in 5\n"
                 "minutes is emptied. 0 also keeps no fork helper ahead of need")
      ->envname("AIRLOCK_POOL")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--pool-memory", pool_memory,
                 "the guest RAM of all pooled VMs together, like 2g (default: an\n"
                 "eighth of the host's memory)");
  app.add_option("--vmm-memory", vmm_memory,
                 "host memory each VM process may use beyond its guest's RAM (TCG's\n"
                 "code cache, QEMU's own); a VM past RAM + this is ended by the host,\n"
                 "with that reason (default 384m under TCG, 128m under KVM; at least\n"
                 "64m)");
  app.add_option("--listen-tcp", f.tcp,
                 "also listen on TCP (HOST:PORT), with TLS (--tls-cert, --tls-key)\n"
                 "and a way to know each caller: a client certificate signed by\n"
                 "--tls-client-ca (its common name is the tenant: cert:NAME), or a\n"
                 "bearer token from an OpenID Connect provider, or either");
  app.add_option("--tls-cert", f.cert, "the TCP listener's certificate (PEM)");
  app.add_option("--tls-key", f.key, "its private key (PEM)");
  app.add_option("--tls-client-ca", f.client_ca, "the CA that signs callers' certificates (PEM)");
  app.add_option("--oidc-issuer", f.oidc_issuer,
                 "the provider's issuer (the tokens' iss); with --oidc-audience ID\n"
                 "(the tokens' aud) and --oidc-jwks FILE|URL (the provider's keys:\n"
                 "its https:// jwks_uri, or a file saved from it; read again, at most\n"
                 "every 30 s, when a token names a key it lacks). Tokens are JWTs\n"
                 "signed RS256 or ES256, sent as `authorization: Bearer JWT`; the\n"
                 "tenant is oidc:ISSUER#SUBJECT. Refused tokens are audited");
  app.add_option("--oidc-audience", f.oidc_audience, "the tokens' audience");
  app.add_option("--oidc-jwks", f.oidc_jwks, "the provider's keys: a URL or a file");
  app.add_option("--oidc-jwks-ca", f.oidc_jwks_ca,
                 "verifies the provider's certificate instead of the host's CA store");
  app.add_option("--http-listen", f.http_listen,
                 "the HTTP gateway, through which guest ports are reached as URLs\n"
                 "(`airlock expose`): HOST:PORT, or `off`. Anything but loopback\n"
                 "needs --http-tls-cert and --http-tls-key. If the default port is\n"
                 "taken airlockd serves without a gateway and says so")
      ->envname("AIRLOCK_HTTP_LISTEN")
      ->capture_default_str();
  app.add_option("--http-domain", f.http_domain,
                 "exposed ports are named PORT-ID.DOMAIN (a wildcard name that\n"
                 "reaches this host; *.localhost does in browsers and curl)")
      ->envname("AIRLOCK_HTTP_DOMAIN")
      ->capture_default_str();
  app.add_option("--http-tls-cert", f.http_cert,
                 "the gateway's certificate (PEM, for *.DOMAIN): it speaks HTTPS");
  app.add_option("--http-tls-key", f.http_key, "its private key (PEM)");
  app.add_option("--http-public", f.http_public,
                 "whether an exposed port may be public (no token): allow or deny")
      ->envname("AIRLOCK_HTTP_PUBLIC")
      ->check(CLI::IsMember({"allow", "deny"}))
      ->capture_default_str();
  app.add_option("--egress-ceiling", f.ceiling_file,
                 "what sessions may ever be allowed to reach: lines of `allow RULE`\n"
                 "/ `deny RULE` (RULE as in --allow, plus * for any name and :* for\n"
                 "any port). Default: `allow *:*`, i.e. public addresses only;\n"
                 "internal ones (loopback, private, link-local, metadata) need an\n"
                 "explicit `allow CIDR` line")
      ->envname("AIRLOCK_EGRESS_CEILING");
  app.add_option("--egress-hosts", f.hosts_file,
                 "names resolved from this file (`ADDRESS NAME...` lines, as in\n"
                 "/etc/hosts) before the host's resolver, for sessions' egress")
      ->envname("AIRLOCK_EGRESS_HOSTS");
  app.add_option("--egress-idle-timeout", idle_timeout,
                 "an egress connection that carries no byte either way for this long\n"
                 "is ended (0: never). Each tenant's open connections are also\n"
                 "counted against its `connections` quota")
      ->envname("AIRLOCK_EGRESS_IDLE_TIMEOUT")
      ->capture_default_str();
  app.add_option("--upstream-ca", f.upstream_ca,
                 "PEM certificates trusted, besides the host's store, when airlockd\n"
                 "connects to a host a session's secret is bound to (a private CA)")
      ->envname("AIRLOCK_UPSTREAM_CA");
  app.add_option("--guest-ca", f.guest_ca,
                 "PEM certificates every guest trusts besides its image's own: a\n"
                 "network that inspects TLS (a company's proxy) re-signs with its\n"
                 "CA. Added to the system bundle and named by SSL_CERT_FILE,\n"
                 "REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO, PIP_CERT and\n"
                 "NODE_EXTRA_CA_CERTS in every command")
      ->envname("AIRLOCK_GUEST_CA");
  app.add_option("--guest-ca-for", guest_ca_for,
                 "TENANT=FILE: the same for one tenant's guests only, on top of\n"
                 "--guest-ca (TENANT as `airlock whoami` prints it; repeatable; or\n"
                 "$AIRLOCK_GUEST_CA_FOR, entries separated by spaces)");
  app.add_option("--shared-secrets", f.shared_secrets,
                 "secrets airlockd reads itself, with its own environment, files and\n"
                 "1Password login, for the tenants and hosts each line names:\n"
                 "`NAME SOURCE@HOST[,HOST...][?OPTIONS] TENANT...` (TENANT as\n"
                 "`airlock whoami` prints it, or *); a tenant binds one with\n"
                 "--secret VAR=shared:NAME@HOST. Every other source is read by the\n"
                 "client with its user's rights")
      ->envname("AIRLOCK_SHARED_SECRETS");
  app.add_option("--quota-file", f.quota_file,
                 "what each tenant's sessions may hold at once: lines of `default\n"
                 "KEY=VALUE...` and `tenant NAME KEY=VALUE...` with keys sessions,\n"
                 "running, vcpus, memory, disk, logs, images, connections, forks,\n"
                 "pull (sizes like 8g). Defaults: sessions=64 running=16 vcpus=32\n"
                 "memory=32g disk=512g logs=1g images=32g connections=1024 forks=16\n"
                 "pull=8g. `airlock quota` shows a tenant its own")
      ->envname("AIRLOCK_QUOTA_FILE");
  app.add_option("--e2b-templates", f.e2b_templates,
                 "E2B template names the E2B-compatible API maps to images: lines of\n"
                 "`NAME IMAGE` (like `code-interpreter-v1 airlock/bookworm-python`).\n"
                 "`base` is the default image unless mapped; other names must be\n"
                 "images or snapshots of the caller's of that name")
      ->envname("AIRLOCK_E2B_TEMPLATES");
  app.add_option("--e2b-volume-size", e2b_volume_size,
                 "the size of a volume made through the E2B-compatible API (E2B's\n"
                 "volumes have none; it counts against the tenant's disk quota).\n"
                 "Default 10g")
      ->envname("AIRLOCK_E2B_VOLUME_SIZE");
  app.add_option("--operator", f.operators,
                 "a read-only operator (repeat for more): sees every tenant's\n"
                 "sessions, VMs, metrics, events and the audit log, and may change\n"
                 "nothing (the dashboard connects as one). PRINCIPAL is uid:UID,\n"
                 "cert:COMMON-NAME, oidc:ISSUER#SUBJECT or oidc-group:NAME (or\n"
                 "$AIRLOCK_OPERATORS, entries separated by spaces)");
  app.add_option("--otlp-endpoint", f.otlp_endpoint,
                 "send OpenTelemetry metrics, traces (a span per call, continuing a\n"
                 "caller's traceparent) and the audit log as logs to this OTLP/HTTP\n"
                 "collector, like http://collector:4318. Never waits for it: what it\n"
                 "cannot take is dropped and counted")
      ->envname("OTEL_EXPORTER_OTLP_ENDPOINT");
  app.add_option("--otlp-header", otlp_headers,
                 "NAME=VALUE: a header for every request to it (an API key);\n"
                 "repeatable");
  app.add_option("--otlp-interval", otlp_interval, "how often metrics and logs are sent")
      ->capture_default_str();
  app.add_option("--blob-store", f.blob_store,
                 "hosts of a fleet hand paused sessions to each other: a pause\n"
                 "uploads the snapshot here, by content (s3://BUCKET[/PREFIX], with\n"
                 "--s3-endpoint https://HOST[:PORT] for a store other than AWS and\n"
                 "--s3-region, credentials from $AWS_ACCESS_KEY_ID and\n"
                 "$AWS_SECRET_ACCESS_KEY; or file:///DIR, a directory the hosts\n"
                 "share), and a resume on any host fetches it. Needs --etcd, where\n"
                 "the hosts keep which of them runs each session (a lease per host)\n"
                 "and each session's last snapshot. Every host of a fleet needs the\n"
                 "same $AIRLOCK_HOME/host.key (it signs snapshots) and the images\n"
                 "its sessions use");
  app.add_option("--s3-endpoint", f.s3_endpoint, "the S3-compatible store's URL");
  app.add_option("--s3-region", f.s3_region, "its region");
  app.add_option("--blob-store-timeout", f.blob_store_timeout_seconds,
                 "seconds a blob store request may move no byte before it is\n"
                 "given up (each is tried 4 times): a store that hangs fails a\n"
                 "pause's publishing or a resume's fetch, never blocks it")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--etcd", f.etcd,
                 "an etcd endpoint, http://127.0.0.1:2379 or https://HOST:PORT\n"
                 "(repeatable); --etcd-ca, --etcd-cert and --etcd-key for TLS");
  app.add_option("--etcd-ca", f.etcd_ca, "etcd's CA (PEM)");
  app.add_option("--etcd-cert", f.etcd_cert, "this host's certificate for etcd (PEM)");
  app.add_option("--etcd-key", f.etcd_key, "its private key (PEM)");
  app.add_option("--etcd-prefix", f.etcd_prefix, "the fleet's keys in etcd")->capture_default_str();
  app.add_option("--host-id", f.host_id, "this host in the fleet (default: the host name)");
  app.add_option("--host-lease-ttl", f.host_lease_ttl_seconds,
                 "seconds after which a host that stopped answering loses its\n"
                 "sessions to the others")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--fleet-listen", f.fleet_listen,
                 "HOST:PORT where the other hosts of the fleet pass this one\n"
                 "the calls for sessions it runs (mutual TLS between hosts; a call\n"
                 "on any host reaches the session wherever it runs). Needs\n"
                 "--fleet-cert, --fleet-key and --fleet-ca");
  app.add_option("--fleet-cert", f.fleet_cert,
                 "this host's certificate (PEM) for the other hosts: signed by\n"
                 "--fleet-ca, naming the host id (CN and DNS subjectAltName)");
  app.add_option("--fleet-key", f.fleet_key, "its private key (PEM)");
  app.add_option("--fleet-ca", f.fleet_ca,
                 "the fleet's own CA (PEM), which signs the hosts' certificates and\n"
                 "nothing else: a peer it signed may act for any caller");
  app.add_option("--placement", f.placement,
                 "where a fleet makes a new session: spread (on the host with the\n"
                 "most memory free) or pack (the least that still fits)")
      ->check(CLI::IsMember({"spread", "pack"}))
      ->capture_default_str();
  app.add_option("--capacity-memory", capacity_memory,
                 "the memory this host offers a fleet's sessions, like 64g\n"
                 "(default: the machine's)");
  app.add_option("--capacity-vcpus", f.capacity_vcpus,
                 "the CPUs it offers them (default: the machine's); each backs\n"
                 "up to 4 sessions' vCPUs")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--host-pool", f.host_pool,
                 "a file of hosts this one starts (each an airlockd of the fleet) when\n"
                 "no host has room for a create, and releases when they run nothing\n"
                 "(see the README); needs --fleet-listen");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; what was wrong is said on stderr
  }

  bool fleet_given = !f.fleet_listen.empty() || !f.fleet_cert.empty() || !f.fleet_key.empty() ||
                     !f.fleet_ca.empty();
  bool fleet_whole = !f.fleet_listen.empty() && !f.fleet_cert.empty() && !f.fleet_key.empty() &&
                     !f.fleet_ca.empty();
  if (fleet_given && !fleet_whole) {
    return Refuse(
        "--fleet-listen, --fleet-cert, --fleet-key and --fleet-ca go together: where the other "
        "hosts reach this one, its certificate and key, and the CA that signs the hosts'");
  }
  if (!f.host_pool.empty() && !fleet_given) {
    return Refuse(
        "--host-pool starts hosts that take this one's forwarded creates: give --fleet-listen, "
        "--fleet-cert, --fleet-key and --fleet-ca too");
  }
  if (fleet_given && f.etcd.empty()) {
    return Refuse("--fleet-listen is for a fleet: give --etcd and --blob-store too");
  }
  f.http_listen_given =
      app.get_option("--http-listen")->count() > 0 || std::getenv("AIRLOCK_HTTP_LISTEN") != nullptr;
  f.http_domain = absl::AsciiStrToLower(f.http_domain);
  if (f.http_domain.empty() || f.http_domain.front() == '.' || f.http_domain.back() == '.' ||
      f.http_domain.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") !=
          std::string::npos) {
    return Refuse("--http-domain takes a DNS name like airlock.localhost or preview.example.com");
  }
  auto byte_size = [](const std::string& text, uint64_t least, uint64_t* out) {
    return text.empty() || (ParseByteSize(text, 1, out) && *out >= least);
  };
  if (!byte_size(capacity_memory, 64u << 20, &f.capacity_memory_bytes)) {
    return Refuse("--capacity-memory takes a size of at least 64m, like 64g");
  }
  if (!byte_size(pool_memory, 1, &f.pool_memory_bytes)) {
    return Refuse("--pool-memory takes a size like 2g");
  }
  if (!byte_size(vmm_memory, 64u << 20, &f.vmm_memory_bytes)) {
    return Refuse("--vmm-memory takes a size of at least 64m, like 384m");
  }
  if (!byte_size(e2b_volume_size, 16u << 20, &f.e2b_volume_bytes)) {
    return Refuse("--e2b-volume-size takes a size of at least 16m, like 10g");
  }
  if (absl::Duration idle; idle_timeout == "0") {
    f.egress_idle_timeout_ms = 0;
  } else if (absl::ParseDuration(idle_timeout, &idle) && idle >= absl::Seconds(1) &&
             idle <= absl::Hours(24 * 7)) {
    f.egress_idle_timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(idle));
  } else {
    return Refuse("--egress-idle-timeout takes a duration from 1s to 168h, like 10m, or 0 (never)");
  }
  if (!absl::ParseDuration(otlp_interval, &f.otlp_interval) || f.otlp_interval < absl::Seconds(1)) {
    return Refuse("--otlp-interval takes a duration of at least 1s, like 10s or 1m");
  }
  for (const std::string& header : otlp_headers) {
    std::pair<std::string, std::string> pair;
    if (!SplitPair(header, false, &pair)) {
      return Refuse("--otlp-header NAME=VALUE, like --otlp-header x-api-key=KEY");
    }
    f.otlp_headers.push_back(std::move(pair));
  }
  std::vector<std::string> env_for = EnvList("AIRLOCK_GUEST_CA_FOR");
  guest_ca_for.insert(guest_ca_for.begin(), env_for.begin(), env_for.end());
  for (const std::string& entry : guest_ca_for) {
    std::pair<std::string, std::string> pair;
    if (!SplitPair(entry, true, &pair)) {
      return Refuse(
          "--guest-ca-for (and $AIRLOCK_GUEST_CA_FOR) take TENANT=FILE, like "
          "uid:1000=/etc/airlock/ca.pem");
    }
    f.tenant_guest_ca[pair.first] = pair.second;
  }
  std::vector<std::string> env_operators = EnvList("AIRLOCK_OPERATORS");
  f.operators.insert(f.operators.begin(), env_operators.begin(), env_operators.end());
  return f;
}

}  // namespace airlock
