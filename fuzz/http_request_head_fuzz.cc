// Fuzz target: the HTTP request head peek of the egress proxy, fed a guest's first bytes on port
// 80. Besides not crashing, it checks the incremental contract: a prefix of the bytes gives
// kNeedMore or exactly the answer the whole gives, and every answer is well formed. Then the same
// bytes go through the gate that checks every request of a kept-alive connection
// (http_request_gate.h), whole and in pieces: both forward the same bytes and agree on the
// verdict, and what a gate forwards is always a prefix of what the guest sent.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "src/net/http_request_gate.h"
#include "src/net/http_request_head.h"

namespace {

using airlock::net::HeadResult;
using airlock::net::HttpRequestHead;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

HeadResult PeekChecked(std::span<const uint8_t> bytes, HttpRequestHead* head, std::string* error) {
  HeadResult result = airlock::net::PeekHttpRequestHead(bytes, head, error);
  Check((result == HeadResult::kMalformed) != error->empty());
  if (result != HeadResult::kDone) {
    Check(*head == HttpRequestHead{});
  } else {
    Check(!head->host.empty() && !head->method.empty() && !head->target.empty());
    Check(head->method != "CONNECT");
    for (char c : head->host) {
      Check(!(c >= 'A' && c <= 'Z') && c != '[' && c != ']' && c != ' ' && c != '/');
    }
  }
  return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> all(data, size);
  HttpRequestHead whole_head;
  std::string whole_error;
  HeadResult whole = PeekChecked(all, &whole_head, &whole_error);
  // Every prefix of a short input; a spread of them of a long one.
  const size_t step = size <= 256 ? 1 : size / 64;
  for (size_t n = 0; n < size; n += step) {
    for (size_t m : {n, size - 1 - n}) {
      HttpRequestHead head;
      std::string error;
      HeadResult part = PeekChecked(all.first(m), &head, &error);
      if (part == HeadResult::kNeedMore) continue;
      Check(part == whole);
      Check(head == whole_head);
      Check(error == whole_error);
    }
  }

  // The gate, allowed for the host the first head names (or a fixed one).
  std::string host = whole == HeadResult::kDone ? whole_head.host : "web.test";
  std::string_view text(reinterpret_cast<const char*>(data), size);
  airlock::net::HttpRequestGate at_once(host);
  std::string forwarded_at_once;
  bool ok_at_once = at_once.FromGuest(text, &forwarded_at_once).ok();
  Check(text.substr(0, forwarded_at_once.size()) == forwarded_at_once);
  airlock::net::HttpRequestGate in_pieces(host);
  std::string forwarded_in_pieces;
  bool ok_in_pieces = true;
  for (size_t at = 0; at < size && ok_in_pieces; at += 7) {
    ok_in_pieces = in_pieces.FromGuest(text.substr(at, 7), &forwarded_in_pieces).ok();
  }
  Check(text.substr(0, forwarded_in_pieces.size()) == forwarded_in_pieces);
  if (!at_once.waiting_for_upgrade() && !in_pieces.waiting_for_upgrade()) {
    Check(ok_at_once == ok_in_pieces);
    if (ok_at_once) Check(forwarded_at_once == forwarded_in_pieces);
  }
  if (at_once.waiting_for_upgrade()) {
    std::string freed;
    (void)at_once.FromServer("HTTP/1.1 200 OK\r\n\r\n", &freed);
  }
  return 0;
}
