// W3C Trace Context: which trace a call belongs to. A gRPC caller sends `traceparent:
// 00-TRACEID-PARENTID-FLAGS` (32 and 16 lowercase hex digits, 2 for flags); airlockd's span for
// the call continues that trace as the parent's child. The header is untrusted bytes: anything
// that is not exactly that form is ignored (the call then starts a trace of its own).
#ifndef AIRLOCK_TELEMETRY_TRACE_CONTEXT_H_
#define AIRLOCK_TELEMETRY_TRACE_CONTEXT_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace airlock::telemetry {

struct SpanContext {
  std::string trace_id;  // 16 bytes, not all zero
  std::string span_id;   // 8 bytes, not all zero
  bool sampled = true;
};

// The parent named by a traceparent header of version 00 (or a later version, read as 00
// says); nullopt for anything malformed, an all-zero id, or version ff.
std::optional<SpanContext> ParseTraceparent(absl::string_view header);
// "00-TRACEID-SPANID-01" (or -00 when not sampled).
std::string FormatTraceparent(const SpanContext& context);

// Random ids (never all zero).
std::string NewTraceId();
std::string NewSpanId();

}  // namespace airlock::telemetry

#endif  // AIRLOCK_TELEMETRY_TRACE_CONTEXT_H_
