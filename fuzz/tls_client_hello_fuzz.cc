// Fuzz target: the ClientHello peek of the egress proxy, fed a guest's first bytes on port 443.
// Besides not crashing, it checks the incremental contract: a prefix of the bytes gives
// kNeedMore or exactly the answer the whole gives, and every answer is well formed.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "src/net/tls_client_hello.h"

namespace {

using airlock::net::ClientHelloInfo;
using airlock::net::PeekResult;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

PeekResult PeekChecked(std::span<const uint8_t> bytes, ClientHelloInfo* info, std::string* error) {
  PeekResult result = airlock::net::PeekClientHello(bytes, info, error);
  const bool failed = result == PeekResult::kNotTls || result == PeekResult::kMalformed;
  Check(failed != error->empty());
  if (result != PeekResult::kDone) Check(*info == ClientHelloInfo{});
  Check(info->sni.size() <= airlock::net::kMaxServerNameBytes);
  for (char c : info->sni) Check(c > 0x20 && c < 0x7f && !(c >= 'A' && c <= 'Z'));
  for (const std::string& protocol : info->alpn) Check(!protocol.empty());
  return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> all(data, size);
  ClientHelloInfo whole_info;
  std::string whole_error;
  PeekResult whole = PeekChecked(all, &whole_info, &whole_error);
  // Every prefix of a short input; a spread of them of a long one.
  const size_t step = size <= 256 ? 1 : size / 64;
  for (size_t n = 0; n < size; n += step) {
    for (size_t m : {n, size - 1 - n}) {
      ClientHelloInfo info;
      std::string error;
      PeekResult part = PeekChecked(all.first(m), &info, &error);
      if (part == PeekResult::kNeedMore) continue;
      Check(part == whole);
      Check(info == whole_info);
      Check(error == whole_error);
    }
  }
  return 0;
}
