// For the files that implement SessionManager (session_manager.cc and the session_*.cc of each
// of its jobs) only: what several of them compute the same way.
#ifndef AIRLOCK_DAEMON_SESSION_MANAGER_INTERNAL_H_
#define AIRLOCK_DAEMON_SESSION_MANAGER_INTERNAL_H_

#include <cstdint>
#include <vector>

#include "src/daemon/quotas.h"
#include "src/daemon/records.h"
#include "src/daemon/session_layout.h"
#include "src/providers/host_provider.h"
#include "src/vm/vm_launcher.h"

namespace airlock::session_internal {

// How the session's VM is launched: its limits, names and files.
inline LaunchOptions OptionsFor(const SessionRecord& s, const SessionLayout& layout) {
  LaunchOptions options;
  if (s.workspace.present()) options.workspace_path = layout.WorkspaceImage(s.id);
  options.memory_mib = static_cast<uint32_t>(s.limits.memory_bytes >> 20);
  options.vcpus = s.limits.vcpus;
  options.disk_bytes = s.limits.disk_bytes;
  options.pids = s.limits.pids;
  options.host_cgroup = s.id;
  options.hostname = s.hostname;
  options.runtime_dir = layout.VmRuntime(s.id);
  for (const VolumeAttachment& v : s.volumes) {
    options.volumes.push_back(
        {.path = layout.Volume(v.volume_id), .mount_point = v.path, .read_only = v.read_only});
  }
  return options;
}

// What one new session counts against its tenant's quotas.
inline QuotaAmounts NewSession(const SessionLimits& limits) {
  return {.sessions = 1,
          .running = 1,
          .vcpus = limits.vcpus,
          .memory_bytes = limits.memory_bytes,
          .disk_bytes = limits.disk_bytes};
}

// What the host provider places.
inline providers::VmPlacement PlacementOf(const SessionLimits& limits) {
  return {.vcpus = limits.vcpus, .memory_bytes = limits.memory_bytes};
}

// The template a session of these limits restores.
inline VmShape ShapeOf(const SessionLimits& limits) {
  return {.memory_mib = static_cast<uint32_t>(limits.memory_bytes >> 20),
          .vcpus = limits.vcpus,
          .disk_bytes = limits.disk_bytes};
}

// When the first of the grants runs out (unix ms); 0: none does.
inline int64_t EarliestExpiry(const std::vector<EgressGrant>& grants) {
  int64_t earliest = 0;
  for (const EgressGrant& g : grants) {
    if (g.expires_ms != 0 && (earliest == 0 || g.expires_ms < earliest)) earliest = g.expires_ms;
  }
  return earliest;
}

}  // namespace airlock::session_internal

#endif  // AIRLOCK_DAEMON_SESSION_MANAGER_INTERNAL_H_
