#include "src/testing/s3rver.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/common/file_util.h"
#include "src/testing/test_util.h"

namespace airlock::testing {

S3rver::S3rver(const std::string& node, const std::string& package_dir, const std::string& dir,
               const std::string& bucket)
    : dir_(dir) {
  std::string script = package_dir + "/node_modules/s3rver/bin/s3rver.js";
  if (access(node.c_str(), X_OK) != 0) {
    ADD_FAILURE() << "node (" << node << ") is missing: run scripts/setup.sh";
    return;
  }
  if (access(script.c_str(), R_OK) != 0) {
    ADD_FAILURE() << script << " is missing: run `npm ci` in " << package_dir
                  << " (scripts/test.sh does)";
    return;
  }
  EXPECT_TRUE(MakeDirectories(dir + "/data", 0700).ok());
  std::string log = dir + "/s3rver.log";
  // Port 0: s3rver binds a free port and prints it, so no other process can take it first.
  std::vector<std::string> argv = {
      node,        script,   "--directory", dir + "/data",        "--address",
      "127.0.0.1", "--port", "0",           "--configure-bucket", bucket};
  pid_ = StartLogged(argv, log);
  constexpr char kListening[] = "S3rver listening on 127.0.0.1:";
  for (int i = 0; i < 400; ++i) {
    std::string text = Log();
    size_t at = text.find(kListening);
    size_t end = at == std::string::npos ? at : text.find('\n', at);
    if (end != std::string::npos) {
      size_t from = at + sizeof(kListening) - 1;
      if (absl::SimpleAtoi(text.substr(from, end - from), &port_)) return;
    }
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    usleep(50000);
  }
  ADD_FAILURE() << "s3rver did not start; its output:\n" << Log();
}

S3rver::~S3rver() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
}

std::string S3rver::Endpoint() const { return absl::StrCat("http://127.0.0.1:", port_); }

std::string S3rver::ObjectFile(const std::string& bucket, const std::string& key) const {
  return absl::StrCat(dir_, "/data/", bucket, "/", key, "._S3rver_object");
}

std::string S3rver::Log() const {
  return ReadFileToString(dir_ + "/s3rver.log", 64 << 20).value_or("");
}

}  // namespace airlock::testing
