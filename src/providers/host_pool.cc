#include "src/providers/host_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "src/common/byte_size.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/unique_fd.h"

namespace airlock::providers {
namespace {

constexpr size_t kMaxPoolFileStrings = 256;

std::string PidFile(const PoolHost& host) { return host.home + "/pool.pid"; }

absl::StatusOr<std::vector<std::string>> Strings(const nlohmann::json& value,
                                                 const std::string& where) {
  if (!value.is_array() || value.size() > kMaxPoolFileStrings) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " is not a list of at most ", kMaxPoolFileStrings, " strings"));
  }
  std::vector<std::string> out;
  for (const nlohmann::json& s : value) {
    if (!s.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(where, " holds something not a string"));
    }
    out.push_back(s.get<std::string>());
  }
  return out;
}

}  // namespace

absl::StatusOr<HostPoolConfig> ParseHostPool(std::string_view json) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return absl::InvalidArgumentError("it is not a JSON object");
  HostPoolConfig config;
  if (doc.contains("release_after_seconds")) {
    const nlohmann::json& after = doc["release_after_seconds"];
    if (!after.is_number_unsigned() || after.get<uint64_t>() < 1 ||
        after.get<uint64_t>() > 7 * 24 * 3600) {
      return absl::InvalidArgumentError(
          "release_after_seconds is not a number of seconds from 1 to a week");
    }
    config.release_after = absl::Seconds(after.get<uint64_t>());
  }
  if (!doc.contains("hosts") || !doc["hosts"].is_array() || doc["hosts"].empty() ||
      doc["hosts"].size() > kMaxPoolHosts) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"hosts\" is not a list of 1 to ", kMaxPoolHosts, " hosts"));
  }
  std::set<std::string> ids, homes;
  for (const nlohmann::json& h : doc["hosts"]) {
    std::string where = absl::StrCat("hosts[", config.hosts.size(), "]");
    if (!h.is_object() || !h.contains("id") || !h["id"].is_string() || !h.contains("home") ||
        !h["home"].is_string() || !h.contains("argv")) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " is not an object with \"id\", \"home\" and \"argv\""));
    }
    PoolHost host{.id = h["id"].get<std::string>(), .home = h["home"].get<std::string>()};
    absl::StatusOr<std::vector<std::string>> argv = Strings(h["argv"], where + ".argv");
    if (!argv.ok()) return argv.status();
    host.argv = *std::move(argv);
    if (h.contains("env")) {
      absl::StatusOr<std::vector<std::string>> env = Strings(h["env"], where + ".env");
      if (!env.ok()) return env.status();
      host.env = *std::move(env);
    }
    if (host.id.empty() || host.home.empty() || host.home[0] != '/' || host.argv.empty() ||
        host.argv[0].empty() || host.argv[0][0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": its id is empty, or its home or argv[0] not an absolute path"));
    }
    bool names_itself = false;
    for (size_t i = 0; i + 1 < host.argv.size(); ++i) {
      names_itself |= host.argv[i] == "--host-id" && host.argv[i + 1] == host.id;
    }
    if (!names_itself) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": its argv does not say --host-id ",
                                                     host.id, " (the fleet knows it by that)"));
    }
    for (const std::string& e : host.env) {
      if (e.find('=') == std::string::npos || e.rfind("AIRLOCK_HOME=", 0) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".env: ", e.substr(0, 64),
                         " is not KEY=VALUE, or sets AIRLOCK_HOME (\"home\" says that)"));
      }
    }
    if (h.contains("memory")) {
      const nlohmann::json& memory = h["memory"];
      if (!memory.is_string() || !ParseByteSize(memory.get<std::string>(), 1, &host.memory_bytes) ||
          host.memory_bytes < (64u << 20)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".memory is not a size of at least 64m, like \"64g\""));
      }
    }
    if (h.contains("cpus")) {
      const nlohmann::json& cpus = h["cpus"];
      if (!cpus.is_number_unsigned() || cpus.get<uint64_t>() < 1 ||
          cpus.get<uint64_t>() > (1u << 20)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".cpus is not a number of CPUs"));
      }
      host.cpus = static_cast<uint32_t>(cpus.get<uint64_t>());
    }
    if (!ids.insert(host.id).second || !homes.insert(host.home).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": another host has the id ", host.id, " or the home ", host.home));
    }
    config.hosts.push_back(std::move(host));
  }
  return config;
}

