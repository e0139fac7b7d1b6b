// Fuzz target: the HTTP layer of an intercepted connection, fed a hostile guest's requests and a
// server's responses in turns. Besides not crashing, it checks the promise it exists for: no byte
// sequence from either side makes the real value of a secret reach the guest, and the value goes
// upstream only in place of its placeholder.
//
// Input: a sequence of records; each starts with one byte: its low bit picks the side (0 guest,
// 1 server), bit 1 ends the server's side after the record; the next byte is the record's length.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/ascii.h"
#include "src/net/http_intercept.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

constexpr char kValue[] = "s3cr3t";  // short: it turns up in the fuzzer's bytes
constexpr char kPlaceholder[] = "PH_0123456789";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view in(reinterpret_cast<const char*>(data), size);
  airlock::net::HttpIntercept h("api.test", 443,
                                {{"KEY",
                                  std::string(kPlaceholder),
                                  std::string(kValue),
                                  (size > 0 && data[0] & 4) != 0,
                                  {"authorization", "x-api-key"}},
                                 {"OTHER", "PH_other_secret", "", false}});
  std::string to_guest, to_upstream, guest_sent, events;
  size_t at = 0;
  bool guest_done = false, upstream_done = false;
  while (at + 2 <= size) {
    uint8_t tag = data[at];
    size_t n = std::min<size_t>(data[at + 1], size - at - 2);
    absl::string_view record = in.substr(at + 2, n);
    at += 2 + n;
    if ((tag & 1) == 0) {
      if (guest_done) continue;
      guest_sent.append(record.data(), record.size());
      guest_done = !h.FromGuest(record, &to_upstream, &to_guest).ok();
    } else {
      if (upstream_done) continue;
      upstream_done = !h.FromUpstream(record, &to_guest).ok();
      if (!upstream_done && (tag & 2) != 0) {
        upstream_done = true;
        (void)h.UpstreamEnded(&to_guest);
      }
    }
    for (const airlock::net::InterceptEvent& e : h.TakeEvents()) events += e.where;
  }
  // The guest's own bytes may spell the value (it could have guessed it); then nothing is proven.
  // (Case-blind: a message may quote its bytes lower-cased.)
  if (absl::AsciiStrToLower(guest_sent).find(kValue) == std::string::npos) {
    Check(to_guest.find(kValue) == std::string::npos);
    Check(events.find(kValue) == std::string::npos);  // they go to the session's log
  }
  return 0;
}
