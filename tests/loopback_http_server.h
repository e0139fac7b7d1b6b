// Test helpers for the egress and secrets VM tests: a small HTTP(S) server on the host's
// loopback, a temporary directory, and sessions made and watched through the CLI.
#ifndef AIRLOCK_TESTS_LOOPBACK_HTTP_SERVER_H_
#define AIRLOCK_TESTS_LOOPBACK_HTTP_SERVER_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/common/file_util.h"
#include "tests/cli_runner.h"

namespace airlock {

// A small HTTP(S) server on 127.0.0.1: answers GET PATH with serve(PATH) (404 when nullopt; a
// body that starts with "HTTP/1." is sent as the whole response),
// one connection at a time, each closed after its response. With a certificate it speaks TLS.
class LoopbackHttpServer {
 public:
  using Handler = std::function<std::optional<std::string>(const std::string& path)>;
  // Also given the whole request head (request line and headers).
  using RequestHandler =
      std::function<std::optional<std::string>(const std::string& path, const std::string& head)>;
  explicit LoopbackHttpServer(Handler serve, int port = 0, std::string cert_dir = "",
                              std::string cert_name = "")
      : LoopbackHttpServer(RequestHandler([serve](const std::string& path, const std::string&) {
                             return serve(path);
                           }),
                           port, std::move(cert_dir), std::move(cert_name)) {}
  explicit LoopbackHttpServer(RequestHandler serve, int port = 0, std::string cert_dir = "",
                              std::string cert_name = "")
      : serve_(std::move(serve)) {
    if (!cert_dir.empty()) {
      tls_ = SSL_CTX_new(TLS_server_method());
      EXPECT_EQ(
          SSL_CTX_use_certificate_chain_file(tls_, (cert_dir + "/" + cert_name + ".pem").c_str()),
          1);
      EXPECT_EQ(SSL_CTX_use_PrivateKey_file(tls_, (cert_dir + "/" + cert_name + ".key").c_str(),
                                            SSL_FILETYPE_PEM),
                1);
      SSL_CTX_set_tlsext_servername_callback(tls_, &LoopbackHttpServer::OnServerName);
      SSL_CTX_set_tlsext_servername_arg(tls_, this);
    }
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa = {};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0)
        << "port " << port << ": " << strerror(errno);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof(sa);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  explicit LoopbackHttpServer(std::string body)
      : LoopbackHttpServer(
            [body](const std::string&) { return std::optional<std::string>(body); }) {}
  ~LoopbackHttpServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
    if (tls_ != nullptr) SSL_CTX_free(tls_);
  }
  int port() const { return port_; }
  int requests() const { return requests_; }
  // The bodies of the requests so far (empty for those without one), in order.
  std::vector<std::string> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  // The server names TLS clients asked for (SNI), in order.
  std::vector<std::string> server_names() {
    std::lock_guard<std::mutex> lock(mu_);
    return names_;
  }

 private:
  static int OnServerName(SSL* ssl, int*, void* arg) {
    auto* self = static_cast<LoopbackHttpServer*>(arg);
    const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    std::lock_guard<std::mutex> lock(self->mu_);
    self->names_.push_back(name ? name : "");
    return SSL_TLSEXT_ERR_OK;
  }
  void Serve() {
    while (!stop_) {
      pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      timeval timeout = {10, 0};
      setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
      SSL* ssl = nullptr;
      if (tls_ != nullptr) {
        ssl = SSL_new(tls_);
        SSL_set_fd(ssl, c);
        if (SSL_accept(ssl) != 1) {
          SSL_free(ssl);
          close(c);
          continue;
        }
      }
      auto read_some = [&](char* buf, int n) {
        return ssl ? SSL_read(ssl, buf, n) : static_cast<int>(read(c, buf, n));
      };
      auto write_all = [&](const std::string& data) {
        size_t done = 0;
        while (done < data.size()) {
          int n = ssl ? SSL_write(ssl, data.data() + done, static_cast<int>(data.size() - done))
                      : static_cast<int>(write(c, data.data() + done, data.size() - done));
          if (n <= 0) return;
          done += static_cast<size_t>(n);
        }
      };
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos && request.size() < 65536) {
        int n = read_some(buf, sizeof(buf));
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      ++requests_;
      std::string path;
      size_t sp = request.find(' ');
      if (sp != std::string::npos)
        path = request.substr(sp + 1, request.find(' ', sp + 1) - sp - 1);
      path = path.substr(0, path.find('?'));
      // A request with a body (Content-Length) is read whole before it is answered.
      size_t head_end = request.find("\r\n\r\n");
      std::string head = request.substr(0, head_end);
      size_t length = 0;
      std::string lower = absl::AsciiStrToLower(head);
      if (size_t at = lower.find("\r\ncontent-length:"); at != std::string::npos) {
        length = std::strtoul(lower.c_str() + at + 17, nullptr, 10);
      }
      while (head_end != std::string::npos && length < (16 << 20) &&
             request.size() < head_end + 4 + length) {
        int n = read_some(buf, sizeof(buf));
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (head_end != std::string::npos) bodies_.push_back(request.substr(head_end + 4));
      }
      std::optional<std::string> body = serve_(path, head);
      const char* type =
          body && body->rfind("<!DOCTYPE html>", 0) == 0 ? "text/html" : "application/octet-stream";
      std::string reply =
          body && body->rfind("HTTP/1.", 0) == 0 ? *body  // a whole response of the handler's
          : body ? absl::StrCat("HTTP/1.0 200 OK\r\nContent-Type: ", type,
                                "\r\nContent-Length: ", body->size(),
                                "\r\nConnection: close\r\n\r\n", *body)
                 : "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      write_all(reply);
      if (ssl != nullptr) {
        SSL_shutdown(ssl);
        SSL_free(ssl);
      }
      close(c);
    }
  }

  RequestHandler serve_;
  SSL_CTX* tls_ = nullptr;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::mutex mu_;
  std::vector<std::string> names_;
  std::vector<std::string> bodies_;
  std::thread thread_;
};

// A temporary directory of the test's, removed with it.
struct TestDir {
  TestDir() {
    char tmpl[] = "/tmp/airlock-test-XXXXXX";
    EXPECT_NE(mkdtemp(tmpl), nullptr);
    path = tmpl;
  }
  ~TestDir() { RemoveTree(path).IgnoreError(); }
  std::string path;
};

inline std::string CreateSession(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"session", "create"};
  args.insert(args.end(), extra.begin(), extra.end());
  Result r = RunAirlock(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return std::string(absl::StripTrailingAsciiWhitespace(r.out));
}

// The output of `airlock ARGS...` once it contains `needle` (events are stored a moment after
// they happen), or as it is after 10 s.
inline std::string WaitFor(const std::vector<std::string>& args, const std::string& needle) {
  std::string out;
  for (int i = 0; i < 50; ++i) {
    out = RunAirlock(args).out;
    if (out.find(needle) != std::string::npos) break;
    usleep(200000);
  }
  return out;
}

}  // namespace airlock

#endif  // AIRLOCK_TESTS_LOOPBACK_HTTP_SERVER_H_
