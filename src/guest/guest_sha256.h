// SHA-256 (FIPS 180-4) for the guest agent, which links nothing beyond the C++ standard library.
//
// Written from the specification: the standard round constants and initial hash value, a
// big-endian message schedule, and padding with a 0x80 byte, zeros, and the message's length in
// bits as a 64-bit big-endian integer. Not thread-safe; one object hashes one message.
#ifndef AIRLOCK_GUEST_GUEST_SHA256_H_
#define AIRLOCK_GUEST_GUEST_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace airlock::guest {

// SHA-256 (FIPS 180-4) for the guest agent, which links nothing beyond the C++ standard library.
class Sha256 {
 public:
  Sha256();

  void Update(const void* data, size_t n);
  // The 32-byte digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> Finish();

 private:
  static constexpr size_t kBlockSize = 64;

  // Runs the compression function over one 64-byte block.
  void ProcessBlock(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, kBlockSize> buffer_{};
  size_t buffered_ = 0;       // Bytes of buffer_ in use, always below kBlockSize.
  uint64_t total_bytes_ = 0;  // Message length so far, in bytes.
};

// The SHA-256 digest of `data`.
std::array<uint8_t, 32> Sha256Of(std::string_view data);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_GUEST_SHA256_H_
