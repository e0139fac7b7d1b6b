// Fuzz target: the HTTP gateway's reading of a connection's first request head (anyone who can
// reach the gateway sends these bytes). Besides not crashing, it checks the incremental
// contract (a prefix gives kNeedMore or exactly the whole's answer) and that a route, when
// there is one, is a session id and a port that ExposureHost turns back into a host that
// routes the same way; and that a chunked body decoded as it arrives (ChunkedDecoder) gives
// what DecodeChunked gives for the whole.
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
  // Decoded as it arrives, in two pieces cut anywhere: done with the same data whenever the
  // whole is (and only then), never more data than the whole carries.
  std::string whole_body;
  GatewayParse at_once = airlock::gateway::DecodeChunked(all, size + 1, &whole_body, &error);
  for (size_t cut : {size_t{0}, size / 3, size / 2, size}) {
    airlock::gateway::ChunkedDecoder decoder;
    std::string streamed, why;
    GatewayParse first = decoder.Add(all.substr(0, cut), &streamed, &why);
    GatewayParse second =
        first == GatewayParse::kNeedMore ? decoder.Add(all.substr(cut), &streamed, &why) : first;
    Check((second == GatewayParse::kDone) == (at_once == GatewayParse::kDone));
    if (second == GatewayParse::kDone) Check(streamed == whole_body);
    Check(streamed.size() <= size);
  }
  return 0;
}
