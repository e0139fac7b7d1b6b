// Fuzz target: the E2B-compatible API's parsers of what API-key holders send (create and timeout
// bodies, list queries, routes). Besides not crashing: what a parse accepts is within the caps.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/gateway/e2b_control.h"

namespace e2b = airlock::gateway::e2b;

namespace {
void Check(bool ok) {
  if (!ok) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<e2b::NewSandbox> n = e2b::ParseNewSandbox(text);
  if (n.ok()) {
    Check(n->metadata.size() <= e2b::kMaxEntries && n->env_vars.size() <= e2b::kMaxEntries);
    Check(!n->template_id.empty() && n->template_id.size() <= 256);
    Check(!n->timeout_seconds.has_value() || (*n->timeout_seconds >= 1));
  }
  (void)e2b::ParseTimeout(text, true);
  (void)e2b::ParseTimeout(text, false);
  absl::StatusOr<e2b::ListQuery> q = e2b::ParseListQuery(text);
  if (q.ok()) Check(q->limit >= 1 && q->limit <= 100 && q->metadata.size() <= e2b::kMaxEntries);
  e2b::Route r = e2b::RouteOf("POST", text);
  Check(r.op == e2b::Op::kNotApi || r.op == e2b::Op::kUnknown || r.op == e2b::Op::kCreate ||
        !r.sandbox_id.empty());
  (void)e2b::PercentDecode(text);
  return 0;
}
