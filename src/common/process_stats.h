// What the host's /proc says of a process (a VM's QEMU): CPU time used and resident memory.
#ifndef AIRLOCK_COMMON_PROCESS_STATS_H_
#define AIRLOCK_COMMON_PROCESS_STATS_H_

#include <sys/types.h>

#include <cstdint>

namespace airlock {

// utime + stime of a process, in clock ticks (sysconf(_SC_CLK_TCK) a second); 0 if it is gone.
uint64_t ProcessTicks(pid_t pid);
// Its resident memory in bytes; 0 if it is gone.
uint64_t ProcessRss(pid_t pid);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_PROCESS_STATS_H_
