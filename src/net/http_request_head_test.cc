#include "src/net/http_request_head.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace airlock::net {
namespace {

struct Peeked {
  HeadResult result;
  HttpRequestHead head;
  std::string error;
};

Peeked Peek(std::string_view wire) {
  std::string copy(wire);
  Peeked p;
  p.head.host = "stale";  // every result must reset what the caller passed in
  p.error = "stale";
  p.result = PeekHttpRequestHead(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(copy.data()), copy.size()), &p.head,
      &p.error);
  return p;
}

// The contract every answer keeps: a prefix of the bytes gives kNeedMore (and nothing else) or
// the very answer the whole gives.
void ExpectPrefixesAgree(std::string_view wire) {
  Peeked whole = Peek(wire);
  for (size_t n = 0; n < wire.size(); ++n) {
    Peeked part = Peek(wire.substr(0, n));
    if (part.result == HeadResult::kNeedMore) {
      EXPECT_EQ(part.head, HttpRequestHead{}) << n;
      EXPECT_EQ(part.error, "") << n;
      continue;
    }
    EXPECT_EQ(part.result, whole.result) << "prefix of " << n << " bytes";
    EXPECT_EQ(part.head, whole.head) << n;
    EXPECT_EQ(part.error, whole.error) << n;
  }
}

HttpRequestHead Head(std::string method, std::string host, std::string target) {
  return {std::move(method), std::move(host), std::move(target)};
}

void ExpectDone(std::string_view wire, const HttpRequestHead& want) {
  Peeked p = Peek(wire);
  ASSERT_EQ(p.result, HeadResult::kDone) << wire << ": " << p.error;
  EXPECT_EQ(p.head, want) << wire;
  EXPECT_EQ(p.error, "");
  ExpectPrefixesAgree(wire);
}

void ExpectMalformed(std::string_view wire, std::string_view why) {
  Peeked p = Peek(wire);
  EXPECT_EQ(p.result, HeadResult::kMalformed) << wire;
  EXPECT_NE(p.error.find(why), std::string::npos) << wire << ": " << p.error;
  EXPECT_EQ(p.head, HttpRequestHead{});
  ExpectPrefixesAgree(wire);
}

TEST(HttpRequestHeadTest, ReadsAnOrdinaryGet) {
  ExpectDone(
      "GET /index.html?q=1 HTTP/1.1\r\nUser-Agent: curl/7.88.1\r\nHost: Example.COM\r\n"
      "Accept: */*\r\n\r\n",
      Head("GET", "example.com", "/index.html?q=1"));
  ExpectDone("HEAD / HTTP/1.0\r\nhost: example.com\r\n\r\n", Head("HEAD", "example.com", "/"));
  ExpectDone("OPTIONS * HTTP/1.1\r\nHost: example.com\r\n\r\n",
             Head("OPTIONS", "example.com", "*"));
}

TEST(HttpRequestHeadTest, NeedsMoreUntilTheEmptyLineThenStaysDone) {
  std::string wire = "POST /upload HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\n";
  for (size_t n = 0; n < wire.size(); ++n) {
    Peeked p = Peek(wire.substr(0, n));
    EXPECT_EQ(p.result, HeadResult::kNeedMore) << n << ": " << p.error;
  }
  // The body, and whatever follows, is not read.
  std::string with_body = wire + "hello";
  ExpectDone(with_body, Head("POST", "example.com", "/upload"));
}

TEST(HttpRequestHeadTest, StripsThePort) {
  ExpectDone("GET / HTTP/1.1\r\nHost: example.com:8080\r\n\r\n", Head("GET", "example.com", "/"));
  ExpectDone("GET / HTTP/1.1\r\nHost: 192.0.2.1:80\r\n\r\n", Head("GET", "192.0.2.1", "/"));
  ExpectDone("GET / HTTP/1.1\r\nHost: [2001:DB8::1]:443\r\n\r\n", Head("GET", "2001:db8::1", "/"));
  ExpectDone("GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n", Head("GET", "::1", "/"));
  ExpectDone("GET / HTTP/1.1\r\nHost:   example.com  \r\n\r\n", Head("GET", "example.com", "/"));
}

