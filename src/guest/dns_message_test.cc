// Real queries (captured from dig 9.18 and glibc 2.36's resolver), the replies built to them,
// and hostile packets.
#include "src/guest/dns_message.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/common/hex.h"

namespace airlock::guest {
namespace {

// Captured with a UDP listener on 127.0.0.1: `dig @127.0.0.1 -p 5353 pypi.org A` (EDNS with a
// cookie option; dig also sets AD), the same with +noedns, `Files.PythonHosted.ORG AAAA
// +nocookie`, `github.com HTTPS +bufsize=4096`, `. NS +noedns`; and Python's
// socket.getaddrinfo("pypi.org") through glibc, with and without `options edns0` (A and AAAA).
constexpr char kDigAEdns[] =
    "05f0012000010000000000010470797069036f7267000001000100002904d000000000000c000a0008c0bc71a8"
    "a1742a54";
constexpr char kDigANoEdns[] = "0386012000010000000000000470797069036f72670000010001";
constexpr char kDigAaaaUpper[] =
    "a8c1012000010000000000010546696c65730c507974686f6e486f73746564034f524700001c00010000290"
    "4d0000000000000";
constexpr char kDigHttps[] =
    "b08c012000010000000000010667697468756203636f6d0000410001000029100000000000000c000a000870e7"
    "833bf2c68a16";
constexpr char kDigRoot[] = "18ac012000010000000000000000020001";
constexpr char kGlibcAEdns[] =
    "a373010000010000000000010470797069036f7267000001000100002904b0000000000000";
constexpr char kGlibcAaaaEdns[] =
    "8f6e010000010000000000010470797069036f726700001c000100002904b0000000000000";
constexpr char kGlibcA[] = "8ddb010000010000000000000470797069036f72670000010001";
constexpr char kGlibcAaaa[] = "1adf010000010000000000000470797069036f726700001c0001";

const char* const kAllCaptured[] = {kDigAEdns,   kDigANoEdns,    kDigAaaaUpper, kDigHttps, kDigRoot,
                                    kGlibcAEdns, kGlibcAaaaEdns, kGlibcA,       kGlibcAaaa};

std::string FromHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

std::string ToHex(std::string_view bytes) {
  return HexString(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

std::string U16(uint16_t v) { return {static_cast<char>(v >> 8), static_cast<char>(v & 0xff)}; }

// A query with the given header fields and body (question and records, as wire bytes).
std::string Packet(uint16_t flags, uint16_t qd, uint16_t an, uint16_t ns, uint16_t ar,
                   const std::string& body) {
  return U16(0x1234) + U16(flags) + U16(qd) + U16(an) + U16(ns) + U16(ar) + body;
}

// The wire form of a name made of the given labels.
std::string Wire(const std::vector<std::string>& labels) {
  std::string out;
  for (const std::string& label : labels) out += static_cast<char>(label.size()) + label;
  return out + std::string(1, '\0');
}

// A plain query: RD set, one question of type qtype, class IN.
std::string Query(const std::string& name_wire, uint16_t qtype = kDnsTypeA) {
  return Packet(0x0100, 1, 0, 0, 0, name_wire + U16(qtype) + U16(kDnsClassIn));
}

// An OPT record advertising udp_size, with the given TTL (extended rcode, version, flags).
std::string Opt(uint16_t udp_size, uint32_t ttl = 0, const std::string& options = "") {
  return std::string(1, '\0') + U16(kDnsTypeOpt) + U16(udp_size) + U16(ttl >> 16) +
         U16(ttl & 0xffff) + U16(static_cast<uint16_t>(options.size())) + options;
}

std::string QueryWithOpt(const std::string& name_wire, uint16_t udp_size, uint32_t ttl = 0) {
  return Packet(0x0100, 1, 0, 0, 1,
                name_wire + U16(kDnsTypeA) + U16(kDnsClassIn) + Opt(udp_size, ttl));
}

DnsQuestion Parse(const std::string& packet) {
  DnsQuestion q;
  std::string error;
  EXPECT_EQ(ParseDnsQuery(packet, &q, &error), DnsParse::kOk) << error;
  return q;
}

// Parses a packet that must be refused and returns the reason.
std::string Refuse(const std::string& packet, DnsParse expected = DnsParse::kMalformed) {
  DnsQuestion q;
  std::string error;
  EXPECT_EQ(ParseDnsQuery(packet, &q, &error), expected) << ToHex(packet);
  EXPECT_FALSE(error.empty());
  return error;
}

DnsMessage Decode(const std::string& reply) {
  DnsMessage message;
  std::string error;
  EXPECT_TRUE(ParseDnsMessage(reply, &message, &error)) << error << ": " << ToHex(reply);
  return message;
}

std::vector<std::array<uint8_t, 4>> Addresses(int n) {
  std::vector<std::array<uint8_t, 4>> out;
  for (int i = 0; i < n; ++i) {
    out.push_back({198, 18, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i)});
  }
  return out;
}

TEST(DnsMessageTest, ParsesDigQueryWithEdnsAndCookie) {
  DnsQuestion q = Parse(FromHex(kDigAEdns));
  EXPECT_EQ(q.id, 0x05f0);
  EXPECT_TRUE(q.recursion_desired);
  EXPECT_EQ(q.name, "pypi.org");
  EXPECT_EQ(q.name_as_sent, "pypi.org");
  EXPECT_EQ(q.qtype, kDnsTypeA);
  EXPECT_EQ(q.qclass, kDnsClassIn);
  EXPECT_TRUE(q.has_edns);
  EXPECT_EQ(q.edns_udp_size, 1232);
  EXPECT_EQ(q.edns_version, 0);
}

TEST(DnsMessageTest, ParsesQueriesWithoutEdns) {
  for (const char* hex : {kDigANoEdns, kGlibcA, kGlibcAaaa}) {
    DnsQuestion q = Parse(FromHex(hex));
    EXPECT_EQ(q.name, "pypi.org");
    EXPECT_FALSE(q.has_edns);
    EXPECT_TRUE(q.recursion_desired);
  }
  EXPECT_EQ(Parse(FromHex(kGlibcA)).qtype, kDnsTypeA);
  EXPECT_EQ(Parse(FromHex(kGlibcAaaa)).qtype, kDnsTypeAaaa);
}

TEST(DnsMessageTest, ParsesGlibcEdnsQueries) {
  DnsQuestion a = Parse(FromHex(kGlibcAEdns));
  DnsQuestion aaaa = Parse(FromHex(kGlibcAaaaEdns));
  EXPECT_EQ(a.id, 0xa373);
  EXPECT_EQ(a.qtype, kDnsTypeA);
  EXPECT_EQ(aaaa.qtype, kDnsTypeAaaa);
  EXPECT_TRUE(a.has_edns);
  EXPECT_EQ(a.edns_udp_size, 1200);
}

TEST(DnsMessageTest, ParsesHttpsQueryAndRootName) {
  DnsQuestion https = Parse(FromHex(kDigHttps));
  EXPECT_EQ(https.name, "github.com");
  EXPECT_EQ(https.qtype, 65);
  EXPECT_EQ(https.edns_udp_size, 4096);

  DnsQuestion root = Parse(FromHex(kDigRoot));
  EXPECT_EQ(root.name, "");
  EXPECT_EQ(root.qtype, 2);
  std::string reply = BuildDnsResponse(root, DnsRcode::kNoError, {}, 5, 5);
  DnsMessage m = Decode(reply);
  ASSERT_EQ(m.questions.size(), 1u);
  EXPECT_EQ(m.questions[0].name, "");
  ASSERT_EQ(m.authority.size(), 1u);
  EXPECT_EQ(m.authority[0].name, "");  // the root's SOA
}

TEST(DnsMessageTest, FoldsUpperCaseButEchoesTheCaseSent) {
  DnsQuestion q = Parse(FromHex(kDigAaaaUpper));
  EXPECT_EQ(q.name, "files.pythonhosted.org");
  EXPECT_EQ(q.name_as_sent, "Files.PythonHosted.ORG");
  EXPECT_EQ(q.qtype, kDnsTypeAaaa);
  DnsMessage m = Decode(BuildDnsResponse(q, DnsRcode::kNoError, {}, 5, 7));
  ASSERT_EQ(m.questions.size(), 1u);
  EXPECT_EQ(m.questions[0].name, "Files.PythonHosted.ORG");
  EXPECT_EQ(m.questions[0].qtype, kDnsTypeAaaa);

  // A caller that rewrote the name gets its own name echoed, not the stale one.
  q.name = "other.example";
  EXPECT_EQ(Decode(BuildDnsResponse(q, DnsRcode::kNoError, {}, 5, 7)).questions[0].name,
            "other.example");
}

TEST(DnsMessageTest, FoldsOnlyAsciiAndKeepsOtherBytes) {
  DnsQuestion q = Parse(Query(Wire({"Caf\xC3\x89", "Ex ample"})));
  EXPECT_EQ(q.name, "caf\xC3\x89.ex ample");
}

TEST(DnsMessageTest, AnswersAByteForByte) {
  DnsQuestion q = Parse(FromHex(kGlibcA));
  std::string reply = BuildDnsResponse(q, DnsRcode::kNoError, {{198, 18, 0, 5}}, 5, 1);
  EXPECT_EQ(ToHex(reply),
            "8ddb81800001000100000000"            // id, QR RD RA, 1 question, 1 answer
            "0470797069036f72670000010001"        // pypi.org A IN
            "c00c00010001000000050004c6120005");  // -> question's name, A IN, TTL 5, 198.18.0.5
}

TEST(DnsMessageTest, AnswersAForDigWithOpt) {
  DnsQuestion q = Parse(FromHex(kDigAEdns));
  std::string reply =
      BuildDnsResponse(q, DnsRcode::kNoError, {{198, 18, 0, 5}, {198, 18, 0, 6}}, 30, 5);
  DnsMessage m = Decode(reply);
  EXPECT_EQ(m.id, 0x05f0);
  EXPECT_EQ(m.flags, kDnsFlagQr | kDnsFlagRd | kDnsFlagRa);  // AA, TC, AD clear; NOERROR
  ASSERT_EQ(m.questions.size(), 1u);
  EXPECT_EQ(m.questions[0].name, "pypi.org");
  EXPECT_EQ(m.questions[0].qtype, kDnsTypeA);
  ASSERT_EQ(m.answers.size(), 2u);
  EXPECT_EQ(m.answers[0].name, "pypi.org");
  EXPECT_EQ(m.answers[0].type, kDnsTypeA);
  EXPECT_EQ(m.answers[0].rclass, kDnsClassIn);
  EXPECT_EQ(m.answers[0].ttl, 30u);
  EXPECT_EQ(m.answers[0].rdata, std::string("\xC6\x12\x00\x05", 4));
  EXPECT_EQ(m.answers[1].rdata, std::string("\xC6\x12\x00\x06", 4));
  EXPECT_TRUE(m.authority.empty());
  ASSERT_EQ(m.additional.size(), 1u);
  EXPECT_EQ(m.additional[0].name, "");
  EXPECT_EQ(m.additional[0].type, kDnsTypeOpt);
  EXPECT_EQ(m.additional[0].rclass, kDnsMaxUdpWithEdns);
  EXPECT_EQ(m.additional[0].ttl, 0u);
  EXPECT_EQ(m.additional[0].rdata, "");
}

TEST(DnsMessageTest, RecursionDesiredIsCopied) {
  std::string query = Query(Wire({"pypi", "org"}));
  query[2] = 0;  // RD clear
  DnsQuestion q = Parse(query);
  EXPECT_FALSE(q.recursion_desired);
  EXPECT_EQ(Decode(BuildDnsResponse(q, DnsRcode::kNoError, {}, 5, 5)).flags,
            kDnsFlagQr | kDnsFlagRa);
}

// The SOA's RDATA as the builder writes it, with MINIMUM = minimum.
std::string SoaRdata(uint32_t minimum) {
  return Wire({"ns", "airlock", "internal"}) + Wire({"hostmaster", "airlock", "internal"}) +
         FromHex(
             "00000001"
             "00000e10"
             "00000258"
             "00015180") +
         U16(minimum >> 16) + U16(minimum & 0xffff);
}

TEST(DnsMessageTest, NxDomainCarriesSoaOfTheParentZone) {
  DnsQuestion q = Parse(FromHex(kGlibcAEdns));
  // Addresses given with an error rcode are not answers.
  std::string reply = BuildDnsResponse(q, DnsRcode::kNxDomain, Addresses(2), 30, 7);
  DnsMessage m = Decode(reply);
  EXPECT_EQ(DnsHeaderRcode(m.flags), 3);
  EXPECT_EQ(m.flags & kDnsFlagAa, 0);
  EXPECT_TRUE(m.answers.empty());
  ASSERT_EQ(m.authority.size(), 1u);
  EXPECT_EQ(m.authority[0].name, "org");
  EXPECT_EQ(m.authority[0].type, kDnsTypeSoa);
  EXPECT_EQ(m.authority[0].rclass, kDnsClassIn);
  EXPECT_EQ(m.authority[0].ttl, 7u);
  EXPECT_EQ(m.authority[0].rdata, SoaRdata(7));
  ASSERT_EQ(m.additional.size(), 1u);
  EXPECT_EQ(m.additional[0].type, kDnsTypeOpt);
}

TEST(DnsMessageTest, NoDataForOtherTypesCarriesSoa) {
  for (const char* hex : {kGlibcAaaa, kDigHttps}) {
    DnsQuestion q = Parse(FromHex(hex));
    DnsMessage m = Decode(BuildDnsResponse(q, DnsRcode::kNoError, {}, 30, 2));
    EXPECT_EQ(DnsHeaderRcode(m.flags), 0);
    EXPECT_TRUE(m.answers.empty());
    ASSERT_EQ(m.authority.size(), 1u);
    EXPECT_EQ(m.authority[0].type, kDnsTypeSoa);
    EXPECT_EQ(m.authority[0].rdata, SoaRdata(2));
  }
  // A single label's parent is the root.
  DnsQuestion q = Parse(Query(Wire({"localhost"}), kDnsTypeAaaa));
  DnsMessage m = Decode(BuildDnsResponse(q, DnsRcode::kNoError, {}, 30, 2));
  ASSERT_EQ(m.authority.size(), 1u);
  EXPECT_EQ(m.authority[0].name, "");
}

TEST(DnsMessageTest, OtherRcodesCarryOnlyTheQuestion) {
  DnsQuestion q = Parse(FromHex(kGlibcA));
  for (DnsRcode rcode : {DnsRcode::kServFail, DnsRcode::kRefused, DnsRcode::kNotImp}) {
    DnsMessage m = Decode(BuildDnsResponse(q, rcode, Addresses(1), 30, 2));
    EXPECT_EQ(DnsHeaderRcode(m.flags), static_cast<int>(rcode));
    EXPECT_EQ(m.questions.size(), 1u);
    EXPECT_TRUE(m.answers.empty());
    EXPECT_TRUE(m.authority.empty());
    EXPECT_TRUE(m.additional.empty());
  }
}

TEST(DnsMessageTest, TtlsAreClampedToThirtyOneBits) {
  DnsQuestion q = Parse(FromHex(kGlibcA));
  EXPECT_EQ(
      Decode(BuildDnsResponse(q, DnsRcode::kNoError, Addresses(1), 0xffffffff, 1)).answers[0].ttl,
      0x7fffffffu);
  EXPECT_EQ(Decode(BuildDnsResponse(q, DnsRcode::kNxDomain, {}, 1, 0x80000000)).authority[0].ttl,
            0x7fffffffu);
}

// How many A records fit with the question pypi.org (14 bytes) and an OPT or none.
size_t Fit(size_t limit, bool opt) { return (limit - 12 - 14 - (opt ? 11 : 0)) / 16; }

TEST(DnsMessageTest, ManyAddressesTruncateWithTc) {
  const auto many = Addresses(200);
  struct Case {
    const char* what;
    std::string query;
    size_t limit;
  } cases[] = {
      {"no EDNS", FromHex(kGlibcA), 512},
      {"EDNS 1200", FromHex(kGlibcAEdns), 1200},
      {"EDNS 4096 is capped", QueryWithOpt(Wire({"pypi", "org"}), 4096), 1232},
      {"EDNS under 512 means 512", QueryWithOpt(Wire({"pypi", "org"}), 100), 512},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    DnsQuestion q = Parse(c.query);
    std::string reply = BuildDnsResponse(q, DnsRcode::kNoError, many, 30, 5);
    EXPECT_LE(reply.size(), c.limit);
    DnsMessage m = Decode(reply);
    EXPECT_NE(m.flags & kDnsFlagTc, 0);
    EXPECT_EQ(m.answers.size(), Fit(c.limit, q.has_edns));
    EXPECT_TRUE(m.authority.empty());  // a truncated answer is not NODATA
    EXPECT_EQ(m.additional.size(), q.has_edns ? 1u : 0u);
    EXPECT_EQ(m.answers.back().rdata,
              std::string("\xC6\x12\x00", 3) + static_cast<char>(m.answers.size() - 1));

    // Exactly as many as fit: no TC.
    reply = BuildDnsResponse(q, DnsRcode::kNoError, Addresses(Fit(c.limit, q.has_edns)), 30, 5);
    EXPECT_LE(reply.size(), c.limit);
    EXPECT_EQ(Decode(reply).flags & kDnsFlagTc, 0);
  }
}

TEST(DnsMessageTest, TcpRepliesAreNotTruncated) {
  DnsQuestion q = Parse(FromHex(kGlibcA));
  std::string reply =
      BuildDnsResponse(q, DnsRcode::kNoError, Addresses(200), 30, 5, DnsTransport::kTcp);
  DnsMessage m = Decode(reply);
  EXPECT_EQ(m.flags & kDnsFlagTc, 0);
  EXPECT_EQ(m.answers.size(), 200u);
  // Even the most that fits in a message.
  reply = BuildDnsResponse(q, DnsRcode::kNoError, Addresses(5000), 30, 5, DnsTransport::kTcp);
  EXPECT_LE(reply.size(), kDnsMaxMessage);
  EXPECT_EQ(Decode(reply).answers.size(), Fit(kDnsMaxMessage, false));
}

TEST(DnsMessageTest, LongestNameAndSoaFitIn512Bytes) {
  std::vector<std::string> labels = {std::string(63, 'a'), std::string(63, 'b'),
                                     std::string(63, 'c'), std::string(61, 'd')};
  DnsQuestion q = Parse(QueryWithOpt(Wire(labels), 512));
  EXPECT_EQ(q.name.size(), 253u);
  std::string reply = BuildDnsResponse(q, DnsRcode::kNxDomain, {}, 30, 5);
  EXPECT_LE(reply.size(), 512u);
  DnsMessage m = Decode(reply);
  EXPECT_EQ(m.flags & kDnsFlagTc, 0);
  ASSERT_EQ(m.authority.size(), 1u);
  EXPECT_EQ(m.authority[0].name, q.name.substr(64));
}

TEST(DnsMessageTest, EdnsVersionAboveZeroGetsBadVers) {
  DnsQuestion q = Parse(QueryWithOpt(Wire({"pypi", "org"}), 1232, 0x00010000));
  EXPECT_EQ(q.edns_version, 1);
  DnsMessage m = Decode(BuildDnsResponse(q, DnsRcode::kBadVers, {}, 30, 5));
  EXPECT_EQ(DnsHeaderRcode(m.flags), 0);  // BADVERS is 16: 0 here, 1 in OPT's upper bits
  ASSERT_EQ(m.additional.size(), 1u);
  EXPECT_EQ(m.additional[0].ttl, 0x01000000u);
  EXPECT_TRUE(m.authority.empty());

  // Without OPT it cannot be said; the client gets SERVFAIL.
  q.has_edns = false;
  EXPECT_EQ(DnsHeaderRcode(Decode(BuildDnsResponse(q, DnsRcode::kBadVers, {}, 30, 5)).flags), 2);
}

TEST(DnsMessageTest, InvalidNameFromCallerGetsServFail) {
  DnsQuestion q = Parse(FromHex(kGlibcA));
  for (const std::string& name : std::vector<std::string>{
           "a..b", "trailing.", ".", std::string(64, 'x'), std::string("nul\0", 4)}) {
    q.name = q.name_as_sent = name;
    std::string reply = BuildDnsResponse(q, DnsRcode::kNoError, Addresses(1), 30, 5);
    EXPECT_EQ(ToHex(reply), "8ddb81820000000000000000") << name;
  }
}

TEST(DnsMessageTest, EveryTruncationOfARealQueryIsMalformed) {
  for (const char* hex : kAllCaptured) {
    const std::string full = FromHex(hex);
    for (size_t n = 0; n < full.size(); ++n) {
      SCOPED_TRACE(std::string(hex) + " cut at " + std::to_string(n));
      Refuse(full.substr(0, n));
      std::string error_reply = BuildDnsError(full.substr(0, n), DnsRcode::kFormErr);
      if (n < kDnsHeaderSize) {
        EXPECT_EQ(error_reply, "");
      } else {
        EXPECT_EQ(error_reply.size(), kDnsHeaderSize);
      }
    }
  }
}

TEST(DnsMessageTest, TrailingBytesAreMalformed) {
  EXPECT_NE(Refuse(FromHex(kGlibcA) + "x").find("1 bytes follow"), std::string::npos);
}

TEST(DnsMessageTest, CompressionPointersAreFollowedOnlyBackwards) {
  // The question's name pointing at itself, into the header, forwards, and a label followed by
  // a pointer back to that label (a loop through the name).
  for (const char* name : {"c00c", "c000", "c002", "c020", "0161c00c", "01610161c00e"}) {
    std::string error =
        Refuse(Packet(0x0100, 1, 0, 0, 0, FromHex(name) + U16(1) + U16(1) + std::string(40, 'z')));
    EXPECT_NE(error.find("compression pointer"), std::string::npos) << name << ": " << error;
  }
  // A pointer cut off after its first byte.
  Refuse(Packet(0x0100, 1, 0, 0, 0, FromHex("c0")));
}

TEST(DnsMessageTest, CompressedNamesInRepliesExpand) {
  // The question ends at offset 12 + 14 = 26, where the first answer starts.
  std::string head = U16(7) + U16(0x8180) + U16(1) + U16(2) + U16(0) + U16(0) +
                     Wire({"pypi", "org"}) + U16(1) + U16(1);
  std::string rest = "00010001000000050004c6120005";                   // A IN, TTL 5, 198.18.0.5
  DnsMessage m = Decode(head + FromHex("c00c" + std::string(rest)) +   // -> pypi.org
                        FromHex("03777777c00c" + std::string(rest)));  // www + -> pypi.org
  ASSERT_EQ(m.answers.size(), 2u);
  EXPECT_EQ(m.answers[0].name, "pypi.org");
  EXPECT_EQ(m.answers[1].name, "www.pypi.org");

  // A chain: the second owner points to the first (offset 26), which points to the question.
  m = Decode(head + FromHex("0178c00c" + std::string(rest)) + FromHex("c01a" + std::string(rest)));
  ASSERT_EQ(m.answers.size(), 2u);
  EXPECT_EQ(m.answers[0].name, "x.pypi.org");
  EXPECT_EQ(m.answers[1].name, "x.pypi.org");

  // The first answer's owner pointing forwards, to the second.
  DnsMessage ignored;
  std::string error;
  EXPECT_FALSE(ParseDnsMessage(
      head + FromHex("c02a" + std::string(rest)) + FromHex("0178c00c" + std::string(rest)),
      &ignored, &error));
  EXPECT_NE(error.find("does not point backwards"), std::string::npos) << error;
}

TEST(DnsMessageTest, LabelsOver63BytesAreMalformed) {
  Parse(Query(Wire({std::string(63, 'a'), "org"})));
  std::string error = Refuse(Query(Wire({std::string(64, 'a'), "org"})));
  EXPECT_NE(error.find("over 63 bytes"), std::string::npos) << error;
  // The other reserved label type.
  Refuse(Query(std::string(1, '\x80') + "a" + std::string(1, '\0')));
}

TEST(DnsMessageTest, NamesOver255BytesAreMalformed) {
  // 3 x (1 + 63) + (1 + 61) + 1 = 255 bytes: the longest name.
  Parse(Query(Wire(
      {std::string(63, 'a'), std::string(63, 'b'), std::string(63, 'c'), std::string(61, 'd')})));
  std::string error = Refuse(Query(Wire(
      {std::string(63, 'a'), std::string(63, 'b'), std::string(63, 'c'), std::string(62, 'd')})));
  EXPECT_NE(error.find("longer than 255"), std::string::npos) << error;
  // Many short labels.
  std::vector<std::string> labels(128, "a");
  Refuse(Query(Wire(labels)));
}

TEST(DnsMessageTest, DotsAndNulsInsideLabelsAreMalformed) {
  EXPECT_NE(Refuse(Query(Wire({"a.b", "org"}))).find("'.' or NUL"), std::string::npos);
  EXPECT_NE(Refuse(Query(Wire({std::string("a\0b", 3), "org"}))).find("'.' or NUL"),
            std::string::npos);
}

TEST(DnsMessageTest, QuestionCountMustBeOne) {
  std::string question = Wire({"pypi", "org"}) + U16(1) + U16(1);
  Refuse(Packet(0x0100, 0, 0, 0, 0, ""));
  Refuse(Packet(0x0100, 2, 0, 0, 0, question + question));
  std::string reply =
      BuildDnsError(Packet(0x0100, 2, 0, 0, 0, question + question), DnsRcode::kFormErr);
  EXPECT_EQ(ToHex(reply), "123481810000000000000000");  // QR RD RA, FORMERR, no records
}

TEST(DnsMessageTest, RecordCountsOfAQueryAreCapped) {
  std::string question = Wire({"pypi", "org"}) + U16(1) + U16(1);
  std::string a_record = FromHex("c00c00010001000000050004c6120005");
  Refuse(Packet(0x0100, 1, 1, 0, 0, question + a_record));
  Refuse(Packet(0x0100, 1, 0, 1, 0, question + a_record));
  std::string five;
  for (int i = 0; i < 5; ++i) five += a_record;
  Refuse(Packet(0x0100, 1, 0, 0, 5, question + five));
  // An additional record that is not OPT is read past.
  DnsQuestion q = Parse(Packet(0x0100, 1, 0, 0, 2, question + a_record + Opt(1232)));
  EXPECT_TRUE(q.has_edns);
  // Counts larger than the packet.
  Refuse(Packet(0x0100, 1, 0, 0, 4, question + Opt(1232)));
}

TEST(DnsMessageTest, OptMustBeOneAndOwnedByTheRoot) {
  std::string question = Wire({"pypi", "org"}) + U16(1) + U16(1);
  Refuse(Packet(0x0100, 1, 0, 0, 2, question + Opt(1232) + Opt(1232)));
  std::string named_opt = Opt(1232);
  named_opt.replace(0, 1, Wire({"x"}));
  EXPECT_NE(Refuse(Packet(0x0100, 1, 0, 0, 1, question + named_opt)).find("not the root"),
            std::string::npos);
  // Options must fill the RDATA exactly.
  Refuse(Packet(0x0100, 1, 0, 0, 1, question + Opt(1232, 0, FromHex("000a0008c0bc71a8"))));
  Refuse(Packet(0x0100, 1, 0, 0, 1, question + Opt(1232, 0, FromHex("000a00"))));
  DnsQuestion q =
      Parse(Packet(0x0100, 1, 0, 0, 1, question + Opt(1232, 0, FromHex("000a0002abcd000c0000"))));
  EXPECT_TRUE(q.has_edns);
}

TEST(DnsMessageTest, ResponsesAreNotQueriesAndGetNoReply) {
  std::string packet = FromHex(kGlibcA);
  packet[2] = static_cast<char>(packet[2] | 0x80);
  EXPECT_NE(Refuse(packet, DnsParse::kNotQuery).find("response"), std::string::npos);
  EXPECT_EQ(BuildDnsError(packet, DnsRcode::kNotImp), "");
  // Our own replies, looped back, too.
  DnsQuestion q = Parse(FromHex(kGlibcA));
  std::string reply = BuildDnsResponse(q, DnsRcode::kNoError, Addresses(1), 5, 5);
  Refuse(reply, DnsParse::kNotQuery);
  EXPECT_EQ(BuildDnsError(reply, DnsRcode::kNotImp), "");
}

TEST(DnsMessageTest, OtherOpcodesGetNotImp) {
  for (int opcode : {1, 2, 4, 5, 15}) {
    std::string packet = FromHex(kGlibcA);
    packet[2] = static_cast<char>((opcode << 3) | 1);
    EXPECT_NE(Refuse(packet, DnsParse::kNotQuery).find("opcode " + std::to_string(opcode)),
              std::string::npos);
    DnsMessage m = Decode(BuildDnsError(packet, DnsRcode::kNotImp));
    EXPECT_EQ(m.id, 0x8ddb);
    EXPECT_EQ(m.flags, kDnsFlagQr | (opcode << 11) | kDnsFlagRd | kDnsFlagRa | 4);
    EXPECT_TRUE(m.questions.empty());
  }
}

TEST(DnsMessageTest, TcpFraming) {
  std::string a = FromHex(kGlibcA);
  std::string b = FromHex(kDigAEdns);
  std::string framed = FrameDnsTcpMessage(a);
  EXPECT_EQ(framed, U16(static_cast<uint16_t>(a.size())) + a);
  EXPECT_EQ(FrameDnsTcpMessage(std::string(kDnsMaxMessage + 1, 'x')), "");
  std::string stream = framed + FrameDnsTcpMessage("") + FrameDnsTcpMessage(b);

  // Whole, and one byte at a time.
  for (size_t piece : {stream.size(), size_t{1}}) {
    DnsTcpSplitter splitter;
    std::vector<std::string> messages;
    std::string message;
    for (size_t at = 0; at < stream.size(); at += piece) {
      std::string_view input = std::string_view(stream).substr(at, piece);
      while (splitter.Next(&input, &message)) messages.push_back(message);
      EXPECT_TRUE(input.empty());
    }
    EXPECT_EQ(messages, (std::vector<std::string>{a, "", b}));
  }
}

}  // namespace
}  // namespace airlock::guest
