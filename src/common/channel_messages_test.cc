#include "src/common/channel_messages.h"

#include <errno.h>
#include <gtest/gtest.h>

#include <string>

namespace airlock {
namespace {

// m encodes to bytes that decode to m again.
template <typename Message>
void ExpectRoundTrip(const Message& m) {
  std::string bytes = EncodePayload(m);
  Message back;
  ASSERT_TRUE(DecodePayload(bytes, &back)) << static_cast<int>(Message::kType);
  EXPECT_TRUE(back == m) << static_cast<int>(Message::kType);
  // Cut short by a byte, or with one left over: refused.
  EXPECT_FALSE(DecodePayload(bytes.substr(0, bytes.size() - 1), &back));
  EXPECT_FALSE(DecodePayload(bytes + "x", &back));
}

// m's encoding is refused: a field is outside the protocol's caps.
template <typename Message>
bool Refused(const Message& m) {
  Message back;
  return !DecodePayload(EncodePayload(m), &back);
}

TEST(ChannelMessagesTest, EveryKindRoundTrips) {
  ExpectRoundTrip(SyncMessage{.seconds = -5,
                              .nanoseconds = 999999999,
                              .entropy = std::string(kMaxSyncEntropy, 'e'),
                              .pids_max = 64,
                              .hostname = "box",
                              .flags = kSyncMountWorkspace,
                              .volumes = {{.slot = 1, .flags = kVolumeReadOnly, .path = "/data"},
                                          {.slot = 0, .path = "/var/cache/apt"}}});
  ExpectRoundTrip(ReadyMessage{.highest_stream = 7, .highest_guest_stream = 8, .problem = "p"});
  ExpectRoundTrip(ExecStartMessage{.argv = {"sh", "-c", "true"},
                                   .env = {"A=b"},
                                   .cwd = "/tmp",
                                   .flags = kExecFlagStdin | kExecFlagTty,
                                   .user = "1000:1000",
                                   .rows = 24,
                                   .cols = 80});
  ExpectRoundTrip(ExitMessage{.kind = ExitKind::kSignaled, .code = 9, .message = ""});
  ExpectRoundTrip(ExitMessage{.kind = ExitKind::kFailed, .code = ENOENT, .message = "gone"});
  ExpectRoundTrip(SignalMessage{.signal = 15});
  ExpectRoundTrip(WindowMessage{.bytes = kInitialWindow});
  ExpectRoundTrip(ResizeMessage{.rows = 50, .cols = 132});
  ExpectRoundTrip(FileWriteMessage{.path = "/etc/x", .mode = 0600});
  ExpectRoundTrip(FileWriteMessage{
      .path = "/root/x", .mode = 0644, .metadata = {{"owner", "ada"}, {"k!#$%&'*+-.^_`|~", ""}}});
  ExpectRoundTrip(FileReadMessage{.path = "/etc/x"});
  ExpectRoundTrip(TailFilesMessage{.user = "agent",
                                   .dir = ".claude/projects",
                                   .suffix = ".jsonl",
                                   .depth = 2,
                                   .max_bytes = 1 << 20,
                                   .offsets = {{"a/b.jsonl", 10}, {"c.jsonl", 0}}});
  ExpectRoundTrip(ProtocolErrorMessage{"bad"});
  ExpectRoundTrip(DnsQueryMessage{.name = "pypi.org", .qtype = 1});
  ExpectRoundTrip(
      DnsAnswerMessage{.verdict = DnsVerdict::kAllowed, .ports = {80, 443}, .message = ""});
  ExpectRoundTrip(ConnectMessage{.name = "", .address = std::string(16, '\1'), .port = 22});
  ExpectRoundTrip(OpenPortMessage{.port = 8000});
  ExpectRoundTrip(ResetMessage{.code = 111, .message = "refused"});
  ExpectRoundTrip(
      NetPolicyMessage{.rules = {{.base = std::string("\x0a\0\0\0", 4), .prefix = 8, .ports = {22}},
                                 {.base = "abcd", .prefix = 32}}});
  ExpectRoundTrip(GuestMetrics{.cpu_busy_ticks = 1, .memory_total_bytes = 2, .uptime_ms = 3});
  ExpectRoundTrip(FsRequestMessage{
      .op = FsOp::kMove, .user = "app", .path = "/a", .target = "/b/c", .depth = 0});
  ExpectRoundTrip(FsRequestMessage{.op = FsOp::kList, .path = "/", .depth = kMaxFsDepth});
  ExpectRoundTrip(FsRequestMessage{.op = FsOp::kSetAttributes,
                                   .path = "/v/f",
                                   .attributes = kSetUid | kSetGid | kSetMode,
                                   .uid = 1000,
                                   .gid = 1001,
                                   .mode = 07777});
  ExpectRoundTrip(
      WatchDirMessage{.user = "", .path = "/root", .flags = kWatchRecursive | kWatchIncludeEntry});
}

FsEntry SampleEntry() {
  return FsEntry{.name = "b.txt",
                 .path = "/a/b.txt",
                 .type = FsType::kSymlink,
                 .size = 7,
                 .mode = 0120777,
                 .owner = "root",
                 .group = "staff",
                 .mtime_seconds = 1700000000,
                 .mtime_nanos = 5,
                 .symlink_target = "../c",
                 .uid = 1000,
                 .gid = 50,
                 .atime_seconds = 1700000001,
                 .ctime_seconds = -2,
                 .atime_nanos = 6,
                 .ctime_nanos = 999999999,
                 .metadata = {{"build-id", "42"}, {"owner", "ada"}}};
}

TEST(ChannelMessagesTest, FsEntriesAndWatchRecordsRoundTrip) {
  FsEntry root{.name = "/", .path = "/", .type = FsType::kDirectory};
  std::vector<FsEntry> entries;
  std::string error;
  ASSERT_TRUE(DecodeFsEntries(EncodeFsEntry(SampleEntry()) + EncodeFsEntry(root), &entries, &error))
      << error;
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0], SampleEntry());
  EXPECT_EQ(entries[1], root);
  EXPECT_TRUE(DecodeFsEntries("", &entries, &error));
  EXPECT_TRUE(entries.empty());

