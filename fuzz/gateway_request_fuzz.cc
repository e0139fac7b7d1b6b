// Fuzz target: the HTTP gateway's reading of a connection's first request head (anyone who can
// reach the gateway sends these bytes). Besides not crashing, it checks the incremental
// contract (a prefix gives kNeedMore or exactly the whole's answer) and that a route, when
// there is one, is a session id and a port that ExposureHost turns back into a host that
// routes the same way.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "src/gateway/gateway_request.h"

namespace {

using airlock::gateway::GatewayParse;
using airlock::gateway::GatewayRequest;

constexpr absl::string_view kDomain = "airlock.localhost";

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

GatewayParse ParseChecked(absl::string_view bytes, GatewayRequest* r, std::string* error) {
  GatewayParse result = airlock::gateway::ParseGatewayRequest(bytes, kDomain, r, error);
  Check((result == GatewayParse::kMalformed) != error->empty());
  if (result != GatewayParse::kDone) {
    Check(*r == GatewayRequest{});
    return result;
  }
  Check(!r->method.empty() && !r->target.empty());
  Check(r->head_bytes > 0 && r->head_bytes <= bytes.size());
  Check(r->head_bytes <= airlock::gateway::kMaxGatewayHeadBytes);
  Check(r->session_id.empty() == (r->port == 0));
  if (!r->session_id.empty()) {
    Check(r->session_id.size() == 12);
    std::string again = "GET / HTTP/1.1\r\nHost: " +
                        airlock::gateway::ExposureHost(r->port, r->session_id, kDomain) +
                        "\r\n\r\n";
    GatewayRequest routed;
    std::string e;
    Check(airlock::gateway::ParseGatewayRequest(again, kDomain, &routed, &e) ==
          GatewayParse::kDone);
    Check(routed.session_id == r->session_id && routed.port == r->port && !routed.by_header);
  }
  Check(r->target_without_token.size() <= r->target.size());
  return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view all(reinterpret_cast<const char*>(data), size);
  GatewayRequest whole;
  std::string whole_error;
  GatewayParse result = ParseChecked(all, &whole, &whole_error);
  const size_t step = size <= 256 ? 1 : size / 64;
  for (size_t n = 0; n < size; n += step) {
    GatewayRequest part;
    std::string error;
    GatewayParse got = ParseChecked(all.substr(0, n), &part, &error);
    if (got == GatewayParse::kNeedMore) continue;
    Check(got == result);
    Check(part == whole);
    Check(error == whole_error);
  }
  // The same bytes as a chunked body: within its cap, and a prefix never says more than whole.
  std::string body, error;
  GatewayParse chunked = airlock::gateway::DecodeChunked(all, 4096, &body, &error);
  Check(body.size() <= 4096);
  Check((chunked == GatewayParse::kMalformed) != error.empty());
  if (chunked != GatewayParse::kDone) Check(body.empty() || chunked == GatewayParse::kNeedMore);
  return 0;
}
