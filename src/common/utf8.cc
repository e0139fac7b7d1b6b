#include "src/common/utf8.h"

#include <cstdint>
#include <cstdio>

namespace airlock {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not one.
size_t Utf8Length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t min;
  if ((c & 0xe0) == 0xc0) {
    n = 2, min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  uint32_t cp = c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

}  // namespace

std::string EscapeForTerminal(std::string_view bytes, bool keep_newlines) {
  std::string out;
  out.reserve(bytes.size());
  auto escape = [&out](std::string_view raw) {
    for (unsigned char c : raw) {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    }
  };
  for (size_t i = 0; i < bytes.size();) {
    size_t n = Utf8Length(bytes, i);
    std::string_view one = bytes.substr(i, n == 0 ? 1 : n);
    unsigned char c = static_cast<unsigned char>(one[0]);
    bool control = n == 1 ? (c < 0x20 && c != '\t' && !(keep_newlines && c == '\n')) || c == 0x7f
                          : n == 2 && c == 0xc2 && static_cast<unsigned char>(one[1]) < 0xa0;
    if (n == 0 || control) {
      escape(one);
    } else {
      out.append(one);
    }
    i += one.size();
  }
  return out;
}

std::string EscapeInvalidUtf8(std::string_view bytes, bool* escaped, std::string_view marker) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    size_t n = Utf8Length(bytes, i);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
      continue;
    }
    char hex[4];
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(bytes[i]));
    out.append(marker);
    out += hex;
    if (escaped) *escaped = true;
    ++i;
  }
  return out;
}

}  // namespace airlock
