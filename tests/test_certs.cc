#include "tests/test_certs.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "src/common/file_util.h"
#include "src/common/subprocess.h"

namespace airlock {

void OpenSsl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<ProcessResult> r = RunProcess(argv);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->output;
}

void MakeTestCa(const std::string& dir) {
  OpenSsl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/ca.key", "-out",
           dir + "/ca.pem", "-days", "1", "-subj", "/CN=airlock-test-ca"});
}

void Issue(const std::string& dir, const std::string& name, const std::string& cn) {
  OpenSsl({"req", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/" + name + ".key", "-out",
           dir + "/" + name + ".csr", "-subj", "/CN=" + cn});
  ASSERT_TRUE(
      WriteFileAtomically(dir + "/" + name + ".ext", "subjectAltName=DNS:" + cn + "\n", 0644).ok());
  OpenSsl({"x509", "-req", "-in", dir + "/" + name + ".csr", "-CA", dir + "/ca.pem", "-CAkey",
           dir + "/ca.key", "-CAcreateserial", "-out", dir + "/" + name + ".pem", "-days", "1",
           "-extfile", dir + "/" + name + ".ext"});
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace airlock
