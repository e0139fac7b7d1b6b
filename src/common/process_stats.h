// What the host's /proc says of a process (a VM's QEMU): CPU time used and resident memory;
// and how busy the host's CPUs are.
#ifndef AIRLOCK_COMMON_PROCESS_STATS_H_
#define AIRLOCK_COMMON_PROCESS_STATS_H_

#include <sys/types.h>

#include <cstdint>

namespace airlock {

// utime + stime of a process, in clock ticks (sysconf(_SC_CLK_TCK) a second); 0 if it is gone.
uint64_t ProcessTicks(pid_t pid);
// Its resident memory in bytes; 0 if it is gone.
uint64_t ProcessRss(pid_t pid);

// The host's CPU time (every CPU's) in clock ticks: busy and in all (/proc/stat's first line).
struct HostCpuTicks {
  uint64_t busy = 0;
  uint64_t total = 0;
};
HostCpuTicks ReadHostCpuTicks();

}  // namespace airlock

#endif  // AIRLOCK_COMMON_PROCESS_STATS_H_
