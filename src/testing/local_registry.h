// A real OCI registry (Debian's docker-registry) on a free loopback port, storing under a
// directory of the test's, for as long as the object lives. Tests push to it and pull from it.
#ifndef AIRLOCK_TESTING_LOCAL_REGISTRY_H_
#define AIRLOCK_TESTING_LOCAL_REGISTRY_H_

#include <sys/types.h>

#include <string>

namespace airlock::testing {

class LocalRegistry {
 public:
  explicit LocalRegistry(const std::string& dir);
  ~LocalRegistry();
  // "localhost:PORT"
  std::string Host() const;
  // The file the registry keeps a blob ("sha256:...") in.
  std::string BlobFile(const std::string& digest) const;

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace airlock::testing

#endif  // AIRLOCK_TESTING_LOCAL_REGISTRY_H_
