#include "src/daemon/daemon_flags.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

namespace airlock {
namespace {

std::variant<DaemonFlags, int> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "airlockd");
  return ParseDaemonFlags(static_cast<int>(args.size()), args.data());
}

TEST(DaemonFlagsTest, FlagsThenTheirVariablesThenTheDefaults) {
  unsetenv("AIRLOCK_POOL");
  setenv("AIRLOCK_QUOTA_FILE", "/etc/airlock/quotas", 1);
  setenv("AIRLOCK_OPERATORS", "uid:1 cert:dash", 1);
  setenv("AIRLOCK_GUEST_CA_FOR", "uid:1000=/etc/a.pem", 1);
  std::variant<DaemonFlags, int> parsed =
      Parse({"--socket", "/run/x.sock", "--pool", "0", "--vmm-memory", "256m", "--operator",
             "uid:2", "--etcd", "http://a:2379", "--etcd", "http://b:2379", "--otlp-header",
             "x-api-key=k=v", "--egress-idle-timeout", "30m", "--no-templates", "--guest-ca-for",
             "oidc:https://idp.test#bob=/etc/b.pem"});
  unsetenv("AIRLOCK_QUOTA_FILE");
  unsetenv("AIRLOCK_OPERATORS");
  unsetenv("AIRLOCK_GUEST_CA_FOR");
  ASSERT_TRUE(std::holds_alternative<DaemonFlags>(parsed)) << std::get<int>(parsed);
  const DaemonFlags& f = std::get<DaemonFlags>(parsed);
  EXPECT_EQ(f.socket_path, "/run/x.sock");
  EXPECT_EQ(f.pool, 0);
  EXPECT_EQ(f.vmm_memory_bytes, 256u << 20);
  EXPECT_FALSE(f.templates);
  EXPECT_EQ(f.quota_file, "/etc/airlock/quotas");
  EXPECT_EQ(f.operators, (std::vector<std::string>{"uid:1", "cert:dash", "uid:2"}));
  EXPECT_EQ(f.etcd, (std::vector<std::string>{"http://a:2379", "http://b:2379"}));
  ASSERT_EQ(f.otlp_headers.size(), 1u);
  EXPECT_EQ(f.otlp_headers[0].second, "k=v");
  EXPECT_EQ(f.egress_idle_timeout_ms, 30 * 60 * 1000);
  EXPECT_EQ(f.tenant_guest_ca.at("uid:1000"), "/etc/a.pem");
  EXPECT_EQ(f.tenant_guest_ca.at("oidc:https://idp.test#bob"), "/etc/b.pem");
  // Defaults.
  EXPECT_EQ(f.group, "airlock");
  EXPECT_EQ(f.log_cap, 16u << 20);
  EXPECT_EQ(f.log_level, "info");
  EXPECT_EQ(f.host_lease_ttl_seconds, 10);
  EXPECT_EQ(f.etcd_prefix, "/airlock");
  EXPECT_EQ(f.placement, "spread");
  EXPECT_EQ(f.capacity_memory_bytes, 0u);
}

TEST(DaemonFlagsTest, WrongFlagsAndValuesAreRefused) {
  for (std::vector<const char*> args : std::vector<std::vector<const char*>>{
           {"--nope"},
           {"--pool", "65"},
           {"--pool"},
           {"--log-cap", "100"},
           {"--log-level", "loud"},
           {"--vmm-memory", "1m"},
           {"--egress-idle-timeout", "forever"},
           {"--otlp-header", "novalue"},
           {"--guest-ca-for", "uid:1000"},
           {"--host-lease-ttl", "0"},
           {"--placement", "random"},
           {"--capacity-memory", "1m"},
           {"--capacity-vcpus", "0"},
           {"--host-pool", "/etc/airlock/pool.json"},
           // Forwarding needs all four, and a fleet.
           {"--fleet-listen", "127.0.0.1:7443"},
           {"--fleet-listen", "127.0.0.1:7443", "--fleet-cert", "a.pem", "--fleet-key", "a.key",
            "--fleet-ca", "ca.pem"}}) {
    std::variant<DaemonFlags, int> parsed = Parse(args);
    ASSERT_TRUE(std::holds_alternative<int>(parsed)) << args[0];
    EXPECT_NE(std::get<int>(parsed), 0) << args[0];
  }
  std::variant<DaemonFlags, int> help = Parse({"--help"});
  ASSERT_TRUE(std::holds_alternative<int>(help));
  EXPECT_EQ(std::get<int>(help), 0);
}

}  // namespace
}  // namespace airlock
