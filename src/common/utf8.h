// Bytes that claim to be text (a guest's output, a transcript) made valid UTF-8.
#ifndef AIRLOCK_COMMON_UTF8_H_
#define AIRLOCK_COMMON_UTF8_H_

#include <string>
#include <string_view>

namespace airlock {

// Bytes as valid UTF-8: each byte that is not part of a valid sequence becomes the four
// characters \xNN (with marker "\\\\x" inside JSON text: the five characters \\xNN, which a
// JSON string reads back as \xNN). Sets *escaped if any was.
std::string EscapeInvalidUtf8(std::string_view bytes, bool* escaped = nullptr,
                              std::string_view marker = "\\x");

}  // namespace airlock

#endif  // AIRLOCK_COMMON_UTF8_H_
