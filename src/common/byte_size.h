// Sizes as people write and read them: "512m", "2g" in, "512MiB", "1.5GiB" out (binary units).
#ifndef AIRLOCK_COMMON_BYTE_SIZE_H_
#define AIRLOCK_COMMON_BYTE_SIZE_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace airlock {

// Digits with an optional unit k, m, g or t (also written kb, mib, ...; any case); a plain
// number counts `plain_unit`s. False for anything else, or a value that does not fit 64 bits.
bool ParseByteSize(absl::string_view text, uint64_t plain_unit, uint64_t* bytes);

// "1.5GiB", "512MiB", "12KiB", "100B".
std::string FormatBytes(uint64_t bytes);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_BYTE_SIZE_H_
