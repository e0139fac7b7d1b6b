// Parsing of sizes ("512m", "2g") and durations ("90s", "1h") given on the command line.
#ifndef AIRLOCK_CLI_CLI_FLAGS_H_
#define AIRLOCK_CLI_CLI_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "src/common/byte_size.h"  // FormatBytes

namespace airlock {

// "512m" -> 512 MiB; suffixes k, m, g, t (binary units); a plain number is MiB.
[[nodiscard]] absl::StatusOr<uint64_t> ParseSize(const std::string& text);
// "90s", "30m", "1h", "2d"; a plain number is seconds.
[[nodiscard]] absl::StatusOr<uint64_t> ParseDurationSeconds(const std::string& text);
// "3m ago"
std::string FormatAgo(int64_t unix_ms, int64_t now_ms);
// "2026-12-01T23:05:28.123Z"
std::string FormatUnixMs(int64_t unix_ms);

}  // namespace airlock

#endif  // AIRLOCK_CLI_CLI_FLAGS_H_
