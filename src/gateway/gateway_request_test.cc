#include "src/gateway/gateway_request.h"

#include <gtest/gtest.h>

namespace airlock::gateway {
namespace {

constexpr char kDomain[] = "airlock.localhost";

GatewayRequest Parsed(absl::string_view head) {
  GatewayRequest r;
  std::string error;
  EXPECT_EQ(ParseGatewayRequest(head, kDomain, &r, &error), GatewayParse::kDone) << error;
  return r;
}

std::string Refused(absl::string_view head) {
  GatewayRequest r;
  std::string error;
  EXPECT_EQ(ParseGatewayRequest(head, kDomain, &r, &error), GatewayParse::kMalformed) << head;
  return error;
}

TEST(GatewayRequestTest, TheHostNamesThePortAndTheSession) {
  GatewayRequest r = Parsed(
      "GET /index.html?a=1 HTTP/1.1\r\nHost: 8000-0123456789ab.Airlock.Localhost:8790\r\n"
      "Accept: */*\r\n\r\nbody");
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/index.html?a=1");
  EXPECT_EQ(r.session_id, "0123456789ab");
  EXPECT_EQ(r.port, 8000);
  EXPECT_FALSE(r.by_header);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(r.query_token, "");
  EXPECT_EQ(r.target_without_token, "/index.html?a=1");
  EXPECT_EQ(r.head_bytes, absl::string_view("GET /index.html?a=1 HTTP/1.1\r\nHost: "
                                            "8000-0123456789ab.Airlock.Localhost:8790\r\n"
                                            "Accept: */*\r\n\r\n")
                              .size());
}

TEST(GatewayRequestTest, TheTokenComesOutOfTheQueryAndTheOtherParametersStay) {
  GatewayRequest r = Parsed(
      "GET /a?x=1&airlock_token=SECRET&y=2 HTTP/1.1\r\nHost: "
      "3000-0123456789ab.airlock.localhost\r\n"
      "\r\n");
  EXPECT_EQ(r.query_token, "SECRET");
  EXPECT_EQ(r.target_without_token, "/a?x=1&y=2");
  r = Parsed("GET /?airlock_token=T HTTP/1.1\r\nHost: 3000-0123456789ab.airlock.localhost\r\n\r\n");
  EXPECT_EQ(r.query_token, "T");
  EXPECT_EQ(r.target_without_token, "/");
}

TEST(GatewayRequestTest, TokensFromTheHeaderAndEveryCookie) {
  GatewayRequest r = Parsed(
      "GET / HTTP/1.1\nHost: 80-0123456789ab.airlock.localhost\nCookie: a=1; airlock_token=C1\n"
      "Cookie: airlock_token=C2\nX-Airlock-Token: H\n\n");
  EXPECT_EQ(r.tokens, (std::vector<std::string>{"H", "C1", "C2"}));
}

TEST(GatewayRequestTest, HeadersRouteWhenTheHostDoesNot) {
  GatewayRequest r = Parsed(
      "POST /api HTTP/1.1\r\nHost: 127.0.0.1:8790\r\nX-Airlock-Session: 0123456789ab\r\n"
      "X-Airlock-Port: 5000\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
  EXPECT_TRUE(r.by_header);
  EXPECT_EQ(r.session_id, "0123456789ab");
  EXPECT_EQ(r.port, 5000);
  EXPECT_TRUE(r.websocket);
}

TEST(GatewayRequestTest, AHostOfAnotherShapeRoutesNowhere) {
  for (const char* host :
       {"example.com", "8000-0123456789ab.other.test", "8000-0123456789AB.x",
        "08000-0123456789ab.airlock.localhost", "0-0123456789ab.airlock.localhost",
        "70000-0123456789ab.airlock.localhost", "8000-0123456789ab0.airlock.localhost",
        "a.8000-0123456789ab.airlock.localhost", "airlock.localhost", "[::1]:8790"}) {
    GatewayRequest r = Parsed(std::string("GET / HTTP/1.1\r\nHost: ") + host + "\r\n\r\n");
    EXPECT_EQ(r.session_id, "") << host;
    EXPECT_EQ(r.port, 0) << host;  // no half of a route is left behind
  }
}

TEST(GatewayRequestTest, WhatIsNotARequestHeadIsRefusedWithWhy) {
  EXPECT_NE(Refused("GET /\r\n\r\n").find("request line"), std::string::npos);
  EXPECT_NE(Refused("GET / HTTP/2\r\nHost: a\r\n\r\n").find("request line"), std::string::npos);
  EXPECT_NE(Refused("GET / HTTP/1.1\r\n\r\n").find("exactly one Host"), std::string::npos);
  EXPECT_NE(Refused("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").find("exactly one Host"),
            std::string::npos);
  EXPECT_NE(Refused("GET / HTTP/1.1\r\nHost : a\r\n\r\n").find("Name: value"), std::string::npos);
  EXPECT_NE(Refused("GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n").find("control"), std::string::npos);
  EXPECT_NE(
      Refused("GET / HTTP/1.1\r\nHost: a\r\nX-Airlock-Session: 0123456789ab\r\n\r\n").find("both"),
      std::string::npos);
  EXPECT_NE(Refused("GET / HTTP/1.1\r\nHost: a\r\nX-Airlock-Session: nope\r\nX-Airlock-Port: "
                    "80\r\n\r\n")
                .find("not a session id"),
            std::string::npos);
  EXPECT_NE(Refused(std::string(kMaxGatewayHeadBytes, 'G')).find("longer than"), std::string::npos);
}

TEST(GatewayRequestTest, APrefixNeedsMoreAndGivesTheSameAnswerOnceWhole) {
  std::string head =
      "GET /x HTTP/1.1\r\nHost: 8000-0123456789ab.airlock.localhost\r\nCookie: airlock_token=T"
      "\r\n\r\n";
  GatewayRequest r;
  std::string error;
  for (size_t n = 0; n < head.size(); ++n) {
    EXPECT_EQ(ParseGatewayRequest(head.substr(0, n), kDomain, &r, &error), GatewayParse::kNeedMore)
        << n;
  }
  EXPECT_EQ(ParseGatewayRequest(head + "more bytes", kDomain, &r, &error), GatewayParse::kDone);
  EXPECT_EQ(r.head_bytes, head.size());
}

TEST(GatewayRequestTest, ChunkedBodiesAreDecodedWithinTheirCap) {
  std::string body, error;
  std::string wire = "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n";
  for (size_t n = 0; n < wire.size(); ++n) {
    EXPECT_EQ(DecodeChunked(wire.substr(0, n), 100, &body, &error), GatewayParse::kNeedMore) << n;
  }
  ASSERT_EQ(DecodeChunked(wire, 100, &body, &error), GatewayParse::kDone) << error;
  EXPECT_EQ(body, "hello world");
  EXPECT_EQ(DecodeChunked(wire, 8, &body, &error), GatewayParse::kMalformed);
  EXPECT_NE(error.find("larger than 8"), std::string::npos);
  EXPECT_EQ(DecodeChunked("zz\r\n", 100, &body, &error), GatewayParse::kMalformed);
  EXPECT_EQ(DecodeChunked("2\r\nabX\r\n", 100, &body, &error), GatewayParse::kMalformed);
}

TEST(GatewayRequestTest, AChunkedStreamIsDecodedPieceByPieceAsItArrives) {
  std::string wire = "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\nnext";
  // Split at every point: the same data, handed on as it comes, and done at the end.
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    ChunkedDecoder decoder;
    std::string data, error;
    GatewayParse first = decoder.Add(wire.substr(0, cut), &data, &error);
    GatewayParse second = decoder.Add(wire.substr(cut), &data, &error);
    EXPECT_EQ(data, "hello world") << cut;
    EXPECT_EQ(second, GatewayParse::kDone) << cut << error;
    if (cut < wire.size() - 4) EXPECT_EQ(first, GatewayParse::kNeedMore) << cut;
  }
  ChunkedDecoder partial;
  std::string data, error;
  EXPECT_EQ(partial.Add("5\r\nhel", &data, &error), GatewayParse::kNeedMore);
  EXPECT_EQ(data, "hel");  // part of a chunk, at once
  for (const char* bad : {"zz\r\n", "2\r\nabX\r\n", "123456789\r\n"}) {
    ChunkedDecoder d;
    EXPECT_EQ(d.Add(bad, &data, &error), GatewayParse::kMalformed) << bad;
    EXPECT_EQ(d.Add("0\r\n\r\n", &data, &error), GatewayParse::kMalformed);  // stays so
  }
  ChunkedDecoder long_line;
  EXPECT_EQ(long_line.Add(std::string(2000, '1'), &data, &error), GatewayParse::kMalformed);
}

TEST(GatewayRequestTest, ExposureHostIsWhatRoutes) {
  std::string host = ExposureHost(8000, "0123456789ab", kDomain);
  EXPECT_EQ(host, "8000-0123456789ab.airlock.localhost");
  GatewayRequest r = Parsed("GET / HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
  EXPECT_EQ(r.port, 8000);
}

}  // namespace
}  // namespace airlock::gateway
