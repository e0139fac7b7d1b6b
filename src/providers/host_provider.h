// HostProvider: where a session's VM runs. A VM is placed on a host with room for its shape and
// started through that host's VmDriver; VMs this host runs already are found again and ended
// through its own driver. LocalHost is this machine alone. In a fleet the hosts share their
// paused sessions (src/daemon/session_handoff.h) and each places the VMs it is asked for on
// itself (FleetHosts there lists them all); a cloud provider that starts instances on demand
// is another class behind the same calls.
#ifndef AIRLOCK_PROVIDERS_HOST_PROVIDER_H_
#define AIRLOCK_PROVIDERS_HOST_PROVIDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "src/vm/vm_driver.h"

namespace airlock::providers {

inline constexpr uint32_t kMaxHostVcpus = 1u << 20;
inline constexpr size_t kMaxHostAddress = 256;

// What a host offers VMs.
struct HostCapacity {
  uint32_t vcpus = 0;
  uint64_t memory_bytes = 0;
  // Where the other hosts of a fleet forward calls to it (airlockd --fleet-listen); empty: none.
  std::string address;
};

struct HostInfo {
  std::string id;
  HostCapacity capacity;
  std::vector<std::string> sessions;  // those it runs now, when the provider knows them
  bool this_host = false;
  bool draining = false;  // being drained (airlock hosts drain): it takes nothing new
  bool up = true;         // registered with the fleet now
};

// What a VM to be placed needs.
struct VmPlacement {
  uint32_t vcpus = 1;
  uint64_t memory_bytes = 0;  // its guest RAM
};

// How a fleet places a new session among the hosts with room for it: kSpread on the one with
// the most memory free (sessions spread out, each host's share of a failure small), kPack on the
// one with the least that still fits (hosts left empty may be released).
enum class PlacementPolicy { kSpread, kPack };

// What a host's running sessions hold.
struct HostUse {
  uint32_t vcpus = 0;
  uint64_t memory_bytes = 0;
};

// A CPU of a host backs this many of its sessions' vCPUs at most (guests are mostly idle; their
// memory is the hard limit).
inline constexpr uint32_t kVcpuOvercommit = 4;

// The host a VM of this shape goes to: among `hosts` that are up, not draining and reachable
// (this one, or one that takes forwarded calls: capacity.address), one whose memory and vCPUs
// free (capacity less `use`, by host id) hold it, chosen by `policy`; ties go to this host, then
// to the first in `hosts`. RESOURCE_EXHAUSTED saying which resource no host has, and the most any
// has, when none fits; FAILED_PRECONDITION when no host takes new sessions at all.
[[nodiscard]] absl::StatusOr<std::string> ChooseHost(const std::vector<HostInfo>& hosts,
                                                     const std::map<std::string, HostUse>& use,
                                                     const VmPlacement& vm, PlacementPolicy policy);

// Whether `host` takes a VM of this shape: OK, or why not (not up, draining, takes no forwarded
// calls, or what it has free against what the VM asks for), for a caller that named the host.
[[nodiscard]] absl::Status CheckRoom(const HostInfo& host,
                                     const std::map<std::string, HostUse>& use,
                                     const VmPlacement& vm);

// Thread-safe.
class HostProvider {
 public:
  virtual ~HostProvider() = default;

  // This host's name among the provider's hosts.
  virtual std::string host_id() const = 0;
  // The driver a VM of this shape starts with, on a host that can hold it. RESOURCE_EXHAUSTED
  // saying what is short when none can.
  [[nodiscard]] virtual absl::StatusOr<VmDriver*> Place(const VmPlacement& vm) = 0;
  // The driver of the VMs this host runs already (VmDriver::Reattach, Destroy), and of the VMs
  // that only this host's files describe (templates, snapshots being rewritten).
  virtual VmDriver& local() = 0;
  // Every host with its capacity, this one included.
  [[nodiscard]] virtual absl::StatusOr<std::vector<HostInfo>> Hosts() = 0;
};

// The capacity of this machine: its online CPUs and its physical memory.
HostCapacity MachineCapacity();
// A capacity as a host publishes it to a fleet (a JSON object), and read back from what another
// host wrote: numbers of the right type are taken (vCPUs capped), anything else left out.
std::string EncodeHostCapacity(const HostCapacity& capacity);
HostCapacity ParseHostCapacity(std::string_view json);

// This machine, running VMs with `driver` (not owned). A VM is placed here if its guest RAM fits
// in the machine's memory at all: guests' RAM is allocated as they touch it, so many idle
// sessions fit in less than the sum of their sizes, and the kernel's own accounting (and each
// VM's host cgroup) decides the rest.
class LocalHost : public HostProvider {
 public:
  LocalHost(VmDriver* driver, std::string id, HostCapacity capacity)
      : driver_(driver), id_(std::move(id)), capacity_(capacity) {}

  std::string host_id() const override { return id_; }
  absl::StatusOr<VmDriver*> Place(const VmPlacement& vm) override;
  VmDriver& local() override { return *driver_; }
  absl::StatusOr<std::vector<HostInfo>> Hosts() override;

 private:
  VmDriver* driver_;
  std::string id_;
  HostCapacity capacity_;
};

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_HOST_PROVIDER_H_