  std::vector<WatchRecord> records;
  WatchRecord started{.kind = WatchEventKind::kStarted};
  WatchRecord created{.kind = WatchEventKind::kCreate,
                      .name = "sub/b.txt",
                      .has_entry = true,
                      .entry = SampleEntry()};
  WatchRecord removed{.kind = WatchEventKind::kRemove, .name = "gone"};
  ASSERT_TRUE(DecodeWatchRecords(
      EncodeWatchRecord(started) + EncodeWatchRecord(created) + EncodeWatchRecord(removed),
      &records, &error))
      << error;
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0], started);
  EXPECT_EQ(records[1], created);
  EXPECT_EQ(records[2], removed);
}

// What a hostile guest might put in an answer about files, each refused.
TEST(ChannelMessagesTest, MalformedFsAnswersAreRefused) {
  std::string error;
  std::vector<FsEntry> entries;
  auto refused = [&](FsEntry e) { return !DecodeFsEntries(EncodeFsEntry(e), &entries, &error); };
  FsEntry e = SampleEntry();
  e.name = "a/b";
  EXPECT_TRUE(refused(e));
  e = SampleEntry();
  e.name = "";
  EXPECT_TRUE(refused(e));
  e = SampleEntry();
  e.path = "relative";
  EXPECT_TRUE(refused(e));
  e = SampleEntry();
  e.path = std::string("/a\0b", 4);
  EXPECT_TRUE(refused(e));
  e = SampleEntry();
  e.type = static_cast<FsType>(4);
  EXPECT_TRUE(refused(e));
  e = SampleEntry();
  e.mtime_nanos = 1000000000;
  EXPECT_TRUE(refused(e));
  e = SampleEntry();
  e.ctime_nanos = 1000000000;
  EXPECT_TRUE(refused(e));
  e = SampleEntry();
  e.metadata = {{"a b", "v"}};
  EXPECT_TRUE(refused(e));
  e = SampleEntry();
  e.metadata = {{"k", "\x7f"}};
  EXPECT_TRUE(refused(e));
  e = SampleEntry();
  e.metadata.assign(kMaxFileMetadata + 1, {"k", "v"});
  EXPECT_TRUE(refused(e));
  e = SampleEntry();
  e.owner = std::string(kMaxFsOwnerBytes + 1, 'o');
  EXPECT_TRUE(refused(e));
  std::string whole = EncodeFsEntry(SampleEntry());
  EXPECT_FALSE(DecodeFsEntries(whole.substr(0, whole.size() - 1), &entries, &error));
  std::string many;
  for (uint32_t i = 0; i <= kMaxFsEntries; ++i) many += whole;
  EXPECT_FALSE(DecodeFsEntries(many, &entries, &error));

  std::vector<WatchRecord> records;
  for (const char* name : {"/abs", "a/../b", "", "a//b"}) {
    EXPECT_FALSE(DecodeWatchRecords(
        EncodeWatchRecord(WatchRecord{.kind = WatchEventKind::kWrite, .name = name}), &records,
        &error))
        << name;
  }
  EXPECT_FALSE(DecodeWatchRecords(
      EncodeWatchRecord(WatchRecord{.kind = WatchEventKind::kStarted, .name = "x"}), &records,
      &error));
  EXPECT_FALSE(DecodeWatchRecords(
      EncodeWatchRecord(WatchRecord{.kind = static_cast<WatchEventKind>(6), .name = "x"}), &records,
      &error));
  EXPECT_TRUE(Refused(FsRequestMessage{.op = static_cast<FsOp>(0)}));
  EXPECT_TRUE(Refused(FsRequestMessage{.op = static_cast<FsOp>(7)}));
  EXPECT_TRUE(Refused(FileWriteMessage{.path = "/x", .metadata = {{"", "v"}}}));
  EXPECT_TRUE(Refused(FileWriteMessage{.path = "/x", .metadata = {{"k", "\n"}}}));
  EXPECT_TRUE(Refused(FsRequestMessage{.op = FsOp::kSetAttributes, .attributes = 8}));
  EXPECT_TRUE(Refused(
      FsRequestMessage{.op = FsOp::kSetAttributes, .attributes = kSetMode, .mode = 010000}));
  EXPECT_TRUE(Refused(FsRequestMessage{.op = FsOp::kList, .depth = kMaxFsDepth + 1}));
  EXPECT_TRUE(Refused(WatchDirMessage{.path = "/", .flags = 4}));
}

