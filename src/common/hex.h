// Lowercase hex of bytes (digests).
#ifndef AIRLOCK_COMMON_HEX_H_
#define AIRLOCK_COMMON_HEX_H_

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

}  // namespace airlock

#endif  // AIRLOCK_COMMON_HEX_H_
