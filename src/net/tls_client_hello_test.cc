#include "src/net/tls_client_hello.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::net {
namespace {

// ClientHellos captured from OpenSSL 3.0 (openssl s_client -connect 127.0.0.1:PORT ... against a
// listener that saved what it received), as hex.
// openssl s_client -servername example.com -tls1_3
constexpr char kOpenSslTls13Sni[] =
    "16030100f0010000ec03039c4525130bedd5558bc43c8d3b3f2e3257cd631d03d727bb69b6c3ff4b0ec7fa20"
    "b4f47c7aea7d59f2d1163bd73e72ed6ce459eb7c6f1698aae3db8864b681e44f000813021303130100ff0100"
    "009b00000010000e00000b6578616d706c652e636f6d000b000403000102000a00160014001d0017001e0019"
    "001801000101010201030104002300000016000000170000000d001e001c040305030603080708080809080a"
    "080b080408050806040105010601002b0003020304002d00020101003300260024001d00202cf159ea0b9a1f"
    "420b3748897453f99b9fee0672928832de541ca5c233b39f13";
// openssl s_client -servername example.com -tls1_3 -alpn h2,http/1.1
constexpr char kOpenSslTls13SniAlpn[] =
    "1603010102010000fe0303e997d12bb58ab02eb9e30b4f1492f6c5125bc08ed836decb40908cecf91fd1e820"
    "b976e2e443b8d7f590d14307dd5afc47ea8c7bf2ad27cbdb7429a2d2e3f75edd000813021303130100ff0100"
    "00ad00000010000e00000b6578616d706c652e636f6d000b000403000102000a00160014001d0017001e0019"
    "001801000101010201030104002300000010000e000c02683208687474702f312e310016000000170000000d"
    "001e001c040305030603080708080809080a080b080408050806040105010601002b0003020304002d000201"
    "01003300260024001d002038e2b420c2a55ce5fa1baa1df862437846bd945e3f94d1d250919db9d7b46b01";
// openssl s_client -noservername -tls1_3
constexpr char kOpenSslTls13NoSni[] =
    "16030100dc010000d80303b4a9a5aff32b8f7643ae0079c4d3b27c68482f72183bf68d3dc7126000c52a8420"
    "cc7324aa13ff309898018ccf958a078a49354a1895d6c269b5442bfe3507c123000813021303130100ff0100"
    "0087000b000403000102000a00160014001d0017001e00190018010001010102010301040023000000160000"
    "00170000000d001e001c040305030603080708080809080a080b080408050806040105010601002b00030203"
    "04002d00020101003300260024001d002031b2fdf19e7b2c57cb98367ad9a7cfd635da3bc0d2f996364371b9"
    "3399b6591d";
// openssl s_client -servername Example.COM -tls1_2
constexpr char kOpenSslTls12MixedCaseSni[] =
    "16030100cb010000c70303bef8f0a2c7bae2c2457352c361310e6e28c5e9ca6370dd8deeeeb83b3b73cc3f00"
    "0038c02cc030009fcca9cca8ccaac02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033"
    "009d009c003d003c0035002f00ff0100006600000010000e00000b4578616d706c652e434f4d000b00040300"
    "0102000a000c000a001d0017001e00190018002300000016000000170000000d002a00280403050306030807"
    "08080809080a080b080408050806040105010601030303010302040205020602";
// openssl s_client -servername 192.0.2.7
constexpr char kOpenSslDefaultIpSni[] =
    "1603010136010001320303c62dcc788b3dfe1ba4729af315299b94c31571b6276b175f6643e4f7ee496fa920"
    "8d321a0f4e0f33a28f1b169a77ed1a716ef2cd495459b487d6cf9e63554daf13003e130213031301c02cc030"
    "009fcca9cca8ccaac02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d009c003d"
    "003c0035002f00ff010000ab0000000e000c0000093139322e302e322e37000b000403000102000a00160014"
    "001d0017001e0019001801000101010201030104002300000016000000170000000d002a0028040305030603"
    "080708080809080a080b080408050806040105010601030303010302040205020602002b0009080304030303"
    "020301002d00020101003300260024001d00200f954f4d4b112e4cb4e279aa2085fd28779ddb223db203002b"
    "3239d936b6776d";

std::string FromHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

struct Peeked {
  PeekResult result;
  ClientHelloInfo info;
  std::string error;
};

Peeked Peek(std::string_view wire) {
  std::string copy(wire);
  Peeked p;
  p.info.sni = "stale";  // every result must reset what the caller passed in
  p.error = "stale";
  p.result = PeekClientHello(Bytes(copy), &p.info, &p.error);
  return p;
}

std::string U8(size_t v) { return std::string(1, static_cast<char>(v & 0xff)); }
std::string U16(size_t v) { return U8(v >> 8) + U8(v); }
std::string U24(size_t v) { return U8(v >> 16) + U16(v); }

// Builds ClientHellos field by field, so a test can break exactly one of them.
struct HelloBuilder {
  std::string version = U16(0x0303);
  std::string random = std::string(32, '\x42');
  std::string session_id = U8(32) + std::string(32, '\x07');
  std::string cipher_suites = U16(4) + U16(0x1301) + U16(0x1302);
  std::string compression = U8(1) + U8(0);
  bool has_extensions = true;
  std::vector<std::string> extensions;

