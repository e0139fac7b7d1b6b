// Runs the `airlock` binary as a user would: argv, stdin, stdout, stderr, exit code; optionally
// as another (unprivileged) user.
#ifndef AIRLOCK_TESTS_CLI_RUNNER_H_
#define AIRLOCK_TESTS_CLI_RUNNER_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace airlock {

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
  uint64_t out_bytes = 0;  // all stdout bytes, also when they were not kept
};

// Who runs the CLI: root by default; a uid/gid with the "airlock" group otherwise.
struct RunAs {
  uid_t uid = 0;
  gid_t gid = 0;
};

// A running `airlock` process with pipes on stdin, stdout and stderr.
class Airlock {
 public:
  explicit Airlock(const std::vector<std::string>& args, RunAs as = {});
  ~Airlock();
  void Write(const std::string& data);
  void CloseStdin();
  pid_t pid() const { return pid_; }
  // Reads output until `until` holds or both streams end; false if `limit` passes first (by
  // default 120 s: a hang).
  bool ReadUntil(const std::function<bool()>& until,
                 std::chrono::milliseconds limit = std::chrono::seconds(120));
  Result Finish();
  const Result& partial() const { return result_; }
  // Count stdout instead of keeping it (for floods).
  void DiscardStdout() { discard_stdout_ = true; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int stdin_ = -1, stdout_ = -1, stderr_ = -1;
  Result result_;
  bool discard_stdout_ = false;
};

// QEMU processes of the daemons whose homes are under `home` (default: this test's daemon), by
// pid: those with a file open beneath it (their log, image, disks), so that VMs of other
// daemons on the host (another suite's, the host's own airlockd) never count.
std::vector<pid_t> QemuPids(const std::string& home = "");
// Waits (at most 10 s) until no QEMU of this test's daemon is left; returns how many remain.
int QemuLeftAfterWaiting();
// The QEMU of a session (from `airlock ps --json` as `as`), 0 if it has none.
pid_t QemuPidOf(const std::string& id, RunAs as = {});
// The pid of the test's airlockd (from its pid file), 0 if none.
pid_t DaemonPid();
// Files in the directory that holds session disks while VMs run.
int CountScratchFiles();

Result RunAirlock(const std::vector<std::string>& args, const std::string& input = "",
                  RunAs as = {});

// `airlock exec ID -- sh -c SCRIPT`, expected to succeed: its stdout.
std::string ExecScript(const std::string& id, const std::string& script);

// Rows of the test daemon's audit log as "principal action target", oldest first.
std::vector<std::string> AuditRows();

}  // namespace airlock

#endif  // AIRLOCK_TESTS_CLI_RUNNER_H_
