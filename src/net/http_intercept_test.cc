#include "src/net/http_intercept.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace airlock::net {
namespace {

constexpr char kPlaceholder[] = "AIRLOCK_SECRET_PLACEHOLDER_OPENAI_0123456789abcdef";
constexpr char kValue[] = "sk-real-value-that-must-never-reach-the-guest";
constexpr char kOtherPlaceholder[] = "AIRLOCK_SECRET_PLACEHOLDER_GH_fedcba9876543210";

std::vector<InterceptedSecret> Secrets(bool body = false) {
  return {{"OPENAI_API_KEY", kPlaceholder, kValue, body, {"authorization", "x-api-key"}},
          {"GH_TOKEN", kOtherPlaceholder, "", false, {"authorization"}}};
}

struct Sent {
  absl::Status status;
  std::string upstream, guest;
};

Sent Guest(HttpIntercept& h, absl::string_view bytes) {
  Sent s;
  s.status = h.FromGuest(bytes, &s.upstream, &s.guest);
  return s;
}

std::string Upstream(HttpIntercept& h, absl::string_view bytes, absl::Status* status = nullptr) {
  std::string guest;
  absl::Status s = h.FromUpstream(bytes, &guest);
  if (status != nullptr) *status = s;
  EXPECT_TRUE(status != nullptr || s.ok()) << s;
  return guest;
}

TEST(HttpInterceptTest, SwapsThePlaceholderInHeadersAndForcesIdentityEncoding) {
  HttpIntercept h("api.openai.com", 443, Secrets());
  Sent s = Guest(h, absl::StrCat("GET /v1/models HTTP/1.1\r\nHost: api.openai.com\r\n"
                                 "Authorization: Bearer ",
                                 kPlaceholder, "\r\nAccept-Encoding: gzip, br\r\nX-Api-Key: ",
                                 kPlaceholder, "\r\n\r\n"));
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.upstream, absl::StrCat("GET /v1/models HTTP/1.1\r\nHost: api.openai.com\r\n"
                                     "Authorization: Bearer ",
                                     kValue, "\r\nX-Api-Key: ", kValue,
                                     "\r\nAccept-Encoding: identity\r\n\r\n"));
  EXPECT_TRUE(s.guest.empty());
  std::vector<InterceptEvent> events = h.TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[0].used);
  EXPECT_EQ(events[0].where, "header Authorization");
  EXPECT_TRUE(h.GuestIdle());
}

// The value goes only into the headers its binding names: a placeholder the guest puts in a
// header a server might log or reflect (a Referer, a custom one) goes out unchanged, and the
// network log says how to allow it.
TEST(HttpInterceptTest, AHeaderTheBindingDoesNotNameGetsNoValue) {
  HttpIntercept h("api.openai.com", 443, Secrets());
  Sent s = Guest(h, absl::StrCat("GET / HTTP/1.1\r\nHost: api.openai.com\r\nReferer: https://x/",
                                 kPlaceholder, "\r\nCookie: k=", kPlaceholder, "\r\n\r\n"));
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.upstream.find(kValue), std::string::npos) << s.upstream;
  EXPECT_NE(s.upstream.find(absl::StrCat("Referer: https://x/", kPlaceholder)), std::string::npos);
  std::vector<InterceptEvent> events = h.TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_FALSE(events[0].used);
  EXPECT_EQ(events[0].where,
            "in header Referer, which its binding does not name (bind it with ?header=referer to "
            "send it there); sent unchanged");
}

TEST(HttpInterceptTest, SwapsInsideBasicCredentialsAndMasksTheirEcho) {
  HttpIntercept h("api.openai.com", 443, Secrets());
  std::string encoded = absl::Base64Escape(absl::StrCat("user:", kPlaceholder));
  std::string real = absl::Base64Escape(absl::StrCat("user:", kValue));
  Sent s = Guest(h, absl::StrCat("GET / HTTP/1.1\r\nHost: api.openai.com\r\nAuthorization: Basic ",
                                 encoded, "\r\n\r\n"));
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_NE(s.upstream.find("Authorization: Basic " + real), std::string::npos) << s.upstream;
  std::string body = absl::StrCat("{\"auth\":\"Basic ", real, "\"}");
  std::string guest = Upstream(
      h, absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body.size(), "\r\n\r\n", body));
  EXPECT_EQ(guest.find(real), std::string::npos) << guest;
  EXPECT_NE(guest.find(encoded), std::string::npos) << guest;
}

