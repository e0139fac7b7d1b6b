#include "src/testing/fake_registry.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "src/common/sha256.h"
#include "src/image/image_store.h"

namespace airlock::testing {
namespace {

std::string Digest(const std::string& bytes) { return "sha256:" + Sha256Hex(bytes); }

constexpr char kToken[] = "Bearer fake-token-1234";

// The value of a header in a request head ("" if absent); names compare case-insensitively.
std::string Header(const std::string& head, const std::string& name) {
  size_t at = 0;
  while ((at = head.find("\r\n", at)) != std::string::npos) {
    at += 2;
    size_t colon = head.find(':', at);
    size_t end = head.find("\r\n", at);
    if (colon == std::string::npos || end == std::string::npos || colon > end) return "";
    if (absl::EqualsIgnoreCase(head.substr(at, colon - at), name)) {
      return std::string(absl::StripAsciiWhitespace(head.substr(colon + 1, end - colon - 1)));
    }
  }
  return "";
}

// Waits up to `ms` for the peer to send or hang up; true if it hung up.
bool PeerGone(int fd, int ms) {
  pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, ms) <= 0) return false;
  char c;
  return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

}  // namespace

FakeRegistry::FakeRegistry() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd_, 16) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    abort();
  }
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FakeRegistry::~FakeRegistry() {
  stopping_ = true;
  shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  close(listen_fd_);
  absl::MutexLock lock(&mu_);
  for (std::thread& t : connections_) t.join();
}

std::string FakeRegistry::Host() const { return absl::StrCat("127.0.0.1:", port_); }

std::string FakeRegistry::AddImage(const std::string& repository, const std::string& tag,
                                   const std::vector<std::string>& layers,
                                   const std::string& config) {
  nlohmann::json descriptors = nlohmann::json::array();
  absl::MutexLock lock(&mu_);
  std::string base = "/v2/" + repository;
  for (const std::string& layer : layers) {
    descriptors.push_back({{"mediaType", "application/vnd.oci.image.layer.v1.tar"},
                           {"digest", Digest(layer)},
                           {"size", layer.size()}});
    objects_[base + "/blobs/" + Digest(layer)] = {"application/octet-stream", layer};
  }
  objects_[base + "/blobs/" + Digest(config)] = {"application/octet-stream", config};
  nlohmann::json manifest = {{"schemaVersion", 2},
                             {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                             {"config",
                              {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                               {"digest", Digest(config)},
                               {"size", config.size()}}},
                             {"layers", descriptors}};
  Object m = {"application/vnd.oci.image.manifest.v1+json", manifest.dump()};
  objects_[base + "/manifests/" + tag] = m;
  objects_[base + "/manifests/" + Digest(m.bytes)] = m;
  return Digest(m.bytes);
}

void FakeRegistry::SetObject(const std::string& path, const std::string& content_type,
                             const std::string& bytes) {
  absl::MutexLock lock(&mu_);
  objects_[path] = {content_type, bytes};
}

std::string FakeRegistry::Served(const std::string& path) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(path);
  return it == objects_.end() ? "" : it->second.bytes;
}

void FakeRegistry::SetAuth(Auth auth, const std::string& user_password) {
  std::string encoded(4 * ((user_password.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded.data()),
                          reinterpret_cast<const unsigned char*>(user_password.data()),
                          static_cast<int>(user_password.size()));
  encoded.resize(static_cast<size_t>(n));
  absl::MutexLock lock(&mu_);
  auth_ = auth;
  basic_ = "Basic " + encoded;
}

void FakeRegistry::SetFaults(const Faults& faults) {
  absl::MutexLock lock(&mu_);
  faults_ = faults;
}

void FakeRegistry::AcceptLoop() {
  while (!stopping_) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stopping_) return;
      continue;
    }
    absl::MutexLock lock(&mu_);
    connections_.emplace_back([this, fd] {
      Serve(fd);
      close(fd);
    });
  }
}

