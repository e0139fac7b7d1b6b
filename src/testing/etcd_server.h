// A single-member etcd (Debian's etcd-server, /usr/bin/etcd) on 127.0.0.1, with its data in a
// directory of the test's, for as long as the object lives; killed (SIGKILL, as a host dies) at
// the end. Client and peer ports are picked free. A server that is missing or does not start is
// a test failure saying why.
#ifndef AIRLOCK_TESTING_ETCD_SERVER_H_
#define AIRLOCK_TESTING_ETCD_SERVER_H_

#include <sys/types.h>

#include <string>

namespace airlock::testing {

class EtcdServer {
 public:
  // etcd: the binary; dir: where it keeps its data and log (created).
  EtcdServer(const std::string& etcd, const std::string& dir);
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  bool running() const { return pid_ > 0; }
  // "http://127.0.0.1:PORT"
  std::string Endpoint() const;
  // What etcd has logged.
  std::string Log() const;

 private:
  // Starts etcd on two free ports; false if it exited or did not get ready.
  bool TryStart(const std::string& etcd);

  std::string dir_;
  int client_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace airlock::testing

#endif  // AIRLOCK_TESTING_ETCD_SERVER_H_
