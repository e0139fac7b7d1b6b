#include "tests/cli_runner.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "nlohmann/json.hpp"
#include "src/common/host_paths.h"

namespace airlock {

Airlock::Airlock(const std::vector<std::string>& args, RunAs as) {
  int in[2], out[2], err[2];
  EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(err, O_CLOEXEC), 0);
  std::vector<std::string> argv = {AIRLOCK_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  group* airlock_group = getgrnam("airlock");
  gid_t extra = airlock_group ? airlock_group->gr_gid : 0;
  pid_ = fork();
  if (pid_ == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (as.uid != 0) {
      if (setgroups(extra ? 1 : 0, &extra) != 0 || setresgid(as.gid, as.gid, as.gid) != 0 ||
          setresuid(as.uid, as.uid, as.uid) != 0) {
        _exit(126);
      }
    }
    execv(raw[0], raw.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  stdin_ = in[1];
  stdout_ = out[0];
  stderr_ = err[0];
}

Airlock::~Airlock() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  for (int fd : {stdin_, stdout_, stderr_}) {
    if (fd >= 0) close(fd);
  }
}

// A command that stops reading its stdin must not take the test down with SIGPIPE.
const bool kNoSigpipe = signal(SIGPIPE, SIG_IGN) != SIG_ERR;

void Airlock::Write(const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    ssize_t n = write(stdin_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    // The command may stop reading early (it failed, or needs no more): what it read is what
    // it got, and its exit says the rest.
    if (n < 0 && errno == EPIPE) return;
    ASSERT_GT(n, 0) << strerror(errno);
    done += static_cast<size_t>(n);
  }
}

void Airlock::CloseStdin() {
  close(stdin_);
  stdin_ = -1;
}

bool Airlock::ReadUntil(const std::function<bool()>& until, std::chrono::milliseconds limit) {
  auto give_up = std::chrono::steady_clock::now() + limit;
  while (!until() && (stdout_ >= 0 || stderr_ >= 0)) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    pollfd fds[2] = {{stdout_, POLLIN, 0}, {stderr_, POLLIN, 0}};
    if (poll(fds, 2, static_cast<int>(std::min<int64_t>(limit.count(), 1000))) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      char buf[65536];
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        if (i == 0) result_.out_bytes += static_cast<uint64_t>(n);
        if (i == 1 || !discard_stdout_) {
          (i == 0 ? result_.out : result_.err).append(buf, static_cast<size_t>(n));
        }
      } else {
        close(fds[i].fd);
        (i == 0 ? stdout_ : stderr_) = -1;
      }
    }
  }
  return true;
}

Result Airlock::Finish() {
  if (stdin_ >= 0) CloseStdin();
  EXPECT_TRUE(ReadUntil([] { return false; })) << "airlock hung";
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result_;
}

namespace {

// Whether process pid has a file open whose path starts with prefix.
bool HasFileUnder(const std::string& pid, const std::string& prefix) {
  std::string fds = "/proc/" + pid + "/fd";
  DIR* dir = opendir(fds.c_str());
  if (dir == nullptr) return false;
  bool found = false;
  while (dirent* e = readdir(dir)) {
    char target[4096];
    ssize_t n = readlink((fds + "/" + e->d_name).c_str(), target, sizeof(target));
    if (n > 0 && std::string_view(target, static_cast<size_t>(n)).starts_with(prefix)) {
      found = true;
      break;
    }
  }
  closedir(dir);
  return found;
}

}  // namespace

std::vector<pid_t> QemuPids(const std::string& home) {
  std::string under = (home.empty() ? DefaultHostPaths().home : home) + "/";
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  while (dirent* e = readdir(proc)) {
    std::ifstream comm("/proc/" + std::string(e->d_name) + "/comm");
    std::string name;
    if (!(comm >> name) || name.rfind("qemu-system", 0) != 0) continue;
    if (!HasFileUnder(e->d_name, under)) continue;
    // An ended VM whose parent (init, once airlockd is gone) has not reaped it yet is no VM.
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string line;
    std::getline(stat, line);
    size_t close = line.rfind(')');
    if (close != std::string::npos && line.compare(close, 3, ") Z") == 0) continue;
    pids.push_back(atoi(e->d_name));
  }
  closedir(proc);
  return pids;
}

int QemuLeftAfterWaiting() {
  for (int i = 0; i < 100 && !QemuPids().empty(); ++i) usleep(100000);
  return static_cast<int>(QemuPids().size());
}

int CountScratchFiles() {
  int count = 0;
  DIR* dir = opendir(DefaultHostPaths().scratch.c_str());
  if (dir == nullptr) return 0;
  while (dirent* e = readdir(dir)) count += e->d_name[0] != '.';
  closedir(dir);
  return count;
}

Result RunAirlock(const std::vector<std::string>& args, const std::string& input, RunAs as) {
  Airlock a(args, as);
  if (!input.empty()) a.Write(input);
  return a.Finish();
}

pid_t QemuPidOf(const std::string& id, RunAs as) {
  nlohmann::json vms =
      nlohmann::json::parse(RunAirlock({"ps", "--json"}, "", as).out, nullptr, false);
  for (const nlohmann::json& vm : vms.is_array() ? vms : nlohmann::json::array()) {
    if (vm.value("session_id", "") == id) return vm.value("pid", 0);
  }
  return 0;
}

pid_t DaemonPid() {
  std::ifstream in(DefaultHostPaths().home + "/airlockd.pid");
  pid_t pid = 0;
  in >> pid;
  return pid;
}

// Rows of the daemon's audit log as "principal action target".
std::string ExecScript(const std::string& id, const std::string& script) {
  Result r = RunAirlock({"exec", id, "--", "sh", "-c", script});
  EXPECT_EQ(r.exit_code, 0) << script << "\n" << r.out << r.err;
  return r.out;
}

std::vector<std::string> AuditRows() {
  // As root reads it: `airlock audit --json`, one record per line.
  Result r = RunAirlock({"audit", "--json", "--limit", "100000"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> rows;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_discarded()) {
      ADD_FAILURE() << "airlock audit --json wrote " << line;
      continue;
    }
    rows.push_back(record.value("principal", "") + " " + record.value("action", "") + " " +
                   record.value("target", ""));
  }
  return rows;
}

}  // namespace airlock
