#include "src/common/process_stats.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace airlock {

uint64_t ProcessTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  size_t paren = line.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(line.substr(paren + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; fields >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) {
      stime = std::strtoull(field.c_str(), nullptr, 10);
      break;
    }
  }
  return utime + stime;
}

uint64_t ProcessRss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

HostCpuTicks ReadHostCpuTicks() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  in >> cpu;
  HostCpuTicks ticks;
  if (cpu != "cpu") return ticks;
  // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
  for (int i = 0; i < 8; ++i) {
    uint64_t value = 0;
    if (!(in >> value)) break;
    ticks.total += value;
    if (i != 3 && i != 4) ticks.busy += value;
  }
  return ticks;
}

}  // namespace airlock