  HelloBuilder& Extension(uint16_t type, const std::string& data) {
    extensions.push_back(U16(type) + U16(data.size()) + data);
    return *this;
  }
  HelloBuilder& ServerName(const std::string& name) {
    std::string entry = U8(0) + U16(name.size()) + name;
    return Extension(0, U16(entry.size()) + entry);
  }
  HelloBuilder& Alpn(const std::vector<std::string>& names) {
    std::string list;
    for (const std::string& n : names) list += U8(n.size()) + n;
    return Extension(16, U16(list.size()) + list);
  }

  std::string Body() const {
    std::string body = version + random + session_id + cipher_suites + compression;
    if (!has_extensions) return body;
    std::string list;
    for (const std::string& e : extensions) list += e;
    return body + U16(list.size()) + list;
  }
  // The handshake message: type 1, u24 length, body.
  std::string Message() const { return Handshake(Body()); }
  static std::string Handshake(const std::string& body) { return U8(1) + U24(body.size()) + body; }
  // The message in records of at most `fragment` bytes each.
  std::string Wire(size_t fragment = 16384) const { return Records(Message(), fragment); }

  static std::string Record(const std::string& fragment, uint8_t type = 22,
                            uint16_t version = 0x0301) {
    return U8(type) + U16(version) + U16(fragment.size()) + fragment;
  }
  static std::string Records(const std::string& message, size_t fragment) {
    std::string out;
    for (size_t i = 0; i < message.size(); i += fragment)
      out += Record(message.substr(i, fragment));
    return out;
  }
};

HelloBuilder Typical() {
  HelloBuilder b;
  b.Extension(0x002b, U8(2) + U16(0x0304))  // supported_versions
      .ServerName("Example.COM")
      .Alpn({"h2", "http/1.1"})
      .Extension(0x000a, U16(2) + U16(0x001d));  // supported_groups
  return b;
}

// The contract every answer keeps: a prefix of the bytes gives kNeedMore (and nothing else) or
// the very answer the whole gives.
void ExpectPrefixesAgree(const std::string& wire) {
  Peeked whole = Peek(wire);
  for (size_t n = 0; n < wire.size(); ++n) {
    Peeked part = Peek(std::string_view(wire).substr(0, n));
    if (part.result == PeekResult::kNeedMore) {
      EXPECT_EQ(part.info, ClientHelloInfo{}) << n;
      EXPECT_EQ(part.error, "") << n;
      continue;
    }
    EXPECT_EQ(part.result, whole.result) << "prefix of " << n << " bytes";
    EXPECT_EQ(part.info, whole.info) << n;
    EXPECT_EQ(part.error, whole.error) << n;
  }
}

void ExpectMalformed(const std::string& wire, std::string_view why) {
  Peeked p = Peek(wire);
  EXPECT_EQ(p.result, PeekResult::kMalformed) << why;
  EXPECT_NE(p.error.find(why), std::string::npos) << p.error;
  EXPECT_EQ(p.info, ClientHelloInfo{});
  ExpectPrefixesAgree(wire);
}

struct Captured {
  const char* hex;
  const char* sni;
  std::vector<std::string> alpn;
};

const std::vector<Captured>& CapturedHellos() {
  static const auto* hellos = new std::vector<Captured>{
      {kOpenSslTls13Sni, "example.com", {}},
      {kOpenSslTls13SniAlpn, "example.com", {"h2", "http/1.1"}},
      {kOpenSslTls13NoSni, "", {}},
      {kOpenSslTls12MixedCaseSni, "example.com", {}},
      {kOpenSslDefaultIpSni, "192.0.2.7", {}},
  };
  return *hellos;
}

TEST(TlsClientHelloTest, ReadsCapturedOpenSslHellos) {
  for (const Captured& c : CapturedHellos()) {
    Peeked p = Peek(FromHex(c.hex));
    ASSERT_EQ(p.result, PeekResult::kDone) << c.sni << ": " << p.error;
    EXPECT_EQ(p.info.sni, c.sni);
    EXPECT_EQ(p.info.alpn, c.alpn);
    EXPECT_EQ(p.error, "");
  }
}

TEST(TlsClientHelloTest, CapturedHellosNeedMoreUntilTheLastByte) {
  for (const Captured& c : CapturedHellos()) {
    std::string wire = FromHex(c.hex);
    for (size_t n = 0; n < wire.size(); ++n) {
      EXPECT_EQ(Peek(wire.substr(0, n)).result, PeekResult::kNeedMore) << c.sni << " " << n;
    }
    ExpectPrefixesAgree(wire);
  }
}

TEST(TlsClientHelloTest, CapturedHelloSplitAcrossTwoRecordsAtEveryPoint) {
  std::string wire = FromHex(kOpenSslTls13SniAlpn);
  std::string message = wire.substr(5);
  for (size_t split = 1; split < message.size(); ++split) {
    std::string two = HelloBuilder::Record(message.substr(0, split)) +
                      HelloBuilder::Record(message.substr(split));
    Peeked p = Peek(two);
    ASSERT_EQ(p.result, PeekResult::kDone) << split << ": " << p.error;
    EXPECT_EQ(p.info.sni, "example.com");
    EXPECT_EQ(p.info.alpn, (std::vector<std::string>{"h2", "http/1.1"}));
    EXPECT_EQ(Peek(two.substr(0, two.size() - 1)).result, PeekResult::kNeedMore) << split;
  }
}

TEST(TlsClientHelloTest, BuiltHelloLowerCasesTheNameAndKeepsAlpnOrder) {
  Peeked p = Peek(Typical().Wire());
  ASSERT_EQ(p.result, PeekResult::kDone) << p.error;
  EXPECT_EQ(p.info.sni, "example.com");
  EXPECT_EQ(p.info.alpn, (std::vector<std::string>{"h2", "http/1.1"}));
  ExpectPrefixesAgree(Typical().Wire());
}

TEST(TlsClientHelloTest, AnOfferOfEncryptedClientHelloIsNoted) {
  EXPECT_FALSE(Peek(Typical().Wire()).info.encrypted_client_hello);
  HelloBuilder b = Typical();
  b.Extension(0xfe0d, std::string("\x00\x00\x01\x00\x01\x42", 6));  // outer, as GREASE
  Peeked p = Peek(b.Wire());
  ASSERT_EQ(p.result, PeekResult::kDone) << p.error;
  EXPECT_EQ(p.info.sni, "example.com");  // the outer, public name only
  EXPECT_TRUE(p.info.encrypted_client_hello);
  ExpectPrefixesAgree(b.Wire());
}

TEST(TlsClientHelloTest, ReassemblesOneByteRecords) {
  std::string wire = Typical().Wire(1);
  Peeked p = Peek(wire);
  ASSERT_EQ(p.result, PeekResult::kDone) << p.error;
  EXPECT_EQ(p.info.sni, "example.com");
  ExpectPrefixesAgree(wire);
}

TEST(TlsClientHelloTest, AcceptsEveryRecordVersionFromTls10To13) {
  for (uint16_t version : {0x0301, 0x0302, 0x0303, 0x0304}) {
    Peeked p = Peek(HelloBuilder::Record(Typical().Message(), 22, version));
    EXPECT_EQ(p.result, PeekResult::kDone) << version << ": " << p.error;
  }
}

TEST(TlsClientHelloTest, IgnoresWhatFollowsTheHello) {
  std::string wire = Typical().Wire() + HelloBuilder::Record("\x01", 20) +
                     HelloBuilder::Record("early data", 23) + "garbage";
  Peeked p = Peek(wire);
  ASSERT_EQ(p.result, PeekResult::kDone) << p.error;
  EXPECT_EQ(p.info.sni, "example.com");
  // Even the rest of the hello's own record.
  std::string message = Typical().Message() + "trailing";
  p = Peek(HelloBuilder::Record(message));
  EXPECT_EQ(p.result, PeekResult::kDone) << p.error;
}

TEST(TlsClientHelloTest, HelloWithoutExtensionsHasNoName) {
  HelloBuilder b;
  b.has_extensions = false;
  Peeked p = Peek(b.Wire());
  ASSERT_EQ(p.result, PeekResult::kDone) << p.error;
  EXPECT_EQ(p.info, ClientHelloInfo{});
  b.has_extensions = true;  // an empty extension list
  EXPECT_EQ(Peek(b.Wire()).result, PeekResult::kDone);
}

TEST(TlsClientHelloTest, IpLiteralAndLongestNamesAreReturnedAsSent) {
  HelloBuilder ip;
  ip.ServerName("10.0.0.1");
  Peeked p = Peek(ip.Wire());
  ASSERT_EQ(p.result, PeekResult::kDone) << p.error;
  EXPECT_EQ(p.info.sni, "10.0.0.1");

  std::string longest(255, 'a');
  HelloBuilder b;
  b.ServerName(longest);
  p = Peek(b.Wire());
  ASSERT_EQ(p.result, PeekResult::kDone) << p.error;
  EXPECT_EQ(p.info.sni, longest);
}

TEST(TlsClientHelloTest, EmptyBufferNeedsMore) {
  EXPECT_EQ(Peek("").result, PeekResult::kNeedMore);
  EXPECT_EQ(Peek("\x16").result, PeekResult::kNeedMore);
  EXPECT_EQ(Peek(std::string("\x16\x03\x01\x00\x10", 5)).result, PeekResult::kNeedMore);
}

TEST(TlsClientHelloTest, OtherProtocolsAreNotTls) {
  for (std::string wire : {
           std::string("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"),
           // SSLv2-style ClientHello: two-byte length with the high bit set.
           FromHex("802e0100020015000000100100800300800700c0"),
           HelloBuilder::Record("hello", 23),  // application data before any handshake
           HelloBuilder::Record(std::string("\x02\x28", 2), 21),  // an alert
           std::string("\x16\x47", 2),  // a handshake type byte, then not TLS's major 3
           std::string("SSH-2.0-OpenSSH_9.2\r\n"),
       }) {
    Peeked p = Peek(wire);
    EXPECT_EQ(p.result, PeekResult::kNotTls) << wire;
    EXPECT_FALSE(p.error.empty());
    EXPECT_EQ(p.info, ClientHelloInfo{});
    ExpectPrefixesAgree(wire);
  }
  EXPECT_NE(Peek("GET / HTTP/1.1\r\n").error.find("0x47"), std::string::npos);
}

TEST(TlsClientHelloTest, RefusesBadRecords) {
  std::string message = Typical().Message();
  ExpectMalformed(HelloBuilder::Record(message, 22, 0x0300), "unsupported version 0x0300");
  ExpectMalformed(HelloBuilder::Record(message, 22, 0x0305), "unsupported version 0x0305");
  ExpectMalformed(HelloBuilder::Record("", 22), "bad length of 0");
  ExpectMalformed(U8(22) + U16(0x0301) + U16(16385) + std::string(16385, '\x01'),
                  "bad length of 16385");
  // The hello is begun in one record, and something else comes before it is complete.
  std::string begun = HelloBuilder::Record(message.substr(0, 10));
  ExpectMalformed(begun + HelloBuilder::Record("\x01", 20), "type 20 came before");
  ExpectMalformed(begun + HelloBuilder::Record(std::string("\x02\x28", 2), 21), "type 21");
  ExpectMalformed(begun + "\x16\x04", "major version 4");
  // A handshake message that is not a ClientHello.
  std::string server_hello = message;
  server_hello[0] = 2;
  ExpectMalformed(HelloBuilder::Record(server_hello), "type 2, not ClientHello");
}

TEST(TlsClientHelloTest, EveryShorterBodyIsMalformedNotIncomplete) {
  // The handshake header says how long the body is; inner lengths that run past it are errors,
  // not a reason to wait for more bytes.
  std::string body = Typical().Body();
  HelloBuilder plain;  // the same fixed fields, no extensions
  plain.has_extensions = false;
  const size_t no_extensions = plain.Body().size();
  for (size_t cut = 0; cut < body.size(); ++cut) {
    std::string wire = HelloBuilder::Record(HelloBuilder::Handshake(body.substr(0, cut)));
    Peeked p = Peek(wire);
    if (cut == no_extensions) {
      // Cut right after the compression methods: a valid hello without extensions.
      EXPECT_EQ(p.result, PeekResult::kDone) << p.error;
      EXPECT_EQ(p.info, ClientHelloInfo{});
    } else {
      EXPECT_EQ(p.result, PeekResult::kMalformed) << "body cut at " << cut;
      EXPECT_FALSE(p.error.empty());
    }
  }
}

TEST(TlsClientHelloTest, RefusesLengthsPastTheirEnd) {
  HelloBuilder b = Typical();
  b.session_id = U8(200) + std::string(32, '\x07');
  ExpectMalformed(b.Wire(), "session id runs past");
  b = Typical();
  b.session_id = U8(33) + std::string(33, '\x07');
  ExpectMalformed(b.Wire(), "session id of 33 bytes");
  b = Typical();
  b.cipher_suites = U16(0xffff) + U16(0x1301);
  ExpectMalformed(b.Wire(), "cipher suites run past");
  b = Typical();
  b.cipher_suites = U16(3) + "abc";
  ExpectMalformed(b.Wire(), "bad length of 3");
  b = Typical();
  b.cipher_suites = U16(0);
  ExpectMalformed(b.Wire(), "bad length of 0");
  b = Typical();
  b.compression = U8(0);
  ExpectMalformed(b.Wire(), "no compression method");
  b = Typical();
  b.version = U16(0x0203);
  ExpectMalformed(b.Wire(), "unknown version 0x0203");

  // The extension list's length is more than the body holds.
  std::string body = Typical().Body();
  HelloBuilder no_ext = Typical();
  no_ext.has_extensions = false;
  std::string fixed = no_ext.Body();
  std::string list = body.substr(fixed.size() + 2);
  ExpectMalformed(
      HelloBuilder::Record(HelloBuilder::Handshake(fixed + U16(list.size() + 1) + list)),
      "extension list runs past");
  ExpectMalformed(
      HelloBuilder::Record(HelloBuilder::Handshake(fixed + U16(list.size() - 1) + list)),
      "after its extension list");
  ExpectMalformed(
      HelloBuilder::Record(HelloBuilder::Handshake(fixed + U16(3) + std::string(3, '\0'))),
      "extension runs past");
  // One extension's length is more than the list holds.
  std::string ext = U16(0x0017) + U16(10) + "short";
  ExpectMalformed(HelloBuilder::Record(HelloBuilder::Handshake(fixed + U16(ext.size()) + ext)),
                  "extension runs past");
}

TEST(TlsClientHelloTest, RefusesBadServerNameExtensions) {
  HelloBuilder b;
  b.ServerName("a.example").ServerName("b.example");
  ExpectMalformed(b.Wire(), "extension 0 twice");

  // Two host_name entries in one list.
  std::string two = U8(0) + U16(9) + "a.example" + U8(0) + U16(9) + "b.example";
  b = HelloBuilder();
  b.Extension(0, U16(two.size()) + two);
  ExpectMalformed(b.Wire(), "more than one name");

  std::string other_type = U8(1) + U16(9) + "a.example";
  b = HelloBuilder();
  b.Extension(0, U16(other_type.size()) + other_type);
  ExpectMalformed(b.Wire(), "unknown type 1");

  b = HelloBuilder();
  b.Extension(0, "");
  ExpectMalformed(b.Wire(), "does not hold exactly its name list");
  b = HelloBuilder();
  b.Extension(0, U16(0));
  ExpectMalformed(b.Wire(), "server_name list is empty");
  b = HelloBuilder();
  b.Extension(0, U16(13) + U8(0) + U16(9) + "a.example");  // list longer than the extension
  ExpectMalformed(b.Wire(), "does not hold exactly its name list");
  b = HelloBuilder();
  b.Extension(0, U16(12) + U8(0) + U16(9) + "a.example" + "x");  // bytes after the list
  ExpectMalformed(b.Wire(), "does not hold exactly its name list");
  b = HelloBuilder();
  b.Extension(0, U16(5) + U8(0) + U16(9) + "a.");  // name longer than the list
  ExpectMalformed(b.Wire(), "runs past the end of its list");
  b = HelloBuilder();
  b.ServerName("");
  ExpectMalformed(b.Wire(), "server name is empty");
}

TEST(TlsClientHelloTest, RefusesNamesWithBadBytesOrTooLong) {
  HelloBuilder b;
  b.ServerName(std::string("allowed.example\0.evil.example", 29));
  ExpectMalformed(b.Wire(), "byte 0x00");
  for (char bad : {'\x01', ' ', '\x7f', '\x80', '\xff'}) {
    b = HelloBuilder();
    b.ServerName(std::string("a") + bad + "b");
    Peeked p = Peek(b.Wire());
    EXPECT_EQ(p.result, PeekResult::kMalformed) << static_cast<int>(bad);
    EXPECT_NE(p.error.find("not printable ASCII"), std::string::npos) << p.error;
  }
  b = HelloBuilder();
  b.ServerName(std::string(256, 'a'));
  ExpectMalformed(b.Wire(), "256 bytes is longer than 255");
}

TEST(TlsClientHelloTest, RefusesBadAlpnExtensions) {
  HelloBuilder b;
  b.Alpn({});
  ExpectMalformed(b.Wire(), "ALPN protocol list is empty");
  b = HelloBuilder();
  b.Alpn({"h2", ""});
  ExpectMalformed(b.Wire(), "empty protocol name");
  b = HelloBuilder();
  b.Extension(16, U16(4) + U8(5) + "h2x");
  ExpectMalformed(b.Wire(), "ALPN protocol name runs past");
  b = HelloBuilder();
  b.Extension(16, U16(9) + U8(2) + "h2");
  ExpectMalformed(b.Wire(), "does not hold exactly its protocol list");
}

TEST(TlsClientHelloTest, RefusesHellosOverTheCap) {
  // A header that claims more than fits is refused as soon as it is read.
  std::string huge = U8(1) + U24(40000) + std::string(100, '\0');
  Peeked p = Peek(HelloBuilder::Record(huge));
  EXPECT_EQ(p.result, PeekResult::kMalformed);
  EXPECT_EQ(p.error, "ClientHello larger than 32 KiB");

  // The largest hello that fits in kMaxClientHelloBytes when sent in full records, and one byte
  // more. Padding (extension 21) makes up the size.
  auto padded_to = [](size_t message_size) {
    HelloBuilder b;
    b.ServerName("example.com");
    size_t base = b.Message().size() + 4;  // + the padding extension's header
    b.Extension(21, std::string(message_size - base, '\0'));
    return b.Wire();
  };
  const size_t records = 2;  // just under 32 KiB of message fits in two 16 KiB records
  std::string fits = padded_to(kMaxClientHelloBytes - 5 * records);
  ASSERT_EQ(fits.size(), kMaxClientHelloBytes);
  p = Peek(fits);
  ASSERT_EQ(p.result, PeekResult::kDone) << p.error;
  EXPECT_EQ(p.info.sni, "example.com");
  EXPECT_EQ(Peek(fits + "more").result, PeekResult::kDone);

  std::string over = padded_to(kMaxClientHelloBytes - 5 * records + 1);
  EXPECT_EQ(Peek(over.substr(0, kMaxClientHelloBytes - 1)).result, PeekResult::kNeedMore);
  p = Peek(over.substr(0, kMaxClientHelloBytes));
  EXPECT_EQ(p.result, PeekResult::kMalformed);
  EXPECT_EQ(p.error, "ClientHello larger than 32 KiB");
  EXPECT_EQ(Peek(over).error, "ClientHello larger than 32 KiB");

  // Small records spend the budget on record headers: a 31 KiB hello in 100-byte records.
  HelloBuilder small;
  small.Extension(21, std::string(31 * 1024, '\0'));
  std::string many = small.Wire(100);
  ASSERT_GT(many.size(), kMaxClientHelloBytes);
  EXPECT_EQ(Peek(many).error, "ClientHello larger than 32 KiB");
  EXPECT_EQ(Peek(many.substr(0, kMaxClientHelloBytes - 1)).result, PeekResult::kNeedMore);
}

TEST(TlsClientHelloTest, CorruptingAnyByteKeepsPrefixesConsistent) {
  for (const std::string& wire : {FromHex(kOpenSslTls13SniAlpn), Typical().Wire(7)}) {
    for (size_t i = 0; i < wire.size(); ++i) {
      for (char mask : {'\x01', '\x80', '\xff'}) {
        std::string corrupt = wire;
        corrupt[i] = static_cast<char>(corrupt[i] ^ mask);
        Peeked whole = Peek(corrupt);
        // Check a few prefixes around the corrupted byte and the end.
        for (size_t n : {i, i + 1, i + 2, corrupt.size() - 1}) {
          if (n > corrupt.size()) continue;
          Peeked part = Peek(std::string_view(corrupt).substr(0, n));
          if (part.result == PeekResult::kNeedMore) continue;
          ASSERT_EQ(part.result, whole.result) << i << " " << n;
          ASSERT_EQ(part.error, whole.error) << i << " " << n;
          ASSERT_EQ(part.info, whole.info) << i << " " << n;
        }
      }
    }
  }
}

TEST(TlsClientHelloTest, NullErrorIsAllowed) {
  std::string wire = "GET /";
  ClientHelloInfo info;
  EXPECT_EQ(PeekClientHello(Bytes(wire), &info, nullptr), PeekResult::kNotTls);
}

}  // namespace
}  // namespace airlock::net