TEST(ChannelMessagesTest, VolumesMountOnlyWhereNothingOfTheSystemIs) {
  for (const char* ok : {"/data", "/mnt/data", "/var/cache/apt", "/root/.cache/pip",
                         "/home/user/models", "/opt/tools/x", "/srv/a b"}) {
    EXPECT_TRUE(IsVolumeMountPoint(ok)) << ok;
  }
  for (const char* bad :
       {"",      "/",         "data",     "/data/",       "/a//b", "/a/../b",    "/a/./b",
        "/proc", "/proc/sys", "/dev/shm", "/run/airlock", "/sys",  "/workspace", "/workspace/x",
        "/etc",  "/usr",      "/var",     "/home",        "/root", "/tmp",       "/lib64",
        "/a\nb"}) {
    EXPECT_FALSE(IsVolumeMountPoint(bad)) << bad;
  }
  EXPECT_FALSE(IsVolumeMountPoint("/" + std::string(255, 'a')));
}

// What no peer may send, each refused by the decoder (so neither side ever acts on it).
TEST(ChannelMessagesTest, FieldsOutsideTheProtocolsCapsAreRefused) {
  EXPECT_TRUE(Refused(SyncMessage{.nanoseconds = 1000000000}));
  EXPECT_TRUE(Refused(SyncMessage{.entropy = std::string(kMaxSyncEntropy + 1, 'e')}));
  EXPECT_TRUE(Refused(SyncMessage{.hostname = std::string(kMaxHostnameBytes + 1, 'h')}));
  EXPECT_TRUE(Refused(SyncMessage{.volumes = {{.slot = kVolumeSlots, .path = "/data"}}}));
  EXPECT_TRUE(
      Refused(SyncMessage{.volumes = {{.slot = 1, .path = "/a"}, {.slot = 1, .path = "/b"}}}));
  EXPECT_TRUE(Refused(SyncMessage{.volumes = {{.slot = 0, .flags = 2, .path = "/data"}}}));
  EXPECT_TRUE(Refused(SyncMessage{.volumes = {{.slot = 0, .path = "/proc/x"}}}));
  EXPECT_TRUE(Refused(ReadyMessage{.highest_stream = 1u << 31}));
  EXPECT_TRUE(Refused(ReadyMessage{.highest_guest_stream = 3}));  // guest ids are even
  EXPECT_TRUE(Refused(ExecStartMessage{}));                       // no argv
  EXPECT_TRUE(Refused(ExecStartMessage{.argv = {"sh"}, .flags = kExecFlagTty, .rows = 0}));
  // A detached command has neither a terminal nor input.
  EXPECT_TRUE(Refused(ExecStartMessage{
      .argv = {"sh"}, .flags = kExecFlagDetach | kExecFlagTty, .rows = 24, .cols = 80}));
  EXPECT_TRUE(Refused(ExecStartMessage{.argv = {"sh"}, .flags = kExecFlagDetach | kExecFlagStdin}));
  EXPECT_TRUE(
      Refused(ExecStartMessage{.argv = {"sh"}, .flags = kExecFlagTty, .rows = 1, .cols = 10001}));
  EXPECT_TRUE(Refused(ExitMessage{.kind = ExitKind::kExited, .code = 256}));
  EXPECT_TRUE(Refused(ExitMessage{.kind = ExitKind::kExited, .code = -1}));
  EXPECT_TRUE(Refused(ExitMessage{.kind = ExitKind::kSignaled, .code = 0}));
  EXPECT_TRUE(Refused(ExitMessage{.kind = ExitKind::kSignaled, .code = kMaxSignal + 1}));
  EXPECT_TRUE(Refused(ExitMessage{.kind = ExitKind::kFailed, .code = 4096}));
  EXPECT_TRUE(Refused(ExitMessage{.kind = static_cast<ExitKind>(4)}));
  EXPECT_TRUE(Refused(SignalMessage{.signal = 0}));
  EXPECT_TRUE(Refused(SignalMessage{.signal = kMaxSignal + 1}));
  EXPECT_TRUE(Refused(ResizeMessage{.rows = 0, .cols = 80}));
  EXPECT_TRUE(Refused(TailFilesMessage{.depth = kMaxTailDepth + 1}));
  EXPECT_TRUE(Refused(TailFilesMessage{.max_bytes = kMaxTailBytes + 1}));
  EXPECT_TRUE(Refused(TailFilesMessage{.suffix = std::string(kMaxTailSuffixBytes + 1, 's')}));
  TailFilesMessage many;
  for (uint32_t i = 0; i <= kMaxTailFiles; ++i) many.offsets.emplace_back("f", i);
  EXPECT_TRUE(Refused(many));
  EXPECT_TRUE(Refused(DnsQueryMessage{.name = ""}));
  EXPECT_TRUE(Refused(DnsQueryMessage{.name = std::string(kMaxDnsNameBytes + 1, 'a')}));
  EXPECT_TRUE(Refused(DnsAnswerMessage{.verdict = static_cast<DnsVerdict>(4)}));
  EXPECT_TRUE(Refused(DnsAnswerMessage{.verdict = DnsVerdict::kAllowed, .ports = {0}}));
  EXPECT_TRUE(Refused(ConnectMessage{.address = "abc", .port = 80}));
  EXPECT_TRUE(Refused(ConnectMessage{.address = "abcd", .port = 0}));
  EXPECT_TRUE(Refused(ConnectMessage{.address = "abcd", .port = 65536}));
  EXPECT_TRUE(Refused(OpenPortMessage{.port = 0}));
  EXPECT_TRUE(Refused(OpenPortMessage{.port = 70000}));
  EXPECT_TRUE(Refused(NetPolicyMessage{.rules = {{.base = "abc", .prefix = 8}}}));
  EXPECT_TRUE(Refused(NetPolicyMessage{.rules = {{.base = "abcd", .prefix = 33}}}));
  EXPECT_TRUE(Refused(NetPolicyMessage{.rules = {{.base = "abcd", .prefix = 8, .ports = {0}}}}));
}