pid_t ProcessHostPool::Running(const PoolHost& host) {
  absl::StatusOr<std::string> text = ReadFileToString(PidFile(host), 64);
  int pid = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid) || pid <= 1) {
    return 0;
  }
  // A child of this process that ended is reaped here; one that did not may be another's.
  if (waitpid(pid, nullptr, WNOHANG) == pid) return 0;
  // The pid is the host's only while it runs the host's airlockd: argv[0] and its home.
  absl::StatusOr<std::string> cmdline =
      ReadFileToString(absl::StrCat("/proc/", pid, "/cmdline"), 64 << 10);
  absl::StatusOr<std::string> environ =
      ReadFileToString(absl::StrCat("/proc/", pid, "/environ"), 1 << 20);
  if (!cmdline.ok() || !environ.ok() || cmdline->rfind(host.argv[0] + '\0', 0) != 0 ||
      environ->find(std::string("AIRLOCK_HOME=") + host.home + '\0') == std::string::npos) {
    return 0;
  }
  return pid;
}

absl::StatusOr<std::string> ProcessHostPool::Start(const VmPlacement& vm) {
  absl::MutexLock lock(&mu_);
  const PoolHost* largest = nullptr;  // of those too small
  bool any_left = false;
  for (const PoolHost& host : hosts_) {
    if (Running(host) != 0) continue;
    any_left = true;
    if ((host.memory_bytes != 0 && host.memory_bytes < vm.memory_bytes) ||
        (host.cpus != 0 && uint64_t{host.cpus} * kVcpuOvercommit < vm.vcpus)) {
      if (largest == nullptr || host.memory_bytes > largest->memory_bytes) largest = &host;
      continue;
    }
    if (mkdir(host.home.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoStatus(absl::StrCat("pool host ", host.id, ": mkdir"), host.home);
    }
    std::string log = host.home + "/airlockd.log";
    UniqueFd log_fd(open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
    if (!log_fd.valid()) return ErrnoStatus(absl::StrCat("pool host ", host.id, ": open"), log);
    std::vector<std::string> env = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "AIRLOCK_HOME=" + host.home};
    env.insert(env.end(), host.env.begin(), host.env.end());
    std::vector<char*> argv_p, env_p;
    for (const std::string& a : host.argv) argv_p.push_back(const_cast<char*>(a.c_str()));
    argv_p.push_back(nullptr);
    for (const std::string& e : env) env_p.push_back(const_cast<char*>(e.c_str()));
    env_p.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, log_fd.get(), 1);
    posix_spawn_file_actions_adddup2(&actions, log_fd.get(), 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // A session of its own: a signal to this airlockd's group does not reach it.
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    pid_t pid = 0;
    int err = posix_spawn(&pid, host.argv[0].c_str(), &actions, &attr, argv_p.data(), env_p.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (err != 0) {
      return ErrnoStatus(absl::StrCat("pool host ", host.id, ": starting"), host.argv[0], err);
    }
    if (absl::Status st = WriteFileAtomically(PidFile(host), absl::StrCat(pid, "\n"), 0600);
        !st.ok()) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return st;
    }
    return host.id;
  }
  if (any_left) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no host of the pool left to start holds ", FormatBytes(vm.memory_bytes),
                     " and ", vm.vcpus, " vCPUs (the largest: ", largest->id, " with ",
                     FormatBytes(largest->memory_bytes), " and ", largest->cpus, " CPUs)"));
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("every host of the pool (", hosts_.size(), ") runs already"));
}

absl::Status ProcessHostPool::Release(const std::string& id) {
  absl::MutexLock lock(&mu_);
  for (const PoolHost& host : hosts_) {
    if (host.id != id) continue;
    pid_t pid = Running(host);
    if (pid != 0) {
      // Gone once reaped (a child of this process) or reaped by another: until then it may
      // still hold its home's lock, which a start would find taken.
      auto gone = [pid] {
        return waitpid(pid, nullptr, WNOHANG) == pid || (kill(pid, 0) != 0 && errno == ESRCH);
      };
      kill(pid, SIGTERM);
      // airlockd ends its lease and exits; one that hangs is killed.
      bool ended = false;
      for (int i = 0; i < 300 && !(ended = gone()); ++i) usleep(100000);
      if (!ended) {
        kill(pid, SIGKILL);
        for (int i = 0; i < 100 && !gone(); ++i) usleep(100000);
      }
    }
    unlink(PidFile(host).c_str());
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("host ", id, " is not one of the pool's"));
}

std::vector<std::string> ProcessHostPool::Started() {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const PoolHost& host : hosts_) {
    if (Running(host) != 0) out.push_back(host.id);
  }
  return out;
}

}  // namespace airlock::providers
