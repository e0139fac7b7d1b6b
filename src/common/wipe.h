// Overwriting secrets' bytes before memory holding them is freed or reused.
#ifndef AIRLOCK_COMMON_WIPE_H_
#define AIRLOCK_COMMON_WIPE_H_

#include <string.h>

#include <string>

namespace airlock {

// Overwrites a string's bytes (the compiler may not drop it), then empties it.
inline void Wipe(std::string& value) {
  explicit_bzero(value.data(), value.size());
  value.clear();
}

}  // namespace airlock

#endif  // AIRLOCK_COMMON_WIPE_H_
