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
