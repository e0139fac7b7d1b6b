// Fuzz target: the HTTP request head peek of the egress proxy, fed a guest's first bytes on port
// 80. Besides not crashing, it checks the incremental contract: a prefix of the bytes gives
// kNeedMore or exactly the answer the whole gives, and every answer is well formed.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

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
  return 0;
}
