// Fuzz target: W3C traceparent headers as any gRPC caller sends them. Besides not crashing: a
// header that parses names non-zero ids of the right sizes, and writing it back gives a header
// that parses to the same context.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/telemetry/trace_context.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string header(reinterpret_cast<const char*>(data), size);
  std::optional<airlock::telemetry::SpanContext> parsed =
      airlock::telemetry::ParseTraceparent(header);
  if (!parsed) return 0;
  Check(parsed->trace_id.size() == 16 && parsed->span_id.size() == 8);
  Check(parsed->trace_id.find_first_not_of('\0') != std::string::npos);
  Check(parsed->span_id.find_first_not_of('\0') != std::string::npos);
  std::string again = airlock::telemetry::FormatTraceparent(*parsed);
  std::optional<airlock::telemetry::SpanContext> reparsed =
      airlock::telemetry::ParseTraceparent(again);
  Check(reparsed && reparsed->trace_id == parsed->trace_id &&
        reparsed->span_id == parsed->span_id && reparsed->sampled == parsed->sampled);
  return 0;
}