bool FakeRegistry::SendAll(int fd, const std::string& data, uint64_t rate) {
  size_t chunk = rate == 0 ? data.size() : std::max<size_t>(1, rate / 20);
  for (size_t at = 0; at < data.size();) {
    if (stopping_) return false;
    size_t n = std::min(chunk, data.size() - at);
    ssize_t w = send(fd, data.data() + at, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    at += static_cast<size_t>(w);
    if (rate != 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

void FakeRegistry::Serve(int fd) {
  // One request per connection: read its head, answer, close.
  std::string request;
  char buf[4096];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < 65536) {
    if (PeerGone(fd, 100)) return;
    if (stopping_) return;
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) request.append(buf, static_cast<size_t>(n));
  }
  ++requests_;
  std::string line = request.substr(0, request.find("\r\n"));
  std::string method = line.substr(0, line.find(' '));
  std::string path = line.substr(method.size() + 1);
  path = path.substr(0, path.find(' '));
  Faults faults;
  Object object;
  bool found = false;
  Auth auth;
  std::string basic;
  {
    absl::MutexLock lock(&mu_);
    faults = faults_;
    auth = auth_;
    basic = basic_;
    if (faults_.fail_first > 0) --faults_.fail_first;
    auto it = objects_.find(path);
    if (it != objects_.end()) {
      object = it->second;
      found = true;
    } else if (path == "/v2/") {
      object = {"application/json", "{}"};
      found = true;
    }
  }
  bool blob = path.find("/blobs/") != std::string::npos;
  std::string challenge;  // the WWW-Authenticate of a 401
  auto answer = [&](int code, const char* reason, const std::string& type, const std::string& body,
                    size_t send_bytes, uint64_t rate) {
    std::string head =
        absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", type,
                     "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n");
    if (code == 401) absl::StrAppend(&head, "WWW-Authenticate: ", challenge, "\r\n");
    if (code == 200) absl::StrAppend(&head, "Docker-Content-Digest: ", Digest(body), "\r\n");
    head += "\r\n";
    if (!SendAll(fd, head, 0) || method == "HEAD") return;
    SendAll(fd, body.substr(0, send_bytes), rate);  // npos: all of it
  };
  if (absl::StartsWith(path, "/cdn/")) {  // where redirected blobs are: no login needed
    absl::MutexLock lock(&mu_);
    for (const auto& [p, o] : objects_) {
      if (absl::EndsWith(p, path.substr(4, path.find('?') - 4))) {
        object = o;
        found = true;
      }
    }
  }
  bool cdn = found && absl::StartsWith(path, "/cdn/");
  std::string authorization = Header(request, "Authorization");
  bool bearer = auth == Auth::kAnonymousBearer || auth == Auth::kBearerWithLogin;
  if (absl::StartsWith(path, "/token?") && bearer) {
    // The token service: it wants a scope, and for kBearerWithLogin the login.
    if (path.find("scope=repository%3A") == std::string::npos &&
        path.find("scope=repository:") == std::string::npos) {
      answer(400, "Bad Request", "text/plain", "no scope\n", std::string::npos, 0);
    } else if (auth == Auth::kBearerWithLogin && authorization != basic) {
      challenge = R"(Basic realm="fake")";
      answer(401, "Unauthorized", "text/plain", "log in\n", std::string::npos, 0);
    } else {
      answer(200, "OK", "application/json",
             absl::StrCat(R"({"token":")", std::string(kToken).substr(7), R"("})"),
             std::string::npos, 0);
    }
    return;
  }
  if (!cdn &&
      ((bearer && authorization != kToken) || (auth == Auth::kBasic && authorization != basic))) {
    challenge = bearer ? absl::StrCat(R"(Bearer realm="http://)", Host(),
                                      R"(/token",service="fake",scope="repository:x:pull")")
                       : R"(Basic realm="fake")";
    answer(401, "Unauthorized", "application/json", R"({"errors":[{"code":"UNAUTHORIZED"}]})",
           std::string::npos, 0);
    return;
  }
  if (faults.fail_always || faults.fail_first > 0) {
    answer(500, "Internal Server Error", "text/plain", "broken\n", std::string::npos, 0);
  } else if (!found) {
    answer(404, "Not Found", "application/json", R"({"errors":[{"code":"NOT_FOUND"}]})",
           std::string::npos, 0);
  } else if (blob && faults.redirect_blobs && !cdn) {
    challenge = "";
    std::string location = absl::StrCat("http://", Host(), "/cdn",
                                        path.substr(path.find("/blobs/")), "?signature=abc");
    std::string head = absl::StrCat("HTTP/1.1 307 Temporary Redirect\r\nLocation: ", location,
                                    "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    SendAll(fd, head, 0);
  } else if (blob && faults.hang_blobs) {
    while (!stopping_ && !PeerGone(fd, 100)) {
    }
  } else {
    size_t send = blob && faults.truncate_blobs ? object.bytes.size() / 2 : object.bytes.size();
    answer(200, "OK", object.content_type, object.bytes, send,
           blob ? faults.blob_bytes_per_second : 0);
  }
}

}  // namespace airlock::testing
