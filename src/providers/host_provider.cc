#include "src/providers/host_provider.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/common/byte_size.h"

namespace airlock::providers {

HostCapacity MachineCapacity() {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  return {.vcpus = cpus > 0 ? static_cast<uint32_t>(cpus) : 1,
          .memory_bytes = pages > 0 && page > 0
                              ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                              : 0};
}

std::string EncodeHostCapacity(const HostCapacity& capacity) {
  nlohmann::json out{{"vcpus", capacity.vcpus}, {"memory_bytes", capacity.memory_bytes}};
  if (!capacity.address.empty()) out["address"] = capacity.address;
  return out.dump();
}

HostCapacity ParseHostCapacity(std::string_view json) {
  HostCapacity capacity;
  nlohmann::json parsed = nlohmann::json::parse(json, nullptr, false);
  if (!parsed.is_object()) return capacity;
  if (auto it = parsed.find("vcpus"); it != parsed.end() && it->is_number_unsigned()) {
    capacity.vcpus = static_cast<uint32_t>(std::min<uint64_t>(it->get<uint64_t>(), kMaxHostVcpus));
  }
  if (auto it = parsed.find("memory_bytes"); it != parsed.end() && it->is_number_unsigned()) {
    capacity.memory_bytes = it->get<uint64_t>();
  }
  if (auto it = parsed.find("address"); it != parsed.end() && it->is_string()) {
    std::string address = it->get<std::string>();
    bool printable =
        address.size() <= kMaxHostAddress &&
        std::all_of(address.begin(), address.end(), [](char c) { return c > ' ' && c < 0x7f; });
    if (printable) capacity.address = std::move(address);
  }
  return capacity;
}

namespace {

// What a host has free: its capacity (vCPUs overcommitted) less what its sessions hold.
HostUse FreeOn(const HostInfo& host, const std::map<std::string, HostUse>& use) {
  HostUse used;
  if (auto it = use.find(host.id); it != use.end()) used = it->second;
  uint64_t vcpus = uint64_t{host.capacity.vcpus} * kVcpuOvercommit;
  return {.vcpus = static_cast<uint32_t>(vcpus > used.vcpus ? vcpus - used.vcpus : 0),
          .memory_bytes = host.capacity.memory_bytes > used.memory_bytes
                              ? host.capacity.memory_bytes - used.memory_bytes
                              : 0};
}

bool Holds(const HostUse& free, const VmPlacement& vm) {
  return free.memory_bytes >= vm.memory_bytes && free.vcpus >= vm.vcpus;
}

bool TakesNew(const HostInfo& host) {
  return host.up && !host.draining && (host.this_host || !host.capacity.address.empty());
}

}  // namespace

absl::StatusOr<std::string> ChooseHost(const std::vector<HostInfo>& hosts,
                                       const std::map<std::string, HostUse>& use,
                                       const VmPlacement& vm, PlacementPolicy policy) {
  const HostInfo* chosen = nullptr;
  uint64_t chosen_free = 0;
  // When none holds it: which host has the most of each.
  const HostInfo* most_memory = nullptr;
  const HostInfo* most_vcpus = nullptr;
  HostUse most;
  for (const HostInfo& host : hosts) {
    if (!TakesNew(host)) continue;
    HostUse free = FreeOn(host, use);
    if (most_memory == nullptr || free.memory_bytes > most.memory_bytes) {
      most_memory = &host;
      most.memory_bytes = free.memory_bytes;
    }
    if (most_vcpus == nullptr || free.vcpus > most.vcpus) {
      most_vcpus = &host;
      most.vcpus = free.vcpus;
    }
    if (!Holds(free, vm)) continue;
    bool better = chosen == nullptr ||
                  (policy == PlacementPolicy::kSpread ? free.memory_bytes > chosen_free
                                                      : free.memory_bytes < chosen_free) ||
                  (free.memory_bytes == chosen_free && host.this_host);
    if (better) {
      chosen = &host;
      chosen_free = free.memory_bytes;
    }
  }
  if (chosen != nullptr) return chosen->id;
  if (most_memory == nullptr) {
    return absl::FailedPreconditionError(
        "no host of the fleet takes new sessions: each is down, being drained, or takes no "
        "forwarded calls (airlock hosts)");
  }
  const char* kWhatToDo = "; ask for less, or end or pause sessions, or add a host";
  if (most.memory_bytes < vm.memory_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no host of the fleet has ", FormatBytes(vm.memory_bytes),
                     " of memory free for this session (the most: ", FormatBytes(most.memory_bytes),
                     " on ", most_memory->id, ")", kWhatToDo, " (--memory)"));
  }
  if (most.vcpus < vm.vcpus) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no host of the fleet has ", vm.vcpus,
                     " vCPUs free for this session (the most: ", most.vcpus, " on ", most_vcpus->id,
                     ", at ", kVcpuOvercommit, " per CPU)", kWhatToDo, " (--cpus)"));
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("no host of the fleet has both ", FormatBytes(vm.memory_bytes),
                   " of memory and ", vm.vcpus, " vCPUs free for this session (", most_memory->id,
                   " has the most memory, ", most_vcpus->id, " the most vCPUs)", kWhatToDo));
}

absl::Status CheckRoom(const HostInfo& host, const std::map<std::string, HostUse>& use,
                       const VmPlacement& vm) {
  if (!host.up) {
    return absl::NotFoundError(
        absl::StrCat("host ", host.id, " is not up in the fleet (airlock hosts lists them)"));
  }
  if (host.draining) {
    return absl::FailedPreconditionError(
        absl::StrCat("host ", host.id, " is being drained and takes no new sessions"));
  }
  if (!TakesNew(host)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "host ", host.id,
        " takes no forwarded calls: call it, or start its airlockd with --fleet-listen, "
        "--fleet-cert, --fleet-key and --fleet-ca"));
  }
  HostUse free = FreeOn(host, use);
  if (Holds(free, vm)) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("host ", host.id, " has ", FormatBytes(free.memory_bytes), " of memory and ",
                   free.vcpus, " vCPUs free (at ", kVcpuOvercommit, " per CPU), not the ",
                   FormatBytes(vm.memory_bytes), " and ", vm.vcpus, " this session asks for"));
}

absl::StatusOr<VmDriver*> LocalHost::Place(const VmPlacement& vm) {
  if (capacity_.memory_bytes != 0 && vm.memory_bytes > capacity_.memory_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a VM of ", FormatBytes(vm.memory_bytes), " cannot run on host ", id_, ", which has ",
        FormatBytes(capacity_.memory_bytes), " of memory; ask for less (--memory)"));
  }
  return driver_;
}

absl::StatusOr<std::vector<HostInfo>> LocalHost::Hosts() {
  return std::vector<HostInfo>{{.id = id_, .capacity = capacity_, .this_host = true}};
}

}  // namespace airlock::providers
