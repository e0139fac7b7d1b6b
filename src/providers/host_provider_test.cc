#include "src/providers/host_provider.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace airlock::providers {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

HostInfo Host(const std::string& id, uint64_t memory_gib, bool this_host = false) {
  HostInfo h{.id = id, .this_host = this_host};
  h.capacity = {.vcpus = 4, .memory_bytes = memory_gib * kGiB, .address = "10.0.0.1:7443"};
  if (this_host) h.capacity.address.clear();  // this host needs none
  return h;
}

TEST(ChooseHostTest, SpreadTakesTheMostFreePackTheLeastThatFits) {
  std::vector<HostInfo> hosts = {Host("a", 8, true), Host("b", 16), Host("c", 4)};
  std::map<std::string, HostUse> use = {{"b", {.vcpus = 2, .memory_bytes = 10 * kGiB}}};
  VmPlacement vm{.vcpus = 2, .memory_bytes = 2 * kGiB};
  // Free: a 8, b 6, c 4.
  EXPECT_EQ(*ChooseHost(hosts, use, vm, PlacementPolicy::kSpread), "a");
  EXPECT_EQ(*ChooseHost(hosts, use, vm, PlacementPolicy::kPack), "c");
  // A tie goes to this host.
  use["a"] = {.memory_bytes = 4 * kGiB};
  hosts[2].capacity.memory_bytes = 8 * kGiB;
  use["c"] = {.memory_bytes = 4 * kGiB};
  EXPECT_EQ(*ChooseHost(hosts, use, vm, PlacementPolicy::kPack), "a");
}

TEST(ChooseHostTest, HostsDownDrainingOrUnreachableTakeNothing) {
  std::vector<HostInfo> hosts = {Host("a", 1, true), Host("b", 16), Host("c", 16), Host("d", 16)};
  hosts[1].draining = true;
  hosts[2].up = false;
  hosts[3].capacity.address.clear();  // takes no forwarded calls
  VmPlacement vm{.vcpus = 1, .memory_bytes = 2 * kGiB};
  absl::StatusOr<std::string> chosen = ChooseHost(hosts, {}, vm, PlacementPolicy::kSpread);
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(chosen.status().message().find("no host of the fleet has 2.0GiB of memory free"),
            std::string::npos)
      << chosen.status();
  EXPECT_NE(chosen.status().message().find("1.0GiB on a"), std::string::npos) << chosen.status();
  hosts[0].draining = true;
  chosen = ChooseHost(hosts, {}, vm, PlacementPolicy::kSpread);
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kFailedPrecondition) << chosen.status();
}

TEST(ChooseHostTest, VcpusAreOvercommittedButCounted) {
  std::vector<HostInfo> hosts = {Host("a", 64, true)};
  std::map<std::string, HostUse> use = {{"a", {.vcpus = 4 * kVcpuOvercommit - 1}}};
  EXPECT_TRUE(
      ChooseHost(hosts, use, {.vcpus = 1, .memory_bytes = kGiB}, PlacementPolicy::kSpread).ok());
  absl::StatusOr<std::string> chosen =
      ChooseHost(hosts, use, {.vcpus = 2, .memory_bytes = kGiB}, PlacementPolicy::kSpread);
  ASSERT_FALSE(chosen.ok());
  EXPECT_NE(chosen.status().message().find("2 vCPUs free"), std::string::npos) << chosen.status();
}

TEST(ChooseHostTest, NoHostWithBothSaysWhichHasWhat) {
  std::vector<HostInfo> hosts = {Host("a", 64, true), Host("b", 4)};
  std::map<std::string, HostUse> use = {{"a", {.vcpus = 4 * kVcpuOvercommit}}};
  absl::StatusOr<std::string> chosen =
      ChooseHost(hosts, use, {.vcpus = 1, .memory_bytes = 8 * kGiB}, PlacementPolicy::kSpread);
  ASSERT_FALSE(chosen.ok());
  EXPECT_NE(chosen.status().message().find("has both 8.0GiB of memory and 1 vCPUs free"),
            std::string::npos)
      << chosen.status();
  EXPECT_NE(chosen.status().message().find("a has the most memory, b the most vCPUs"),
            std::string::npos)
      << chosen.status();
}

TEST(CheckRoomTest, SaysWhatTheHostHasAgainstWhatIsAsked) {
  HostInfo b = Host("b", 2);
  std::map<std::string, HostUse> use = {{"b", {.vcpus = 1, .memory_bytes = 1536ull << 20}}};
  EXPECT_TRUE(CheckRoom(b, use, {.vcpus = 1, .memory_bytes = 512ull << 20}).ok());
  absl::Status room = CheckRoom(b, use, {.vcpus = 1, .memory_bytes = kGiB});
  EXPECT_EQ(room.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(room.message().find("host b has 512MiB of memory and 15 vCPUs free"), std::string::npos)
      << room;
  b.draining = true;
  EXPECT_EQ(CheckRoom(b, use, {.vcpus = 1}).code(), absl::StatusCode::kFailedPrecondition);
  b.draining = false;
  b.capacity.address.clear();
  EXPECT_NE(CheckRoom(b, use, {.vcpus = 1}).message().find("takes no forwarded calls"),
            std::string::npos);
  b.up = false;
  EXPECT_EQ(CheckRoom(b, use, {.vcpus = 1}).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace airlock::providers