// A peer's list count is checked before it sizes anything, and ports beyond kMaxRulePorts are
// refused on the wire (the encoder never writes them).
TEST(ChannelMessagesTest, ListsAreCappedBeforeTheyAreRead) {
  std::string ports = PayloadWriter().U32(0).U32(kMaxRulePorts + 1).bytes();
  for (uint32_t i = 0; i <= kMaxRulePorts; ++i) ports += PayloadWriter().U32(80).bytes();
  DnsAnswerMessage answer;
  EXPECT_FALSE(DecodePayload(ports + PayloadWriter().Str("").bytes(), &answer));
  NetPolicyMessage policy;
  EXPECT_FALSE(DecodePayload(PayloadWriter().U32(kMaxListItems + 1).bytes(), &policy));
  DnsAnswerMessage many{.verdict = DnsVerdict::kAllowed,
                        .ports = std::vector<uint16_t>(kMaxRulePorts + 5, 443)};
  ASSERT_TRUE(DecodePayload(EncodePayload(many), &answer));
  EXPECT_EQ(answer.ports.size(), kMaxRulePorts);
}

// Free text is cut to its cap when encoded, so a long reason never breaks the channel.
TEST(ChannelMessagesTest, FreeTextIsCutToItsCap) {
  std::string long_text(10000, 'r');
  ResetMessage reset;
  ASSERT_TRUE(DecodePayload(EncodePayload(ResetMessage{.code = 1, .message = long_text}), &reset));
  EXPECT_EQ(reset.message.size(), kMaxReasonBytes);
  ExitMessage exit;
  ASSERT_TRUE(DecodePayload(
      EncodePayload(ExitMessage{.kind = ExitKind::kFailed, .code = 5, .message = long_text}),
      &exit));
  EXPECT_EQ(exit.message.size(), kMaxExitMessageBytes);
  ReadyMessage ready;
  ASSERT_TRUE(DecodePayload(EncodePayload(ReadyMessage{.problem = long_text}), &ready));
  EXPECT_EQ(ready.problem.size(), kMaxReasonBytes);
}

