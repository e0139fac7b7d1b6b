#include "src/net/http_request_gate.h"

#include <gtest/gtest.h>

#include <string>

namespace airlock::net {
namespace {

constexpr char kGet[] = "GET / HTTP/1.1\r\nHost: web.test\r\n\r\n";

TEST(HttpRequestGateTest, KeptAliveRequestsToTheAllowedHostAllPass) {
  HttpRequestGate gate("web.test");
  std::string forward;
  std::string post = "POST /up HTTP/1.1\r\nHost: WEB.test:80\r\nContent-Length: 5\r\n\r\nhello";
  std::string chunked =
      "POST /c HTTP/1.1\r\nHost: web.test\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4\r\nGET \r\n0\r\n\r\n";
  std::string all = std::string(kGet) + post + chunked + kGet;
  // Byte by byte: a head is held until it is whole, a body passes as it comes.
  for (char c : all) ASSERT_TRUE(gate.FromGuest(std::string(1, c), &forward).ok()) << forward;
  EXPECT_EQ(forward, all);
}

TEST(HttpRequestGateTest, ALaterRequestForAnotherHostEndsTheConnectionBeforeItsHeadPasses) {
  // Pipelined in one write, or kept alive after the first answer: the same.
  HttpRequestGate gate("web.test");
  std::string forward;
  std::string second = "GET /secret HTTP/1.1\r\nHost: other.test\r\n\r\n";
  absl::Status s = gate.FromGuest(std::string(kGet) + second, &forward);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "a request on it names other.test in its HTTP Host");
  EXPECT_EQ(forward, kGet);  // the first request only
  forward.clear();
  EXPECT_FALSE(gate.FromGuest(kGet, &forward).ok());
  EXPECT_TRUE(forward.empty());

  // A body's bytes are never read as a request, and a head hidden in a body is not one.
  HttpRequestGate body_gate("web.test");
  std::string smuggle =
      "POST / HTTP/1.1\r\nHost: web.test\r\nContent-Length: " + std::to_string(second.size()) +
      "\r\n\r\n" + second;
  forward.clear();
  EXPECT_TRUE(body_gate.FromGuest(smuggle, &forward).ok());
  EXPECT_EQ(forward, smuggle);

  // Something that is not a request after the first.
  HttpRequestGate junk_gate("web.test");
  forward.clear();
  s = junk_gate.FromGuest(std::string(kGet) + "\x16\x03\x01 not http\r\n\r\n", &forward);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(forward, kGet);
}

TEST(HttpRequestGateTest, AnUpgradeOpensTheConnectionOnlyWhenTheServerAgrees) {
  std::string upgrade =
      "GET /ws HTTP/1.1\r\nHost: web.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
  std::string frames = "\x81\x05hello GET / HTTP/1.1\r\nHost: other.test\r\n\r\n";
  HttpRequestGate gate("web.test");
  std::string forward;
  ASSERT_TRUE(gate.FromGuest(upgrade + frames, &forward).ok());
  EXPECT_EQ(forward, upgrade);  // the frames wait for the server's answer
  EXPECT_TRUE(gate.waiting_for_upgrade());
  forward.clear();
  ASSERT_TRUE(gate.FromServer("HTTP/1.1 1", &forward).ok());
  EXPECT_TRUE(forward.empty());
  ASSERT_TRUE(gate.FromServer("01 Switching Protocols\r\n\r\n", &forward).ok());
  EXPECT_EQ(forward, frames);  // no longer HTTP: opaque from here
  forward.clear();
  ASSERT_TRUE(gate.FromGuest("more", &forward).ok());
  EXPECT_EQ(forward, "more");

  // Refused: what followed is read as requests again, and checked.
  HttpRequestGate refused("web.test");
  forward.clear();
  ASSERT_TRUE(
      refused.FromGuest(upgrade + "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n", &forward).ok());
  forward.clear();
  absl::Status s = refused.FromServer("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", &forward);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(forward.empty());

  // Waiting for the answer holds at most 64 KiB.
  HttpRequestGate flood("web.test");
  forward.clear();
  ASSERT_TRUE(flood.FromGuest(upgrade, &forward).ok());
  EXPECT_FALSE(flood.FromGuest(std::string(70000, 'x'), &forward).ok());
}

}  // namespace
}  // namespace airlock::net
