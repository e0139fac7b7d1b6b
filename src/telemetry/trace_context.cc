#include "src/telemetry/trace_context.h"

#include <openssl/rand.h>

#include "src/common/hex.h"

namespace airlock::telemetry {

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase is not allowed by the specification
}

// `hex` (lowercase, even length) as bytes; nullopt if any digit is not one.
std::optional<std::string> Decode(absl::string_view hex) {
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    int high = HexDigit(hex[i]), low = HexDigit(hex[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    out.push_back(static_cast<char>(high * 16 + low));
  }
  return out;
}

bool AllZero(const std::string& bytes) {
  return bytes.find_first_not_of('\0') == std::string::npos;
}

std::string RandomId(size_t bytes) {
  std::string id(bytes, '\0');
  do {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(id.data()), static_cast<int>(bytes)) != 1) {
      id.assign(bytes, '\0');
      id[bytes - 1] = 1;  // never all zero, even if the RNG fails
    }
  } while (AllZero(id));
  return id;
}

}  // namespace

std::optional<SpanContext> ParseTraceparent(absl::string_view header) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55. A later
  // version may append fields after another "-".
  if (header.size() < 55 || header[2] != '-' || header[35] != '-' || header[52] != '-') {
    return std::nullopt;
  }
  std::optional<std::string> version = Decode(header.substr(0, 2));
  if (!version || static_cast<unsigned char>((*version)[0]) == 0xff) return std::nullopt;
  if ((*version)[0] == 0 && header.size() != 55) return std::nullopt;
  if (header.size() > 55 && header[55] != '-') return std::nullopt;
  std::optional<std::string> trace = Decode(header.substr(3, 32));
  std::optional<std::string> span = Decode(header.substr(36, 16));
  std::optional<std::string> flags = Decode(header.substr(53, 2));
  if (!trace || !span || !flags || AllZero(*trace) || AllZero(*span)) return std::nullopt;
  return SpanContext{*trace, *span, (static_cast<unsigned char>((*flags)[0]) & 1) != 0};
}

std::string FormatTraceparent(const SpanContext& context) {
  return "00-" +
         HexString(reinterpret_cast<const unsigned char*>(context.trace_id.data()),
                   context.trace_id.size()) +
         "-" +
         HexString(reinterpret_cast<const unsigned char*>(context.span_id.data()),
                   context.span_id.size()) +
         (context.sampled ? "-01" : "-00");
}

std::string NewTraceId() { return RandomId(16); }
std::string NewSpanId() { return RandomId(8); }

}  // namespace airlock::telemetry
