// airlockd's command line (CLI11, as the CLI's), with the environment variables that stand for
// its flags when a daemon is started without them (as the CLI starts one): what main needs to
// start, parsed and checked, or the exit code and what was printed.
#ifndef AIRLOCK_DAEMON_DAEMON_FLAGS_H_
#define AIRLOCK_DAEMON_DAEMON_FLAGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/time/time.h"

namespace airlock {

struct DaemonFlags {
  std::string socket_path = "/run/airlock/airlockd.sock";
  std::string group = "airlock";
  uint64_t log_cap = 16ull << 20;
  std::string log_level = "info";
  bool templates = true;
  bool activity_record = true;     // each session's guest records what its programs do
  int pool = 2;                    // VMs per kind in the warm pool
  uint64_t pool_memory_bytes = 0;  // 0: an eighth of the host's memory
  uint64_t vmm_memory_bytes = 0;   // 0: QemuDriver's default
  // TCP with TLS, and OIDC.
  std::string tcp, cert, key, client_ca;
  std::string oidc_issuer, oidc_audience, oidc_jwks, oidc_jwks_ca;
  // The HTTP gateway: guest ports as URLs.
  std::string http_listen = "127.0.0.1:8790";  // "off": none
  bool http_listen_given = false;              // not the default: failing to bind is fatal
  std::string http_domain = "airlock.localhost";
  std::string http_cert, http_key;
  std::string http_public = "allow";
  // Egress and secrets.
  std::string ceiling_file, hosts_file, upstream_ca, guest_ca, shared_secrets, quota_file;
  std::string e2b_templates;                           // E2B template names to images
  uint64_t e2b_volume_bytes = 10ull << 30;             // a volume made through the E2B API
  std::map<std::string, std::string> tenant_guest_ca;  // tenant -> file
  int egress_idle_timeout_ms = 10 * 60 * 1000;         // 0: never
  std::vector<std::string> operators;
  // OpenTelemetry.
  std::string otlp_endpoint;
  std::vector<std::pair<std::string, std::string>> otlp_headers;
  absl::Duration otlp_interval = absl::Seconds(10);
  // A fleet.
  std::string blob_store, s3_endpoint, s3_region;
  int blob_store_timeout_seconds = 60;
  std::vector<std::string> etcd;
  std::string etcd_ca, etcd_cert, etcd_key;
  std::string etcd_prefix = "/airlock";
  std::string host_id;  // empty: the host name
  int host_lease_ttl_seconds = 10;
  // Forwarding between hosts (fleet_forward.h): where the others reach this one, with mutual
  // TLS under the fleet's own CA.
  std::string fleet_listen, fleet_cert, fleet_key, fleet_ca;
  std::string placement = "spread";  // or "pack": providers::PlacementPolicy
  // What this host offers a fleet's sessions; 0: the machine's.
  uint64_t capacity_memory_bytes = 0;
  uint32_t capacity_vcpus = 0;
  std::string host_pool;  // a pool file (providers::ParseHostPool); empty: none
};

// The flags of argv, and of the environment for those not given (see the help), or the exit
// code main returns: 0 after --help, 2 for a flag or value that is wrong (said on stderr).
std::variant<DaemonFlags, int> ParseDaemonFlags(int argc, const char* const* argv);

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_DAEMON_FLAGS_H_
