// Fuzz target: the channel's frame parser and every payload decoder, fed bytes as a hostile
// guest (or host) would send them, split at arbitrary points. A payload a decoder accepts must
// encode back to the same bytes: nothing is read that the encoder would not write.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "src/common/channel_frame.h"
#include "src/common/channel_messages.h"

namespace {

template <typename Message>
void RoundTrip(const std::string& payload) {
  Message m;
  if (airlock::DecodePayload(payload, &m) && airlock::EncodePayload(m) != payload) {
    __builtin_trap();
  }
}

// Every frame's payload is tried as every kind: a peer may put any bytes under any type.
void DecodeAll(const std::string& payload) {
  using namespace airlock;
  RoundTrip<SyncMessage>(payload);
  RoundTrip<ReadyMessage>(payload);
  RoundTrip<ExecStartMessage>(payload);
  RoundTrip<ExitMessage>(payload);
  RoundTrip<SignalMessage>(payload);
  RoundTrip<WindowMessage>(payload);
  RoundTrip<ResizeMessage>(payload);
  RoundTrip<FileWriteMessage>(payload);
  RoundTrip<FileReadMessage>(payload);
  RoundTrip<TailFilesMessage>(payload);
  RoundTrip<AgentStoreMessage>(payload);
  RoundTrip<ProtocolErrorMessage>(payload);
  RoundTrip<DnsQueryMessage>(payload);
  RoundTrip<DnsAnswerMessage>(payload);
  RoundTrip<ConnectMessage>(payload);
  RoundTrip<OpenPortMessage>(payload);
  RoundTrip<ResetMessage>(payload);
  RoundTrip<NetPolicyMessage>(payload);
  RoundTrip<GuestMetrics>(payload);
  RoundTrip<FsRequestMessage>(payload);
  RoundTrip<WatchDirMessage>(payload);
  uint32_t version;
  std::string agent;
  DecodeHello(payload, &version, &agent);
  std::vector<TailRecord> records;
  std::string error;
  DecodeTailRecords(payload, kMaxTailBytes, &records, &error);
  std::vector<FsEntry> entries;
  if (DecodeFsEntries(payload, &entries, &error)) {
    std::string again;
    for (const FsEntry& e : entries) again += EncodeFsEntry(e);
    if (again != payload) __builtin_trap();
  }
  std::vector<WatchRecord> watch;
  if (DecodeWatchRecords(payload, &watch, &error)) {
    std::string again;
    for (const WatchRecord& r : watch) again += EncodeWatchRecord(r);
    if (again != payload) __builtin_trap();
  }
  AgentStoreMessage store{.max_rows = kMaxStoreRows, .max_bytes = kMaxStoreBytes};
  std::vector<StoreRow> rows;
  int number = 0;
  std::string what;
  if (DecodeStoreAnswer(payload, store, &number, &what, &rows, &error) &&
      EncodeStoreAnswer(number, what, rows) != payload) {
    __builtin_trap();
  }
  std::vector<ActivityRecord> activity;
  if (DecodeActivityRecords(payload, &activity, &error)) {
    std::string again;
    for (const ActivityRecord& r : activity) again += EncodeActivityRecord(r);
    if (again != payload) __builtin_trap();
  }
}

}  // namespace

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
      DecodeAll(frame.payload);
    }
  }
  return 0;
}