TEST(HttpRequestHeadTest, RefusesBadHosts) {
  for (const char* host : {"", "exa mple.com", "example.com:", "example.com:0", "example.com:65536",
                           "example.com:http", "a:1:2", "::1", "[::1", "[::1]x", "[example.com]",
                           "user@example.com", "example.com/", ":80"}) {
    ExpectMalformed("GET / HTTP/1.1\r\nHost: " + std::string(host) + "\r\n\r\n", "Host header");
  }
  ExpectMalformed("GET / HTTP/1.1\r\nHost: " + std::string(256, 'a') + "\r\n\r\n",
                  "longer than 255");
  // A folded (obs-fold) Host is not a host.
  ExpectMalformed("GET / HTTP/1.1\r\nHost: example.com\r\n evil.com\r\n\r\n", "Host header");
}

TEST(HttpRequestHeadTest, ReadsTheHostOfAnAbsoluteFormTarget) {
  ExpectDone("GET http://Example.com:8080/a?b HTTP/1.1\r\nHost: example.com\r\n\r\n",
             Head("GET", "example.com", "http://Example.com:8080/a?b"));
  ExpectDone("GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n",
             Head("GET", "example.com", "http://example.com"));
  // HTTP/1.0 needs no Host when the target names the host.
  ExpectDone("GET http://example.com/ HTTP/1.0\r\n\r\n",
             Head("GET", "example.com", "http://example.com/"));
  ExpectDone("GET HTTP://[::1]:80/ HTTP/1.0\r\n\r\n", Head("GET", "::1", "HTTP://[::1]:80/"));
}

TEST(HttpRequestHeadTest, RefusesAnAbsoluteFormTargetThatDisagreesWithHost) {
  ExpectMalformed("GET http://allowed.com/ HTTP/1.1\r\nHost: evil.com\r\n\r\n",
                  "names another host than the request target");
  ExpectMalformed("GET http://allowed.com/ HTTP/1.1\r\n\r\n", "no Host header");
  ExpectMalformed("GET http://user@allowed.com/ HTTP/1.1\r\nHost: allowed.com\r\n\r\n",
                  "user info");
  ExpectMalformed("GET ftp://allowed.com/ HTTP/1.1\r\nHost: allowed.com\r\n\r\n",
                  "neither a path nor an http:// URL");
  ExpectMalformed("GET http:///path HTTP/1.1\r\nHost: allowed.com\r\n\r\n", "authority is empty");
}

TEST(HttpRequestHeadTest, RefusesTwoHostHeaders) {
  ExpectMalformed("GET / HTTP/1.1\r\nHost: allowed.com\r\nHost: evil.com\r\n\r\n",
                  "more than one Host header");
  ExpectMalformed("GET / HTTP/1.1\r\nHost: allowed.com\r\nX: y\r\nhOST: allowed.com\r\n\r\n",
                  "more than one Host header");
  // A name with a space before the colon is no token; some servers would read it as Host.
  ExpectMalformed("GET / HTTP/1.1\r\nHost: allowed.com\r\nHost : evil.com\r\n\r\n",
                  "is not a token");
}

TEST(HttpRequestHeadTest, RefusesAMissingHost) {
  ExpectMalformed("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", "no Host header");
  ExpectMalformed("GET / HTTP/1.0\r\n\r\n", "no Host header");
  // An empty value is not an absent header, and is refused too.
  ExpectMalformed("GET / HTTP/1.1\r\nHost:\r\nX: y\r\n\r\n", "is empty");
  // A header with an empty value before Host does not swallow Host's name.
  ExpectDone("GET / HTTP/1.1\r\nX:\r\nHost: example.com\r\n\r\n", Head("GET", "example.com", "/"));
}

TEST(HttpRequestHeadTest, RefusesConnect) {
  ExpectMalformed("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
                  "CONNECT is not relayed");
  ExpectMalformed("CONNECT [::1]:443 HTTP/1.0\r\n\r\n", "CONNECT is not relayed");
}

