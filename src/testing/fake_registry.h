// An OCI registry in memory on 127.0.0.1, for tests of how the registry client copes with a
// registry that fails: it serves the images put into it (over plain http) and
// misbehaves as told — server errors, hangs, slow or cut-off blob downloads — and asks for
// logins the ways real registries do.
#ifndef AIRLOCK_TESTING_FAKE_REGISTRY_H_
#define AIRLOCK_TESTING_FAKE_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace airlock::testing {

class FakeRegistry {
 public:
  struct Faults {
    int fail_first = 0;                  // answer this many requests (from now) with HTTP 500
    bool fail_always = false;            // answer every request with HTTP 500
    bool hang_blobs = false;             // take blob requests and never answer them
    bool truncate_blobs = false;         // send half of each blob, then close the connection
    uint64_t blob_bytes_per_second = 0;  // send blobs this slowly; 0: at full speed
    bool redirect_blobs = false;  // answer blob requests with a 307 to /cdn/..., as Docker Hub does
  };

  // How clients must log in.
  enum class Auth {
    kNone,
    kAnonymousBearer,  // a token from /token asked for without credentials (Docker Hub's way)
    kBearerWithLogin,  // a token from /token asked for with USER:PASSWORD (basic)
    kBasic,            // USER:PASSWORD (basic) on every request
  };

  FakeRegistry();
  ~FakeRegistry();
  FakeRegistry(const FakeRegistry&) = delete;
  FakeRegistry& operator=(const FakeRegistry&) = delete;

  // "127.0.0.1:PORT"
  std::string Host() const;
  // Serves an image (layer tars and config JSON) as repository:tag; returns the manifest's
  // digest ("sha256:...").
  std::string AddImage(const std::string& repository, const std::string& tag,
                       const std::vector<std::string>& layers, const std::string& config);
  // Serves these bytes at a path ("/v2/<repository>/manifests/<ref>", ".../blobs/<digest>"),
  // whatever they are: for registries that lie.
  void SetObject(const std::string& path, const std::string& content_type,
                 const std::string& bytes);
  // What is served at a path now ("" if nothing).
  std::string Served(const std::string& path);
  void SetFaults(const Faults& faults);
  void SetAuth(Auth auth, const std::string& user_password = "");
  // Requests answered so far (or taken, for hangs).
  int requests() const { return requests_; }

 private:
  struct Object {
    std::string content_type;
    std::string bytes;
  };
  void AcceptLoop();
  void Serve(int fd);
  // Sends all of `data`, at most `rate` bytes a second (0: no limit); false if the client left
  // or the registry is stopping.
  bool SendAll(int fd, const std::string& data, uint64_t rate);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> requests_{0};
  absl::Mutex mu_;
  Faults faults_ ABSL_GUARDED_BY(mu_);
  Auth auth_ ABSL_GUARDED_BY(mu_) = Auth::kNone;
  std::string basic_ ABSL_GUARDED_BY(mu_);  // "Basic <base64>" expected
  std::map<std::string, Object> objects_;   // "/v2/<repo>/manifests/<ref>", "/v2/<repo>/blobs/<d>"
  std::thread acceptor_;
  std::vector<std::thread> connections_;  // guarded by mu_
};

}  // namespace airlock::testing

#endif  // AIRLOCK_TESTING_FAKE_REGISTRY_H_
