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

// Bytes a guest chose (a DNS name, a command's output) made safe to print on a terminal: as
// EscapeInvalidUtf8, and control characters too (C0 but tab, DEL, and the C1 range U+0080 to
// U+009F, which some terminals read as escape sequences) become \xNN for each of their bytes, so
// that no byte sequence can move the cursor, recolour, retitle or forge a line. Newlines are
// escaped too unless keep_newlines (output printed line by line behind a prefix).
std::string EscapeForTerminal(std::string_view bytes, bool keep_newlines = false);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_UTF8_H_
