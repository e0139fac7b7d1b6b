#include "src/common/channel_frame.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(ChannelFrameTest, RoundTripsWholeAndBytewise) {
  std::string wire =
      EncodeFrame(FrameType::kStdout, 7, "hello") +
      EncodeFrame(FrameType::kExit, 7, PayloadWriter().U32(0).I32(3).Str("").bytes());
  FrameParser whole;
  std::span<const uint8_t> in = Bytes(wire);
  Frame f;
  ASSERT_EQ(whole.Next(&in, &f), FrameParser::Result::kFrame);
  EXPECT_EQ(f.type, FrameType::kStdout);
  EXPECT_EQ(f.stream, 7u);
  EXPECT_EQ(f.payload, "hello");
  ASSERT_EQ(whole.Next(&in, &f), FrameParser::Result::kFrame);
  EXPECT_EQ(f.type, FrameType::kExit);
  EXPECT_EQ(whole.Next(&in, &f), FrameParser::Result::kNeedMore);

  FrameParser bytewise;
  int frames = 0;
  for (char c : wire) {
    std::string one(1, c);
    std::span<const uint8_t> b = Bytes(one);
    while (bytewise.Next(&b, &f) == FrameParser::Result::kFrame) ++frames;
    EXPECT_TRUE(b.empty());
  }
  EXPECT_EQ(frames, 2);
}

TEST(ChannelFrameTest, RejectsOversizedFrameBeforeReadingIt) {
  std::string header = EncodeFrame(FrameType::kStdout, 1, "");
  header[8] = 0;
  header[9] = 0;
  header[10] = 0x10;  // 1 MiB
  FrameParser parser;
  std::span<const uint8_t> in = Bytes(header);
  Frame f;
  EXPECT_EQ(parser.Next(&in, &f), FrameParser::Result::kError);
  EXPECT_NE(parser.error().find("exceeds"), std::string::npos);
  // Sticky: even a good frame afterwards is refused.
  std::string good = EncodeFrame(FrameType::kReady, 0, "");
  in = Bytes(good);
  EXPECT_EQ(parser.Next(&in, &f), FrameParser::Result::kError);
}

TEST(ChannelFrameTest, RejectsBadVersionTypeAndReservedBits) {
  for (int byte : {0, 1, 2}) {
    std::string wire = EncodeFrame(FrameType::kReady, 0, "");
    wire[byte] = byte == 0   ? static_cast<char>(kProtocolVersion + 1)
                 : byte == 1 ? static_cast<char>(kMaxFrameType + 1)
                             : 9;
    FrameParser parser;
    std::span<const uint8_t> in = Bytes(wire);
    Frame f;
    EXPECT_EQ(parser.Next(&in, &f), FrameParser::Result::kError) << "byte " << byte;
  }
}

TEST(ChannelFrameTest, AHelloIsFoundInTheMiddleOfAStream) {
  std::string hello = EncodeFrame(FrameType::kHello, 0, EncodeHello("v1"));
  std::string before = EncodeFrame(FrameType::kStdout, 3, "abc").substr(2);
  EXPECT_EQ(FindHelloFrame(before + hello + "trailing"), before.size());
  EXPECT_EQ(FindHelloFrame(hello.substr(0, kFrameHeaderSize + sizeof(kHelloMagic))), 0u);
  EXPECT_EQ(FindHelloFrame(before), std::string_view::npos);
  // The magic alone (in some stdout) is not a hello: the header before it must be one.
  std::string in_output =
      EncodeFrame(FrameType::kStdout, 3, std::string(kHelloMagic, sizeof(kHelloMagic)));
  EXPECT_EQ(FindHelloFrame(in_output), std::string_view::npos);
  uint32_t version;
  std::string agent;
  ASSERT_TRUE(DecodeHello(EncodeHello("v1"), &version, &agent));
  EXPECT_EQ(version, kProtocolVersion);
  EXPECT_EQ(agent, "v1");
  EXPECT_FALSE(
      DecodeHello(PayloadWriter().U32(kProtocolVersion).Str("v1").bytes(), &version, &agent));
}

TEST(ChannelFrameTest, PayloadReaderEnforcesBounds) {
  std::string payload = PayloadWriter().StrList({"a", "bc"}).U64(42).bytes();
  PayloadReader r(payload);
  std::vector<std::string> list;
  uint64_t v;
  ASSERT_TRUE(r.StrList(&list));
  ASSERT_TRUE(r.U64(&v));
  EXPECT_TRUE(r.AtEnd());
  EXPECT_EQ(list, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(v, 42u);

  // A string claiming more bytes than remain.
  std::string lying = PayloadWriter().U32(1000).bytes() + "abc";
  PayloadReader r2(lying);
  std::string s;
  EXPECT_FALSE(r2.Str(&s));
  EXPECT_FALSE(r2.ok());
  // A list claiming more items than the cap.
  std::string many = PayloadWriter().U32(kMaxListItems + 1).bytes();
  PayloadReader r3(many);
  EXPECT_FALSE(r3.StrList(&list));
  // Trailing bytes are not AtEnd.
  std::string extra = PayloadWriter().U32(1).U32(2).bytes();
  PayloadReader r4(extra);
  uint32_t u;
  EXPECT_TRUE(r4.U32(&u));
  EXPECT_FALSE(r4.AtEnd());
}

}  // namespace
}  // namespace airlock
