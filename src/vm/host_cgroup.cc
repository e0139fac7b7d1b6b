#include "src/vm/host_cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"

namespace airlock {
namespace {

constexpr char kRoot[] = "/sys/fs/cgroup";
constexpr char kParent[] = "airlock";
constexpr uint64_t kCpuPeriodUs = 100000;

// The CPU weight file and its value (cgroup v2's cpu.weight, v1's cpu.shares).
std::pair<const char*, const char*> CpuWeight(bool unified, bool background) {
  if (unified) return {"cpu.weight", background ? "1" : "100"};
  return {"cpu.shares", background ? "2" : "1024"};
}

absl::Status WriteValue(const std::string& path, const std::string& value) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path);
  if (write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return ErrnoStatus(absl::StrCat("write ", value, " to"), path);
  }
  return absl::OkStatus();
}

bool IsUnified() {
  struct statfs fs;
  return statfs(kRoot, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

}  // namespace

namespace {

// Where a leaf of this name is, in each hierarchy in use.
std::vector<std::string> LeafDirs(const std::string& name) {
  if (IsUnified()) return {absl::StrCat(kRoot, "/", kParent, "/", name)};
  std::vector<std::string> dirs;
  for (const char* controller : {"cpu", "memory", "pids"}) {
    dirs.push_back(absl::StrCat(kRoot, "/", controller, "/", kParent, "/", name));
  }
  return dirs;
}

// name, or the first of name.1, name.2, ... that no hierarchy has: a VM of the same session that
// is still going away removes its own cgroup, never the new VM's.
std::string FreeName(const std::string& name) {
  for (int n = 0; n < 1000; ++n) {
    std::string candidate = n == 0 ? name : absl::StrCat(name, ".", n);
    std::vector<std::string> dirs = LeafDirs(candidate);
    if (std::none_of(dirs.begin(), dirs.end(),
                     [](const std::string& d) { return access(d.c_str(), F_OK) == 0; })) {
      return candidate;
    }
  }
  return name;  // (a thousand left behind: mkdir says so)
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostCgroup>> HostCgroup::Create(const std::string& wanted,
                                                               const HostCgroupLimits& limits) {
  std::unique_ptr<HostCgroup> cgroup(new HostCgroup);
  const std::string name = FreeName(wanted);
  cgroup->name_ = name;
  std::string quota = absl::StrCat(limits.vcpus * kCpuPeriodUs);
  // Each entry: the controller's directory, and the files to write in the leaf.
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> plan;
  if (IsUnified()) {
    std::string parent = absl::StrCat(kRoot, "/", kParent);
    if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir", parent);
    // Controllers must be enabled on the way down; a failure shows as a missing file below.
    WriteValue(absl::StrCat(kRoot, "/cgroup.subtree_control"), "+cpu +memory +pids").IgnoreError();
    WriteValue(parent + "/cgroup.subtree_control", "+cpu +memory +pids").IgnoreError();
    plan.push_back(
        {parent,
         {{"cpu.max", absl::StrCat(quota, " ", kCpuPeriodUs)},
          {CpuWeight(true, limits.background).first, CpuWeight(true, limits.background).second},
          {"memory.max", absl::StrCat(limits.memory_bytes)},
          {"memory.swap.max", "0"},
          {"pids.max", absl::StrCat(limits.max_tasks)}}});
  } else {
    plan.push_back({absl::StrCat(kRoot, "/cpu/", kParent),
                    {{"cpu.cfs_period_us", absl::StrCat(kCpuPeriodUs)},
                     {"cpu.cfs_quota_us", quota},
                     {CpuWeight(false, limits.background).first,
                      CpuWeight(false, limits.background).second}}});
    plan.push_back({absl::StrCat(kRoot, "/memory/", kParent),
                    {{"memory.limit_in_bytes", absl::StrCat(limits.memory_bytes)}}});
    plan.push_back(
        {absl::StrCat(kRoot, "/pids/", kParent), {{"pids.max", absl::StrCat(limits.max_tasks)}}});
  }
  for (const auto& [parent, files] : plan) {
    struct stat st;
    if (stat(DirName(parent).c_str(), &st) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("no cgroup hierarchy at ", DirName(parent)));
    }
    if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir", parent);
    std::string leaf = absl::StrCat(parent, "/", name);
    if (mkdir(leaf.c_str(), 0755) != 0) return ErrnoStatus("mkdir", leaf);
    cgroup->dirs_.push_back(leaf);
    for (const auto& [file, value] : files) {
      if (file == "memory.swap.max" && access((leaf + "/" + file).c_str(), F_OK) != 0) continue;
      if (absl::Status s = WriteValue(leaf + "/" + file, value); !s.ok()) return s;
    }
    UniqueFd procs(open((leaf + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (!procs.valid()) return ErrnoStatus("open", leaf + "/cgroup.procs");
    cgroup->procs_.push_back(std::move(procs));
  }
  return cgroup;
}

std::unique_ptr<HostCgroup> HostCgroup::Adopt(const std::string& name) {
  std::unique_ptr<HostCgroup> cgroup(new HostCgroup);
  cgroup->name_ = name;
  for (std::string& dir : LeafDirs(name)) {
    if (access(dir.c_str(), F_OK) == 0) cgroup->dirs_.push_back(std::move(dir));
  }
  return cgroup;
}

HostCgroup::~HostCgroup() {
  procs_.clear();
  // The process may take a moment to leave after it was killed and reaped.
  for (const std::string& dir : dirs_) {
    for (int i = 0; i < 50 && rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i) usleep(10000);
  }
}

absl::Status HostCgroup::Rename(const std::string& wanted) {
  const std::string name = FreeName(wanted);
  name_ = name;
  for (std::string& dir : dirs_) {
    std::string renamed = absl::StrCat(DirName(dir), "/", name);
    if (rename(dir.c_str(), renamed.c_str()) != 0) return ErrnoStatus("rename the cgroup", dir);
    dir = std::move(renamed);
  }
  return absl::OkStatus();
}

absl::Status HostCgroup::SetBackground(bool background) {
  bool unified = IsUnified();
  auto [file, value] = CpuWeight(unified, background);
  for (const std::string& dir : dirs_) {
    // (v1: only the cpu hierarchy has the file.)
    if (!unified && access((dir + "/" + file).c_str(), F_OK) != 0) continue;
    if (absl::Status s = WriteValue(dir + "/" + file, value); !s.ok()) return s;
  }
  return absl::OkStatus();
}

uint64_t OomKillsIn(const std::string& events) {
  for (absl::string_view line : absl::StrSplit(events, '\n')) {
    uint64_t n = 0;
    if (absl::ConsumePrefix(&line, "oom_kill ") && absl::SimpleAtoi(line, &n)) return n;
  }
  return 0;
}

HostCgroup::OomRecord HostCgroup::Oom() const {
  OomRecord record;
  for (const std::string& dir : dirs_) {
    for (const char* events : {"memory.events", "memory.oom_control"}) {
      absl::StatusOr<std::string> text = ReadFileToString(absl::StrCat(dir, "/", events), 4096);
      if (text.ok()) record.kills += OomKillsIn(*text);
    }
    for (const char* limit : {"memory.max", "memory.limit_in_bytes"}) {
      absl::StatusOr<std::string> text = ReadFileToString(absl::StrCat(dir, "/", limit), 64);
      uint64_t n = 0;
      if (text.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &n)) {
        record.limit_bytes = n;
      }
    }
  }
  return record;
}

std::vector<int> HostCgroup::procs_fds() const {
  std::vector<int> fds;
  for (const UniqueFd& fd : procs_) fds.push_back(fd.get());
  return fds;
}

}  // namespace airlock
