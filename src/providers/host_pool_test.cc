#include "src/providers/host_pool.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <string>

#include "src/common/file_util.h"
#include "src/testing/test_util.h"

namespace airlock::providers {
namespace {

constexpr VmPlacement kVm = {.vcpus = 1, .memory_bytes = 512ull << 20};

TEST(HostPoolFileTest, ReadsHostsAndSaysWhatIsWrong) {
  absl::StatusOr<HostPoolConfig> config = ParseHostPool(R"({"release_after_seconds": 30,
      "hosts": [{"id": "pool-1", "home": "/var/lib/airlock-pool-1",
                 "argv": ["/usr/local/bin/airlockd", "--host-id", "pool-1"],
                 "env": ["AWS_ACCESS_KEY_ID=k"], "memory": "8g", "cpus": 4}]})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->release_after, absl::Seconds(30));
  ASSERT_EQ(config->hosts.size(), 1u);
  EXPECT_EQ(config->hosts[0].argv[2], "pool-1");
  EXPECT_EQ(config->hosts[0].env[0], "AWS_ACCESS_KEY_ID=k");
  EXPECT_EQ(config->hosts[0].memory_bytes, uint64_t{8} << 30);
  EXPECT_EQ(config->hosts[0].cpus, 4u);
  for (const char* bad : {
           "[]",
           R"({"hosts": []})",
           R"({"hosts": [{"id": "a", "home": "rel", "argv": ["/x", "--host-id", "a"]}]})",
           R"({"hosts": [{"id": "a", "home": "/h", "argv": ["x", "--host-id", "a"]}]})",
           R"({"hosts": [{"id": "a", "home": "/h", "argv": ["/x", "--host-id", "b"]}]})",
           R"({"hosts": [{"id": "a", "home": "/h", "argv": ["/x", "--host-id", "a"],
               "env": ["AIRLOCK_HOME=/elsewhere"]}]})",
           R"({"hosts": [{"id": "a", "home": "/h", "argv": ["/x", "--host-id", "a"]},
                         {"id": "a", "home": "/g", "argv": ["/x", "--host-id", "a"]}]})",
           R"({"release_after_seconds": 0,
               "hosts": [{"id": "a", "home": "/h", "argv": ["/x", "--host-id", "a"]}]})",
           R"({"hosts": [{"id": "a", "home": "/h", "argv": ["/x", "--host-id", "a"],
               "memory": "1m"}]})",
           R"({"hosts": [{"id": "a", "home": "/h", "argv": ["/x", "--host-id", "a"],
               "memory": 8}]})",
           R"({"hosts": [{"id": "a", "home": "/h", "argv": ["/x", "--host-id", "a"],
               "cpus": 0}]})",
       }) {
    absl::StatusOr<HostPoolConfig> refused = ParseHostPool(bad);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// A host of the pool is a process in its home; it runs until released, is found again by a new
// pool (an airlockd started again), and the pool starts each host once.
TEST(ProcessHostPoolTest, StartsFindsAndReleasesItsHosts) {
  testing::TempDir dir;
  auto host = [&](const std::string& id) {
    // Stands in for airlockd: runs until SIGTERM.
    return PoolHost{.id = id,
                    .home = dir.File(id),
                    .argv = {"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done",
                             "--host-id", id}};
  };
  std::vector<PoolHost> hosts = {host("p1"), host("p2")};
  ProcessHostPool pool(hosts);
  EXPECT_TRUE(pool.Started().empty());
  absl::StatusOr<std::string> first = pool.Start(kVm);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, "p1");
  EXPECT_EQ(*pool.Start(kVm), "p2");
  EXPECT_EQ(pool.Start(kVm).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.Started(), (std::vector<std::string>{"p1", "p2"}));
  {
    ProcessHostPool again(hosts);
    EXPECT_EQ(again.Started(), (std::vector<std::string>{"p1", "p2"}));
  }
  ASSERT_TRUE(pool.Release("p1").ok());
  EXPECT_EQ(pool.Started(), (std::vector<std::string>{"p2"}));
  EXPECT_EQ(pool.Release("nope").code(), absl::StatusCode::kNotFound);
  // A pid file that names another program is not the host's.
  ASSERT_TRUE(WriteFileAtomically(dir.File("p1") + "/pool.pid", "1\n", 0600).ok());
  EXPECT_EQ(pool.Started(), (std::vector<std::string>{"p2"}));
  EXPECT_EQ(*pool.Start(kVm), "p1");
  ASSERT_TRUE(pool.Release("p1").ok());
  ASSERT_TRUE(pool.Release("p2").ok());
  EXPECT_TRUE(pool.Started().empty());
}

// A host whose size the pool file says is started only for a session it can hold.
TEST(ProcessHostPoolTest, StartsOnlyAHostLargeEnoughForTheSession) {
  testing::TempDir dir;
  auto host = [&](const std::string& id, uint64_t memory, uint32_t cpus) {
    return PoolHost{.id = id,
                    .home = dir.File(id),
                    .argv = {"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done",
                             "--host-id", id},
                    .memory_bytes = memory,
                    .cpus = cpus};
  };
  ProcessHostPool pool({host("small", 1ull << 30, 1), host("large", 8ull << 30, 2)});
  absl::StatusOr<std::string> refused = pool.Start({.vcpus = 1, .memory_bytes = 16ull << 30});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find(
                "no host of the pool left to start holds 16.0GiB and 1 vCPUs (the largest: large "
                "with 8.0GiB and 2 CPUs)"),
            std::string::npos)
      << refused.status();
  EXPECT_TRUE(pool.Started().empty());
  EXPECT_EQ(pool.Start({.vcpus = 9, .memory_bytes = 1ull << 30}).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(*pool.Start({.vcpus = 2, .memory_bytes = 2ull << 30}), "large");
  EXPECT_EQ(*pool.Start({.vcpus = 1, .memory_bytes = 512ull << 20}), "small");
  ASSERT_TRUE(pool.Release("small").ok());
  ASSERT_TRUE(pool.Release("large").ok());
}

}  // namespace
}  // namespace airlock::providers