TEST(HttpInterceptTest, MasksAnEchoedSecretAcrossReadsAndReframesTheBody) {
  HttpIntercept h("api.openai.com", 443, Secrets());
  ASSERT_TRUE(Guest(h, "GET /echo HTTP/1.1\r\nHost: api.openai.com\r\n\r\n").status.ok());
  std::string body = absl::StrCat("you sent ", kValue, " ok");
  std::string response = absl::StrCat("HTTP/1.1 200 OK\r\nX-Echo: ", kValue,
                                      "\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
  // Byte by byte, so the value is split across every possible pair of reads.
  std::string guest;
  for (char c : response) guest += Upstream(h, std::string(1, c));
  EXPECT_EQ(guest.find(kValue), std::string::npos) << guest;
  EXPECT_NE(guest.find(absl::StrCat("X-Echo: ", kPlaceholder)), std::string::npos);
  // The placeholder is longer than the value: the body is re-framed as chunks.
  EXPECT_NE(guest.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << guest;
  EXPECT_EQ(guest.find("Content-Length"), std::string::npos) << guest;
  std::string dechunked;
  std::string rest = guest.substr(guest.find("\r\n\r\n") + 4);
  while (true) {
    size_t eol = rest.find("\r\n");
    size_t n = std::stoul(rest.substr(0, eol), nullptr, 16);
    if (n == 0) break;
    dechunked += rest.substr(eol + 2, n);
    rest = rest.substr(eol + 2 + n + 2);
  }
  EXPECT_EQ(dechunked, absl::StrCat("you sent ", kPlaceholder, " ok"));
  bool masked = false;
  for (const InterceptEvent& e : h.TakeEvents()) masked |= !e.used && e.secret == "OPENAI_API_KEY";
  EXPECT_TRUE(masked);
}

TEST(HttpInterceptTest, MasksTheValueHexBase64AndUrlEncodedAtAnyOffset) {
  std::string value = "tok/with+reserved=chars-0123456789";
  std::string placeholder(value.size(), 'P');
  HttpIntercept h("api.test", 443, {{"K", placeholder, value, false, {"authorization"}}});
  ASSERT_TRUE(Guest(h, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n").status.ok());
  std::string hex = absl::BytesToHexString(value);
  std::string url = "tok%2Fwith%2Breserved%3Dchars-0123456789";
  std::string body = absl::StrCat(hex, " ", absl::AsciiStrToUpper(hex), " ", url, " ");
  // Base64 of the value inside longer texts, at each alignment, both alphabets.
  for (const char* before : {"", "a", "ab"}) {
    absl::StrAppend(&body, absl::Base64Escape(absl::StrCat(before, value, "xyz")), " ",
                    absl::WebSafeBase64Escape(absl::StrCat(before, value, "!")), " ");
  }
  std::string guest = Upstream(
      h, absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body.size(), "\r\n\r\n", body));
  EXPECT_EQ(guest.find(hex), std::string::npos) << guest;
  EXPECT_EQ(guest.find(absl::AsciiStrToUpper(hex)), std::string::npos) << guest;
  EXPECT_EQ(guest.find(url), std::string::npos) << guest;
  EXPECT_NE(guest.find(absl::BytesToHexString(placeholder)), std::string::npos) << guest;
  for (size_t k = 0; k < 3; ++k) {
    std::string aligned = std::string(k, 'a') + value;
    EXPECT_EQ(guest.find(absl::Base64Escape(aligned).substr(4, 24)), std::string::npos) << k;
    EXPECT_EQ(guest.find(absl::WebSafeBase64Escape(aligned).substr(4, 24)), std::string::npos);
  }
  // What the guest decodes holds no more than a few bits of the value at the edges.
  for (absl::string_view word : absl::StrSplit(guest.substr(guest.find("\r\n\r\n") + 4), ' ')) {
    std::string decoded;
    if (absl::Base64Unescape(word, &decoded) || absl::WebSafeBase64Unescape(word, &decoded)) {
      EXPECT_EQ(decoded.find("with+reserved"), std::string::npos) << word;
    }
  }
  // The URL-encoded placeholder is as long as the encoded value: Content-Length stays.
  EXPECT_NE(guest.find(absl::StrCat("Content-Length: ", body.size())), std::string::npos) << guest;
}

TEST(HttpInterceptTest, ARequestThatCarriesTheValueAsksForTheWholeResponse) {
  HttpIntercept h("api.test", 443, Secrets());
  Sent s = Guest(h, absl::StrCat("GET /echo HTTP/1.1\r\nHost: api.test\r\nRange: bytes=3-5\r\n"
                                 "If-Range: \"x\"\r\nAuthorization: Bearer ",
                                 kPlaceholder, "\r\n\r\n"));
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.upstream.find("Range"), std::string::npos) << s.upstream;
  bool reported = false;
  for (const InterceptEvent& e : h.TakeEvents()) {
    reported |= e.secret == "OPENAI_API_KEY" && e.where.find("Range left out") == 0;
  }
  EXPECT_TRUE(reported);
  // Without the value, a Range goes as it came.
  ASSERT_TRUE(Upstream(h, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").size() > 0);
  s = Guest(h, "GET /file HTTP/1.1\r\nHost: api.test\r\nRange: bytes=3-5\r\n\r\n");
  EXPECT_NE(s.upstream.find("Range: bytes=3-5"), std::string::npos) << s.upstream;
}

TEST(HttpInterceptTest, KeepsContentLengthWhenThePlaceholderIsAsLongAsTheValue) {
  std::string placeholder(sizeof(kValue) - 1, 'P');
  HttpIntercept h("api.test", 443, {{"K", placeholder, kValue, false}});
  ASSERT_TRUE(Guest(h, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n").status.ok());
  std::string guest = Upstream(
      h,
      absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", sizeof(kValue) - 1, "\r\n\r\n", kValue));
  EXPECT_EQ(guest, absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", sizeof(kValue) - 1,
                                "\r\n\r\n", placeholder));
}

TEST(HttpInterceptTest, MasksChunkedAndCloseDelimitedResponsesAndKeepsAlive) {
  HttpIntercept h("api.test", 443, Secrets());
  std::string value = kValue;
  ASSERT_TRUE(Guest(h,
                    "GET /a HTTP/1.1\r\nHost: api.test\r\n\r\n"
                    "GET /b HTTP/1.1\r\nHost: api.test\r\n\r\n")
                  .status.ok());
  std::string guest =
      Upstream(h, absl::StrCat("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "5\r\n",
                               value.substr(0, 5), "\r\n", absl::Hex(value.size() - 5), "\r\n",
                               value.substr(5), "\r\n0\r\nX-Trailer: ", value, "\r\n\r\n"));
  EXPECT_EQ(guest.find(kValue), std::string::npos) << guest;
  EXPECT_NE(guest.find(kPlaceholder), std::string::npos) << guest;
  EXPECT_NE(guest.find(absl::StrCat("X-Trailer: ", kPlaceholder, "\r\n\r\n")), std::string::npos);
  // The second response has no length: it ends with the connection.
  guest = Upstream(h, absl::StrCat("HTTP/1.1 200 OK\r\n\r\nabc", value.substr(0, 10)));
  EXPECT_EQ(guest, "HTTP/1.1 200 OK\r\n\r\nabc");
  guest = Upstream(h, value.substr(10));
  std::string end;
  ASSERT_TRUE(h.UpstreamEnded(&end).ok());
  EXPECT_EQ(guest + end, kPlaceholder);
}

TEST(HttpInterceptTest, BodiesStayClosedUnlessTheBindingOpensThem) {
  std::string body = absl::StrCat("{\"key\":\"", kPlaceholder, "\"}");
  std::string request = absl::StrCat(
      "POST /v1 HTTP/1.1\r\nHost: api.test\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
  {
    HttpIntercept h("api.test", 443, Secrets(false));
    Sent s = Guest(h, request);
    ASSERT_TRUE(s.status.ok()) << s.status;
    EXPECT_EQ(s.upstream.find(kValue), std::string::npos);
    EXPECT_NE(s.upstream.find(body), std::string::npos);
    std::vector<InterceptEvent> events = h.TakeEvents();
    ASSERT_EQ(events.size(), 1u);
    EXPECT_FALSE(events[0].used);
    EXPECT_NE(events[0].where.find("?body"), std::string::npos) << events[0].where;
  }
  {
    HttpIntercept h("api.test", 443, Secrets(true));
    // Chunked, with Expect: the interceptor answers 100 itself and sends a Content-Length.
    std::string chunked = absl::StrCat(
        "POST /v1 HTTP/1.1\r\nHost: api.test\r\nExpect: 100-continue\r\n"
        "Transfer-Encoding: chunked\r\n\r\n",
        absl::Hex(10), "\r\n", body.substr(0, 10), "\r\n", absl::Hex(body.size() - 10), "\r\n",
        body.substr(10), "\r\n0\r\n\r\n");
    Sent s = Guest(h, chunked.substr(0, 90));
    ASSERT_TRUE(s.status.ok()) << s.status;
    EXPECT_EQ(s.guest, "HTTP/1.1 100 Continue\r\n\r\n");
    EXPECT_TRUE(s.upstream.empty());
    Sent rest = Guest(h, chunked.substr(90));
    ASSERT_TRUE(rest.status.ok()) << rest.status;
    std::string real = absl::StrCat("{\"key\":\"", kValue, "\"}");
    EXPECT_EQ(rest.upstream,
              absl::StrCat("POST /v1 HTTP/1.1\r\nHost: api.test\r\nAccept-Encoding: identity\r\n"
                           "Content-Length: ",
                           real.size(), "\r\n\r\n", real));
  }
}

TEST(HttpInterceptTest, OtherSecretsPlaceholdersPassUnchangedWithAWarning) {
  HttpIntercept h("api.test", 443, Secrets());
  Sent s = Guest(h, absl::StrCat("GET /?t=", kOtherPlaceholder,
                                 " HTTP/1.1\r\nHost: api.test\r\n"
                                 "Authorization: token ",
                                 kOtherPlaceholder, "\r\n\r\n"));
  ASSERT_TRUE(s.status.ok());
  EXPECT_NE(s.upstream.find(absl::StrCat("token ", kOtherPlaceholder)), std::string::npos);
  std::vector<InterceptEvent> events = h.TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  for (const InterceptEvent& e : events) {
    EXPECT_EQ(e.secret, "GH_TOKEN");
    EXPECT_FALSE(e.used);
    EXPECT_NE(e.where.find("not bound to api.test"), std::string::npos) << e.where;
  }
}

// Each of these would let the proxy and the server disagree on where a request ends, or send
// the secret somewhere else: refused with an answer, and nothing more goes upstream.
TEST(HttpInterceptTest, RefusesSmugglingFrontingAndUpgrades) {
  struct Case {
    std::string request;
    std::string status;
    bool head_sent = false;  // refused in the body, after the head went up
  };
  std::string long_line(kMaxHttpLineBytes + 10, 'a');
  std::vector<Case> cases = {
      {"POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked"
       "\r\n\r\n",
       "400"},
      {"POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
       "400"},
      {"POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: +5\r\n\r\n", "400"},
      {"POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "501"},
      {"GET / HTTP/1.1\r\nHost: api.test\r\nX-A: 1\r\n folded\r\n\r\n", "400"},
      {"GET / HTTP/1.1\nHost: api.test\n\n", "400"},
      {"GET / HTTP/1.1\r\nHost : api.test\r\n\r\n", "400"},
      {"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n", "421"},
      {"GET / HTTP/1.1\r\nHost: api.test\r\nHost: evil.test\r\n\r\n", "400"},
      {"GET https://evil.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n", "421"},
      {"GET / HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\n\r\n", "501"},
      {"GET / HTTP/1.0\r\nHost: api.test\r\n\r\n", "505"},
      {"CONNECT api.test:443 HTTP/1.1\r\nHost: api.test\r\n\r\n", "405"},
      {"GET / HTTP/1.1\r\nHost: api.test\r\nX-Long: " + long_line + "\r\n\r\n", "431"},
      {"POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "400",
       true},
  };
  for (const Case& c : cases) {
    HttpIntercept h("api.test", 443, Secrets());
    Sent s = Guest(h, c.request);
    EXPECT_FALSE(s.status.ok()) << c.request;
    EXPECT_EQ(s.guest.substr(0, 12), "HTTP/1.1 " + c.status) << c.request << s.guest;
    EXPECT_EQ(s.upstream.find("\r\n\r\n") != std::string::npos, c.head_sent) << c.request;
    EXPECT_FALSE(Guest(h, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n").status.ok());
  }
}

TEST(HttpInterceptTest, AChunkedBodyEndsWhereItsChunksSayNotWhereAnotherRequestBegins) {
  HttpIntercept h("api.test", 443, Secrets());
  // The smuggled request rides in chunk data: it is body, never a request with a swapped header.
  std::string inner = absl::StrCat(
      "GET /x HTTP/1.1\r\nHost: api.test\r\nAuthorization: ", kPlaceholder, "\r\n\r\n");
  Sent s = Guest(h, absl::StrCat("POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked"
                                 "\r\n\r\n",
                                 absl::Hex(inner.size()), "\r\n", inner, "\r\n0\r\n\r\n"));
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.upstream.find(kValue), std::string::npos) << s.upstream;
  EXPECT_TRUE(h.GuestIdle());
}

TEST(HttpInterceptTest, BadResponsesEndInA502BeforeAnyOfThemReachesTheGuest) {
  std::vector<std::string> responses = {
      "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
      "SPDY/3 200 OK\r\n\r\n",
  };
  for (const std::string& r : responses) {
    HttpIntercept h("api.test", 443, Secrets());
    ASSERT_TRUE(Guest(h, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n").status.ok());
    absl::Status status;
    std::string guest = Upstream(h, r, &status);
    EXPECT_FALSE(status.ok()) << r;
    EXPECT_EQ(guest.substr(0, 12), "HTTP/1.1 502") << r;
  }
  HttpIntercept h("api.test", 443, Secrets());
  absl::Status status;
  Upstream(h, "HTTP/1.1 200 OK\r\n\r\n", &status);
  EXPECT_FALSE(status.ok()) << "a response to no request";
}

TEST(HttpInterceptTest, ResponsesToHeadAndInterimResponsesHaveNoBody) {
  // A placeholder as long as its value: lengths are kept as the server sent them.
  HttpIntercept h("api.test", 443, {{"K", std::string(sizeof(kValue) - 1, 'P'), kValue, false}});
  ASSERT_TRUE(Guest(h, "HEAD / HTTP/1.1\r\nHost: api.test\r\n\r\n").status.ok());
  ASSERT_TRUE(Guest(h, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n").status.ok());
  std::string guest = Upstream(h,
                               "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
                               "HTTP/1.1 100 Continue\r\n\r\n"
                               "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
  EXPECT_EQ(guest,
            "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
            "HTTP/1.1 100 Continue\r\n\r\n"
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
  std::string end;
  EXPECT_TRUE(h.UpstreamEnded(&end).ok());
}

TEST(HttpInterceptTest, AResponseCutShortIsAnError) {
  HttpIntercept h("api.test", 443, Secrets());
  ASSERT_TRUE(Guest(h, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n").status.ok());
  Upstream(h, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
  std::string end;
  EXPECT_FALSE(h.UpstreamEnded(&end).ok());
}

}  // namespace
}  // namespace airlock::net
