// A TCP proxy on 127.0.0.1 in front of a loopback HTTP service (the fleet's blob store or etcd),
// for tests of what airlockd does when that service fails: it passes bytes through, answers
// every request with 500, or goes silent (connections accepted, nothing answered or passed on).
// The mode applies to connections already open too, as a failing server would to a client
// that keeps its connections alive.
#ifndef AIRLOCK_TESTS_FAULT_PROXY_H_
#define AIRLOCK_TESTS_FAULT_PROXY_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace airlock {

class FaultProxy {
 public:
  enum class Mode { kPass, kServerError, kSilent };

  // upstream: "http://127.0.0.1:PORT".
  explicit FaultProxy(const std::string& upstream) {
    size_t colon = upstream.rfind(':');
    EXPECT_TRUE(absl::SimpleAtoi(upstream.substr(colon + 1), &upstream_port_)) << upstream;
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa = Loopback(0);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    EXPECT_EQ(listen(listener_, 64), 0);
    socklen_t len = sizeof(sa);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    accepter_ = std::thread([this] { Accept(); });
  }
  ~FaultProxy() {
    stop_ = true;
    accepter_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (std::thread& t : connections_) t.join();
    close(listener_);
  }

  std::string Endpoint() const { return absl::StrCat("http://127.0.0.1:", port_); }
  void Set(Mode mode) { mode_ = mode; }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in sa = {};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sa;
  }

  void Accept() {
    while (!stop_) {
      pollfd p = {listener_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      connections_.emplace_back([this, client] { Serve(client); });
    }
  }

  // One client connection until either side closes, the mode fails it, or the proxy ends.
  void Serve(int client) {
    int server = -1;
    std::string head;  // what the client sent while the mode was kServerError
    char buf[65536];
    while (!stop_) {
      Mode mode = mode_;
      if (mode == Mode::kSilent) {  // read nothing, answer nothing, pass nothing on
        usleep(50000);
        continue;
      }
      if (mode == Mode::kPass && server < 0) {
        server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in sa = Loopback(upstream_port_);
        if (connect(server, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) break;
      }
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      int n = poll(p, server >= 0 ? 2 : 1, 50);
      if (n <= 0) continue;
      if (mode == Mode::kServerError) {
        // A server failing as a whole: every request gets a 500 and the connection ends.
        ssize_t got = read(client, buf, sizeof(buf));
        if (got <= 0) break;
        head.append(buf, static_cast<size_t>(got));
        if (head.find("\r\n\r\n") == std::string::npos) continue;
        const std::string answer =
            "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
            "Content-Length: 14\r\nConnection: close\r\n\r\ninjected fault";
        (void)!send(client, answer.data(), answer.size(), MSG_NOSIGNAL);
        break;
      }
      bool done = false;
      for (int i = 0; i < 2 && !done; ++i) {
        if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        ssize_t got = read(p[i].fd, buf, sizeof(buf));
        done = got <= 0 || !WriteAll(i == 0 ? server : client, buf, static_cast<size_t>(got));
      }
      if (done) break;
    }
    if (server >= 0) close(server);
    close(client);
  }

  static bool WriteAll(int fd, const char* data, size_t size) {
    while (size > 0) {
      ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
      if (n <= 0) return false;
      data += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }

  int upstream_port_ = 0;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<Mode> mode_{Mode::kPass};
  std::atomic<bool> stop_{false};
  std::thread accepter_;
  std::mutex mu_;
  std::vector<std::thread> connections_;
};

}  // namespace airlock

#endif  // AIRLOCK_TESTS_FAULT_PROXY_H_
