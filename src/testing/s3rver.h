// s3rver (npm's S3-compatible server, installed in tests/s3 by scripts/test.sh) on 127.0.0.1 at a
// port it picks, storing under a directory of the test's, with one bucket, for as long as the
// object lives. Its access key and secret are both "S3RVER". A server that does not start is a
// test failure saying why.
#ifndef AIRLOCK_TESTING_S3RVER_H_
#define AIRLOCK_TESTING_S3RVER_H_

#include <sys/types.h>

#include <string>

namespace airlock::testing {

class S3rver {
 public:
  // node: the node binary; package_dir: tests/s3 (with node_modules); dir: where it stores.
  S3rver(const std::string& node, const std::string& package_dir, const std::string& dir,
         const std::string& bucket);
  ~S3rver();
  S3rver(const S3rver&) = delete;
  S3rver& operator=(const S3rver&) = delete;

  bool running() const { return port_ > 0; }
  // "http://127.0.0.1:PORT"
  std::string Endpoint() const;
  // The file s3rver keeps an object's bytes in.
  std::string ObjectFile(const std::string& bucket, const std::string& key) const;
  // What it has logged (a line per request and per stored part).
  std::string Log() const;

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace airlock::testing

#endif  // AIRLOCK_TESTING_S3RVER_H_
