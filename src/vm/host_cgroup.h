// The host cgroup a VM process runs in: CPU quota (its vCPUs' worth), memory including the VMM's
// own overhead, and a cap on its threads. Uses cgroup v2 where /sys/fs/cgroup is unified, else
// the v1 cpu, memory and pids hierarchies (as these machines mount them).
//
// The VMM joins by writing "0" to the descriptors of procs_fds() before it execs, so it is
// confined before it allocates anything. Destroying the object removes the cgroup (after the
// process is gone). Not thread-safe.
#ifndef AIRLOCK_VM_HOST_CGROUP_H_
#define AIRLOCK_VM_HOST_CGROUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/common/unique_fd.h"

namespace airlock {

struct HostCgroupLimits {
  uint32_t vcpus = 1;         // CPU quota: this many CPUs' worth of time
  uint64_t memory_bytes = 0;  // everything the process maps and touches
  uint32_t max_tasks = 128;   // threads of the VMM
  // The lowest CPU weight: the process runs only on CPU time nobody else wants (a VM made
  // ahead of need). Otherwise the default weight.
  bool background = false;
};

class HostCgroup {
 public:
  // name: the leaf's name (the session id); when a cgroup of that name is still there (an
  // earlier VM of the session still going away), name.1, name.2, ... (name() says which).
  // Fails with FailedPrecondition when the host has no usable cgroup controllers (the caller
  // may then run without, and say so).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HostCgroup>> Create(
      const std::string& name, const HostCgroupLimits& limits);
  // The cgroup of this name that an earlier process created (for a VM it reattaches to);
  // destroying the object removes it. Nothing is created.
  static std::unique_ptr<HostCgroup> Adopt(const std::string& name);
  ~HostCgroup();
  // Leaves the cgroup in place when the object goes (its VM outlives this process).
  void Keep() { dirs_.clear(); }
  // Gives the cgroup (with the process in it) a new leaf name, in every hierarchy (one free
  // the way Create picks it).
  [[nodiscard]] absl::Status Rename(const std::string& name);
  // Changes HostCgroupLimits::background.
  [[nodiscard]] absl::Status SetBackground(bool background);

  // How often the kernel killed a process of this cgroup for passing its memory limit (v2's
  // memory.events, v1's memory.oom_control), and the limit; 0s where unknown. For telling a
  // user why a VM died rather than only "killed by signal 9".
  struct OomRecord {
    uint64_t kills = 0;
    uint64_t limit_bytes = 0;
  };
  OomRecord Oom() const;

  // cgroup.procs of every hierarchy, open for writing.
  std::vector<int> procs_fds() const;
  // The directories, for `airlock ps` and tests.
  const std::vector<std::string>& dirs() const { return dirs_; }
  // The leaf's name, for finding it again (Adopt).
  const std::string& name() const { return name_; }

 private:
  HostCgroup() = default;
  std::string name_;
  std::vector<std::string> dirs_;
  std::vector<UniqueFd> procs_;
};

// The count after "oom_kill " in the text of memory.events or memory.oom_control; 0 if absent.
uint64_t OomKillsIn(const std::string& events);

}  // namespace airlock

#endif  // AIRLOCK_VM_HOST_CGROUP_H_