TEST(HttpRequestHeadTest, RefusesOtherVersions) {
  ExpectMalformed("GET / HTTP/2.0\r\nHost: example.com\r\n\r\n", "HTTP version 2.0");
  ExpectMalformed("GET /\r\n\r\n", "HTTP version 0.9");
  ExpectMalformed("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "not an HTTP/1.x request");
}

TEST(HttpRequestHeadTest, RefusesGarbage) {
  for (std::string wire : {
           std::string("\x16\x03\x01\x00\xf0\x01\x00\x00\xec", 9),  // a TLS ClientHello
           std::string("\0\0\0\0", 4),
           std::string("HELLO WORLD\r\n\r\n"),
           std::string("get / HTTP/1.1\r\nHost: example.com\r\n\r\n"),
           std::string("GET / HTTP/1.1\r\nHost: example.com\r\nBad\x01Name: x\r\n\r\n"),
           std::string("GET / FTP/1.1\r\n\r\n"),
       }) {
    Peeked p = Peek(wire);
    EXPECT_EQ(p.result, HeadResult::kMalformed) << wire;
    EXPECT_FALSE(p.error.empty());
    ExpectPrefixesAgree(wire);
  }
  // Headers http_parser refuses: both Content-Length and chunked (a smuggling classic).
  ExpectMalformed(
      "POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 3\r\n"
      "Transfer-Encoding: chunked\r\n\r\n",
      "not an HTTP/1.x request");
}

TEST(HttpRequestHeadTest, OnlyTheFirstPipelinedRequestCounts) {
  ExpectDone(
      "GET /a HTTP/1.1\r\nHost: allowed.com\r\n\r\n"
      "GET /b HTTP/1.1\r\nHost: evil.com\r\n\r\n",
      Head("GET", "allowed.com", "/a"));
  ExpectDone("GET /a HTTP/1.1\r\nHost: allowed.com\r\n\r\n\x16\x03 garbage",
             Head("GET", "allowed.com", "/a"));
}

TEST(HttpRequestHeadTest, CapsTheHeadAt16KiB) {
  const std::string start = "GET / HTTP/1.1\r\nHost: example.com\r\nX-Pad: ";
  const std::string end = "\r\n\r\n";
  // A head of exactly kMaxRequestHeadBytes is read.
  std::string fits =
      start + std::string(kMaxRequestHeadBytes - start.size() - end.size(), 'p') + end;
  ASSERT_EQ(fits.size(), kMaxRequestHeadBytes);
  Peeked p = Peek(fits);
  ASSERT_EQ(p.result, HeadResult::kDone) << p.error;
  EXPECT_EQ(p.head.host, "example.com");
  EXPECT_EQ(Peek(fits + "body").result, HeadResult::kDone);

  // One byte more is not, however much arrives.
  std::string over =
      start + std::string(kMaxRequestHeadBytes - start.size() - end.size() + 1, 'p') + end;
  EXPECT_EQ(Peek(over.substr(0, kMaxRequestHeadBytes - 1)).result, HeadResult::kNeedMore);
  for (size_t n : {kMaxRequestHeadBytes, over.size(), kMaxRequestHeadBytes * 4}) {
    std::string wire = over.substr(0, n);
    wire.resize(n, 'x');
    p = Peek(wire);
    EXPECT_EQ(p.result, HeadResult::kMalformed) << n;
    EXPECT_EQ(p.error, "HTTP request head larger than 16 KiB");
  }
}

TEST(HttpRequestHeadTest, EmptyInputNeedsMore) {
  EXPECT_EQ(Peek("").result, HeadResult::kNeedMore);
  EXPECT_EQ(Peek("\r\n").result, HeadResult::kNeedMore);  // RFC 9112 2.2: a leading empty line
  ExpectDone("\r\nGET / HTTP/1.1\r\nHost: example.com\r\n\r\n", Head("GET", "example.com", "/"));
}

TEST(HttpRequestHeadTest, CorruptingAnyByteKeepsPrefixesConsistent) {
  const std::string wire =
      "GET http://example.com:80/x HTTP/1.1\r\nHost: example.com:80\r\nAccept: */*\r\n\r\n";
  for (size_t i = 0; i < wire.size(); ++i) {
    for (char replacement : {' ', ':', '\r', '\n', '\0', 'H', '[', '\x80'}) {
      std::string corrupt = wire;
      corrupt[i] = replacement;
      Peeked whole = Peek(corrupt);
      for (size_t n = 0; n < corrupt.size(); ++n) {
        Peeked part = Peek(std::string_view(corrupt).substr(0, n));
        if (part.result == HeadResult::kNeedMore) continue;
        ASSERT_EQ(part.result, whole.result) << i << " " << n;
        ASSERT_EQ(part.error, whole.error) << i << " " << n;
        ASSERT_EQ(part.head, whole.head) << i << " " << n;
      }
    }
  }
}

TEST(HttpRequestHeadTest, NullErrorIsAllowed) {
  std::string wire = "\x16\x03";
  HttpRequestHead head;
  EXPECT_EQ(PeekHttpRequestHead(std::span<const uint8_t>(
                                    reinterpret_cast<const uint8_t*>(wire.data()), wire.size()),
                                &head, nullptr),
            HeadResult::kMalformed);
}

}  // namespace
}  // namespace airlock::net
