// Who a command runs as: the OCI `User` forms (NAME, UID, NAME:GROUP, UID:GID, and mixes),
// looked up in the guest's own /etc/passwd and /etc/group. Runs inside the guest, where those
// files belong to the image; standard library only, so the host's unit tests can run it too.
#ifndef AIRLOCK_GUEST_USER_LOOKUP_H_
#define AIRLOCK_GUEST_USER_LOOKUP_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace airlock::guest {

struct Identity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups, the primary one included
  std::string home = "/";     // from the passwd entry, "/" without one
};

// Resolves `spec` against the text of passwd and group files. An empty spec is root. A
// numeric user or group need not exist in the files (as in Docker: uid 1000 without an entry
// runs with gid 0); a name must. Returns false with *error saying what is missing.
bool ResolveUser(const std::string& spec, const std::string& passwd, const std::string& group,
                 Identity* out, std::string* error);

// The names of the ids in a passwd or group file's text (both keep the id in the third
// field); the first entry for an id wins.
std::map<uint32_t, std::string> IdNames(const std::string& database);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_USER_LOOKUP_H_
