// For unit tests of what the state store holds: a session record with the fields a test
// rarely cares about filled in.
#ifndef AIRLOCK_DAEMON_STATE_STORE_TESTING_H_
#define AIRLOCK_DAEMON_STATE_STORE_TESTING_H_

#include <string>

#include "src/daemon/state_store.h"

namespace airlock {

inline SessionRecord NewSession(const std::string& id, const Principal& owner) {
  SessionRecord s;
  s.id = id;
  s.tenant = owner.Tenant();
  s.image = "img";
  s.image_digest = "sha256:00";
  s.created_ms = s.last_used_ms = NowUnixMs();
  s.hostname = id;
  return s;
}

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_STATE_STORE_TESTING_H_
