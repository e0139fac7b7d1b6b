// Fuzz target: the channel's frame parser and payload decoders, fed bytes as a hostile guest
// (or host) would send them, split at arbitrary points.
#include <cstddef>
#include <cstdint>
#include <span>

#include "src/common/channel_frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t split = data[0];
  std::span<const uint8_t> all(data + 1, size - 1);
  airlock::FrameParser parser;
  airlock::Frame frame;
  // Feed in two pieces to exercise partial headers and payloads.
  for (std::span<const uint8_t> piece :
       {all.subspan(0, std::min(split, all.size())), all.subspan(std::min(split, all.size()))}) {
    for (;;) {
      airlock::FrameParser::Result r = parser.Next(&piece, &frame);
      if (r != airlock::FrameParser::Result::kFrame) break;
      if (frame.payload.size() > airlock::kMaxPayload) __builtin_trap();
      airlock::PayloadReader reader(frame.payload);
      std::vector<std::string> list;
      std::string s;
      uint32_t u;
      reader.StrList(&list) && reader.Str(&s) && reader.U32(&u);
      airlock::GuestMetrics m;
      airlock::DecodeMetrics(frame.payload, &m);
    }
  }
  return 0;
}
