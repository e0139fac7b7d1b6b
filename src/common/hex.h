// Lowercase hex of bytes (digests), and random names.
#ifndef AIRLOCK_COMMON_HEX_H_
#define AIRLOCK_COMMON_HEX_H_

#include <sys/random.h>

#include <cstddef>
#include <string>

namespace airlock {

inline std::string HexString(const unsigned char* bytes, size_t len) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * len);
  for (size_t i = 0; i < len; ++i) {
    hex.push_back(kDigits[bytes[i] >> 4]);
    hex.push_back(kDigits[bytes[i] & 15]);
  }
  return hex;
}

// `bytes` (at most 16) random bytes in hex; empty if the kernel gave none.
inline std::string RandomHex(size_t bytes) {
  unsigned char b[16];
  if (bytes > sizeof(b) || getrandom(b, bytes, 0) != static_cast<ssize_t>(bytes)) return "";
  return HexString(b, bytes);
}

}  // namespace airlock

#endif  // AIRLOCK_COMMON_HEX_H_