TEST(ChannelMessagesTest, AMessageFrameCarriesItsType) {
  std::string bytes = EncodeMessageFrame(5, WindowMessage{.bytes = 9});
  std::span<const uint8_t> input(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  FrameParser parser;
  Frame frame;
  ASSERT_EQ(parser.Next(&input, &frame), FrameParser::Result::kFrame);
  EXPECT_EQ(frame.type, FrameType::kWindow);
  EXPECT_EQ(frame.stream, 5u);
  WindowMessage window;
  ASSERT_TRUE(DecodePayload(frame.payload, &window));
  EXPECT_EQ(window.bytes, 9u);
}

}  // namespace
}  // namespace airlock

namespace airlock {
namespace {

TEST(ChannelMessagesTest, ActivityRecordsRoundTripWithTheGuestsBytesAsTheyAre) {
  ActivityRecord start{.kind = ActivityKind::kProcessStart,
                       .unix_ms = 1700000000123,
                       .exec_id = 12,
                       .pid = 301,
                       .parent = 300,
                       .process = "python3",
                       .path = "/usr/bin/python3.11",
                       .argv = {"python3", "-c", "print(1)"}};
  ActivityRecord write{.kind = ActivityKind::kWrite,
                       .pid = 301,
                       .process = "python3",
                       .path = std::string("/workspace/a\x1b[31m\nb\xff", 18)};
  ActivityRecord rename{
      .kind = ActivityKind::kRename, .pid = 9, .path = "/root/x", .target = "/root/y"};
  ActivityRecord exit{.kind = ActivityKind::kProcessExit, .pid = 301, .code = -9};
  ActivityRecord lost{.kind = ActivityKind::kLost, .code = 5, .path = "the queue overflowed"};
  std::vector<ActivityRecord> records;
  std::string error;
  ASSERT_TRUE(DecodeActivityRecords(EncodeActivityRecord(start) + EncodeActivityRecord(write) +
                                        EncodeActivityRecord(rename) + EncodeActivityRecord(exit) +
                                        EncodeActivityRecord(lost),
                                    &records, &error))
      << error;
  EXPECT_EQ(records, (std::vector<ActivityRecord>{start, write, rename, exit, lost}));
  ExecStartMessage exec{.argv = {"true"}, .exec_id = 77};
  ExecStartMessage decoded;
  ASSERT_TRUE(DecodePayload(EncodePayload(exec), &decoded));
  EXPECT_EQ(decoded.exec_id, 77u);
}

TEST(ChannelMessagesTest, ActivityRecordsOutsideTheirShapeAreRefused) {
  std::vector<ActivityRecord> records;
  std::string error;
  auto refused = [&](const ActivityRecord& r) {
    return !DecodeActivityRecords(EncodeActivityRecord(r), &records, &error);
  };
  EXPECT_TRUE(refused({.kind = static_cast<ActivityKind>(kMaxActivityKind + 1), .path = "/x"}));
  EXPECT_TRUE(refused({.kind = ActivityKind::kWrite, .path = "relative"}));
  EXPECT_TRUE(refused({.kind = ActivityKind::kWrite, .path = ""}));
  EXPECT_TRUE(
      refused({.kind = ActivityKind::kWrite, .path = "/" + std::string(kMaxFsPathBytes, 'a')}));
  EXPECT_TRUE(refused({.kind = ActivityKind::kWrite, .path = "/x", .target = "/y"}));
  EXPECT_TRUE(refused({.kind = ActivityKind::kRename, .path = "/x", .target = "y"}));
  EXPECT_TRUE(refused({.kind = ActivityKind::kProcessExit, .path = "/x"}));
  EXPECT_TRUE(refused({.kind = ActivityKind::kLost, .path = ""}));
  EXPECT_TRUE(refused({.kind = ActivityKind::kWrite, .path = "/x", .argv = {"a"}}));
  EXPECT_TRUE(
      refused({.kind = ActivityKind::kRead, .process = std::string(17, 'p'), .path = "/x"}));
  EXPECT_TRUE(refused({.kind = ActivityKind::kProcessStart,
                       .argv = std::vector<std::string>(kMaxActivityArgs + 1, "a")}));
  EXPECT_TRUE(refused({.kind = ActivityKind::kProcessStart,
                       .argv = {std::string(kMaxActivityArgvBytes + 1, 'a')}}));
  // A program gone before it could be read has no path.
  EXPECT_FALSE(refused({.kind = ActivityKind::kProcessStart, .path = ""}));
  std::string cut = EncodeActivityRecord({.kind = ActivityKind::kRead, .path = "/x"});
  EXPECT_FALSE(DecodeActivityRecords(cut.substr(0, cut.size() - 1), &records, &error));
}

TEST(ChannelMessagesTest, AgentStoreRequestsAndAnswersRoundTripAndOddOnesAreRefused) {
  AgentStoreMessage request{.store = static_cast<uint32_t>(AgentStore::kOpenCode),
                            .user = "dev",
                            .path = ".local/share/opencode/opencode.db",
                            .after_ms = 100,
                            .after_id = "prt_b",
                            .max_rows = 2,
                            .max_bytes = kMaxStoreRowBytes};
  AgentStoreMessage decoded;
  ASSERT_TRUE(DecodePayload(EncodePayload(request), &decoded));
  EXPECT_EQ(decoded, request);
  for (auto bad : {AgentStoreMessage{.store = 2, .path = "a", .max_bytes = kMaxStoreRowBytes},
                   AgentStoreMessage{.store = 1, .path = "../a", .max_bytes = kMaxStoreRowBytes},
                   AgentStoreMessage{.store = 1, .path = "a", .max_bytes = 1},
                   AgentStoreMessage{.store = 1,
                   .path = "a",
                   .max_rows = kMaxStoreRows + 1,
                   .max_bytes = kMaxStoreRowBytes}}) {
    EXPECT_FALSE(DecodePayload(EncodePayload(bad), &decoded)) << bad.path;
  }

  auto row = [](std::string id, int64_t ms, std::string data) {
    StoreRow r{.id = std::move(id), .message_id = "m", .role = "user", .updated_ms = ms};
    r.data_size = data.size();
    r.data = std::move(data);
    return r;
  };
  std::vector<StoreRow> rows = {row("prt_c", 100, "{}"), row("prt_a", 101, "")};
  rows[1].data_size = kMaxStoreRowBytes + 1;  // too large: sent without its data
  int number = -1;
  std::string what, error;
  std::vector<StoreRow> out;
  ASSERT_TRUE(
      DecodeStoreAnswer(EncodeStoreAnswer(0, "", rows), request, &number, &what, &out, &error))
      << error;
  EXPECT_EQ(number, 0);
  EXPECT_EQ(out, rows);
  ASSERT_TRUE(DecodeStoreAnswer(EncodeStoreAnswer(ENOENT, "no store", {}), request, &number, &what,
                                &out, &error));
  EXPECT_EQ(number, ENOENT);
  EXPECT_EQ(what, "no store");

  auto refused = [&](const std::string& answer) {
    return !DecodeStoreAnswer(answer, request, &number, &what, &out, &error);
  };
  EXPECT_TRUE(refused(EncodeStoreAnswer(0, "", {row("prt_a", 100, "{}")})));  // not after
  EXPECT_TRUE(refused(EncodeStoreAnswer(0, "", {row("x", 200, "{}"), row("w", 200, "{}")})));
  EXPECT_TRUE(refused(EncodeStoreAnswer(
      0, "", {row("x", 200, ""), row("y", 201, ""), row("z", 202, "")})));  // more than asked
  EXPECT_TRUE(refused(EncodeStoreAnswer(0, "", {row("", 200, "{}")})));
  StoreRow part = row("x", 200, "{}");
  part.data_size = 3;
  EXPECT_TRUE(refused(EncodeStoreAnswer(0, "", {part})));
  EXPECT_TRUE(refused(EncodeStoreAnswer(5000, "", {})));
  EXPECT_TRUE(refused(EncodeStoreAnswer(EIO, "", {row("x", 200, "{}")})));
  std::string cut = EncodeStoreAnswer(0, "", {row("x", 200, "{}")});
  EXPECT_TRUE(refused(cut.substr(0, cut.size() - 1)));
}

}  // namespace
}  // namespace airlock
