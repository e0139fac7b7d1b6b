#include "src/guest/oom_report.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

namespace airlock::guest {
namespace {

constexpr size_t kMaxRecords = 4096;
constexpr size_t kNamed = 3;

// The unsigned decimal at the start of text, which it consumes; false if none or too long.
bool ConsumeNumber(std::string_view* text, uint64_t* value) {
  size_t digits = 0;
  *value = 0;
  while (digits < text->size() && digits < 19 && (*text)[digits] >= '0' && (*text)[digits] <= '9') {
    *value = *value * 10 + static_cast<uint64_t>((*text)[digits] - '0');
    ++digits;
  }
  if (digits == 0) return false;
  text->remove_prefix(digits);
  return true;
}

}  // namespace

std::vector<OomKill> OomKillsIn(const std::vector<std::string>& records, uint64_t since_us) {
  std::vector<OomKill> kills;
  for (const std::string& record : records) {
    std::string_view text = record;
    size_t semicolon = text.find(';');
    if (semicolon == std::string_view::npos) continue;
    std::string_view prefix = text.substr(0, semicolon), message = text.substr(semicolon + 1);
    // PRI,SEQ,MICROSECONDS,...
    size_t first = prefix.find(','), second = prefix.find(',', first + 1);
    if (first == std::string_view::npos || second == std::string_view::npos) continue;
    std::string_view at = prefix.substr(second + 1);
    uint64_t us = 0;
    if (!ConsumeNumber(&at, &us) || (!at.empty() && at[0] != ',') || us < since_us) continue;
    // "Out of memory: Killed process 123 (name) total-vm:...", or "Memory cgroup out of
    // memory: Killed process ..."; the message ends at its first newline.
    message = message.substr(0, message.find('\n'));
    constexpr std::string_view kKilled = "Killed process ";
    size_t found = message.find(kKilled);
    if (found == std::string_view::npos) continue;
    std::string_view rest = message.substr(found + kKilled.size());
    uint64_t pid = 0;
    if (!ConsumeNumber(&rest, &pid) || pid > 0x7fffffff || rest.substr(0, 2) != " (") continue;
    rest.remove_prefix(2);
    // The name may itself hold ") ": the last ") " before the kernel's own fields ends it.
    size_t close = rest.rfind(") total-vm:");
    if (close == std::string_view::npos) close = rest.rfind(')');
    if (close == std::string_view::npos) continue;
    kills.push_back({static_cast<int>(pid), std::string(rest.substr(0, close))});
  }
  return kills;
}

std::string DescribeOomKills(const std::vector<OomKill>& kills) {
  if (kills.empty()) return "";
  std::string text = "out of memory in the guest: the kernel killed ";
  for (size_t i = 0; i < kills.size() && i < kNamed; ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(kills[i].pid) + " (";
    for (char c : kills[i].name.substr(0, 15)) text += c >= 0x20 && c < 0x7f ? c : '?';
    text += ")";
  }
  if (kills.size() > kNamed) text += " and " + std::to_string(kills.size() - kNamed) + " more";
  return text;
}

std::vector<std::string> ReadKernelLog() {
  std::vector<std::string> records;
  int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return records;
  char buf[8192];  // a record is at most 1 KiB of text plus its fields
  while (records.size() < kMaxRecords) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EPIPE)) continue;  // EPIPE: records were overwritten
    if (n <= 0) break;                                          // EAGAIN: no more
    records.emplace_back(buf, static_cast<size_t>(n));
  }
  close(fd);
  return records;
}

}  // namespace airlock::guest
