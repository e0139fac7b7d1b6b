// Which processes the guest kernel's out-of-memory killer ended, read from its log (/dev/kmsg),
// so that a command whose child was killed says so instead of failing in some other way later.
// Runs inside the guest; standard library only, so the host's unit tests can run it too.
#ifndef AIRLOCK_GUEST_OOM_REPORT_H_
#define AIRLOCK_GUEST_OOM_REPORT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::guest {

struct OomKill {
  int pid = 0;
  std::string name;  // the task's name, as the kernel logged it (at most 15 bytes; any bytes)
};

// The kills in /dev/kmsg records ("PRI,SEQ,MICROSECONDS,FLAGS;MESSAGE", one per element, as
// each read() of /dev/kmsg returns one) logged at or after since_us (CLOCK_MONOTONIC, µs),
// oldest first. Records in any other form are skipped.
std::vector<OomKill> OomKillsIn(const std::vector<std::string>& records, uint64_t since_us);

// "out of memory in the guest: the kernel killed PID (NAME), ... and N more"; at most three
// named, their names with anything but printable ASCII as '?'. Empty for no kills.
std::string DescribeOomKills(const std::vector<OomKill>& kills);

// Every record /dev/kmsg holds now (at most 4096 of them); empty if it cannot be read.
std::vector<std::string> ReadKernelLog();

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_OOM_REPORT_H_
