// Guest ports as URLs: `airlock expose` and airlockd's HTTP gateway, used as a browser and a
// program would (a web server's listing, a WebSocket echo, tokens, cookies, other tenants, a
// closed port, a paused session woken by a request).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/common/unique_fd.h"
#include "src/testing/test_util.h"
#include "tests/cli_runner.h"

namespace airlock {
namespace {

const RunAs kOtherTenant{61008, 61008};

// An exposure's URL split up: http://HOST:PORT/?airlock_token=TOKEN.
struct Url {
  std::string host;  // with :PORT, as a Host header names it
  uint16_t port = 0;
  std::string token;
};

Url Expose(const std::string& id, const std::string& port, bool is_public = false) {
  std::vector<std::string> args = {"expose", id, port};
  if (is_public) args.push_back("--public");
  Result r = RunAirlock(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Url url;
  absl::string_view rest = absl::StripTrailingAsciiWhitespace(r.out);
  EXPECT_TRUE(absl::ConsumePrefix(&rest, "http://")) << r.out;
  size_t slash = rest.find('/');
  url.host = std::string(rest.substr(0, slash));
  uint32_t n = 0;
  EXPECT_TRUE(absl::SimpleAtoi(url.host.substr(url.host.rfind(':') + 1), &n)) << r.out;
  url.port = static_cast<uint16_t>(n);
  rest.remove_prefix(slash);
  if (absl::ConsumePrefix(&rest, "/?airlock_token=")) url.token = std::string(rest);
  EXPECT_EQ(url.token.empty(), is_public) << r.out;
  return url;
}

void SendAll(int fd, const std::string& bytes) {
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    done += static_cast<size_t>(n);
  }
}

// One request on a connection of its own (Connection: close), and everything that came back.
std::string Request(uint16_t port, const std::string& head) {
  UniqueFd fd = testing::ConnectLoopback(port);
  SendAll(fd.get(), head);
  std::string got;
  char buf[65536];
  for (ssize_t n; (n = recv(fd.get(), buf, sizeof(buf), 0)) > 0;) got.append(buf, n);
  return got;
}

std::string Get(const Url& url, const std::string& target, const std::string& headers = "") {
  return Request(url.port, absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: ", url.host,
                                        "\r\nConnection: close\r\n", headers, "\r\n"));
}

bool Status(const std::string& response, int code) {
  return absl::StartsWith(response, absl::StrCat("HTTP/1.1 ", code, " ")) ||
         absl::StartsWith(response, absl::StrCat("HTTP/1.0 ", code, " "));
}

// A client's WebSocket frame: FIN, text, masked.
std::string MaskedFrame(const std::string& text) {
  std::string frame = {'\x81', static_cast<char>(0x80 | text.size())};
  const char mask[4] = {0x11, 0x22, 0x33, 0x44};
  frame.append(mask, 4);
  for (size_t i = 0; i < text.size(); ++i) frame.push_back(text[i] ^ mask[i % 4]);
  return frame;
}

// Reads until `needle` came or the connection ended.
std::string ReadUntil(int fd, const std::string& needle) {
  std::string got;
  char buf[4096];
  while (got.find(needle) == std::string::npos) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// A WebSocket echo server with Python's standard library alone: the handshake, then each text
// frame back as "echo:" + text.
constexpr char kEchoServer[] = R"(cat > /root/ws.py <<'EOF'
import base64, hashlib, socket, threading
def serve(c):
    head = b''
    while b'\r\n\r\n' not in head:
        head += c.recv(4096)
    key = [l.split(b':', 1)[1].strip() for l in head.split(b'\r\n') if l.lower().startswith(b'sec-websocket-key:')][0]
    accept = base64.b64encode(hashlib.sha1(key + b'258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest())
    c.sendall(b'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ' + accept + b'\r\n\r\n')
    while True:
        h = c.recv(2)
        if len(h) < 2: return
        n = h[1] & 0x7f
        mask = c.recv(4)
        data = b''
        while len(data) < n: data += c.recv(n - len(data))
        text = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        reply = b'echo:' + text
        c.sendall(bytes([0x81, len(reply)]) + reply)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 9000)); s.listen()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
)";

TEST(GatewayTest, ExposedPortsAreUrlsWithTokensCookiesAndWebSockets) {
  Result r = RunAirlock({"session", "create"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string id(absl::StripTrailingAsciiWhitespace(r.out));
  // The web server started detached (`exec -d`), the WebSocket one by the shell.
  ExecScript(id, std::string("mkdir -p /srv && echo hello > /srv/hello.txt && ") + kEchoServer +
                     "(setsid python3 /root/ws.py </dev/null >/dev/null 2>&1 &)");
  r = RunAirlock({"exec", "-d", "-w", "/srv", id, "--", "python3", "-m", "http.server", "8000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(", detached; its output goes to /var/log/airlock/exec-"), std::string::npos)
      << r.err;
  std::string log = r.err.substr(r.err.find("/var/log/airlock/"));
  log = std::string(absl::StripTrailingAsciiWhitespace(log));
  ExecScript(id,
             "until python3 -c \"import socket; socket.create_connection(('127.0.0.1', 8000)); "
             "socket.create_connection(('127.0.0.1', 9000))\" 2>/dev/null; do sleep 0.2; done");

  Url web = Expose(id, "8000");
  EXPECT_EQ(web.host.substr(0, web.host.find(':')), "8000-" + id + ".airlock.localhost");
  // A browser's first visit: the token goes into a cookie of this host, out of the address.
  std::string first = Get(web, "/?airlock_token=" + web.token);
  ASSERT_TRUE(Status(first, 302)) << first;
  EXPECT_NE(first.find("\r\nLocation: /\r\n"), std::string::npos) << first;
  EXPECT_NE(first.find("Set-Cookie: airlock_token=" + web.token + "; Path=/; HttpOnly"),
            std::string::npos)
      << first;
  std::string listing = Get(web, "/", "Cookie: airlock_token=" + web.token + "\r\n");
  EXPECT_TRUE(Status(listing, 200)) << listing;
  EXPECT_NE(listing.find("hello.txt"), std::string::npos) << listing;
  // A program: the token as a header, routed by header where it cannot use the name.
  std::string file =
      Request(web.port, absl::StrCat("GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                     "X-Airlock-Session: ",
                                     id, "\r\nX-Airlock-Port: 8000\r\nX-Airlock-Token: ", web.token,
                                     "\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(Status(file, 200)) << file;
  EXPECT_TRUE(absl::EndsWith(file, "\r\n\r\nhello\n")) << file;

  // No token, a wrong one, another tenant's: refused, with no byte of the guest's server.
  for (const std::string& headers : {std::string(), std::string("X-Airlock-Token: nope\r\n"),
                                     "Cookie: airlock_token=" + web.token.substr(1) + "x\r\n"}) {
    std::string refused = Get(web, "/hello.txt", headers);
    EXPECT_TRUE(Status(refused, 401)) << refused;
    EXPECT_EQ(refused.find("hello\n"), std::string::npos) << refused;
    EXPECT_EQ(refused.find("Server: SimpleHTTP"), std::string::npos) << refused;
  }
  r = RunAirlock({"expose", id, "8000"}, "", kOtherTenant);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no session " + id), std::string::npos) << r.err;
  r = RunAirlock({"session", "create"}, "", kOtherTenant);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string other(absl::StripTrailingAsciiWhitespace(r.out));
  r = RunAirlock({"expose", other, "8000"}, "", kOtherTenant);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string other_token = r.out.substr(r.out.find("airlock_token=") + 14);
  other_token = std::string(absl::StripTrailingAsciiWhitespace(other_token));
  std::string crossed = Get(web, "/hello.txt", "X-Airlock-Token: " + other_token + "\r\n");
  EXPECT_TRUE(Status(crossed, 401)) << crossed;
  EXPECT_EQ(RunAirlock({"rm", other}, "", kOtherTenant).exit_code, 0);
  // A port nobody exposed, and one exposed where nothing listens: the gateway says which.
  EXPECT_TRUE(Status(Request(web.port, absl::StrCat("GET / HTTP/1.1\r\nHost: 7-", id,
                                                    ".airlock.localhost\r\n\r\n")),
                     404));
  Url closed = Expose(id, "9999");
  std::string bad_gateway = Get(closed, "/", "X-Airlock-Token: " + closed.token + "\r\n");
  EXPECT_TRUE(Status(bad_gateway, 502)) << bad_gateway;
  EXPECT_NE(bad_gateway.find("nothing accepts connections on port 9999"), std::string::npos)
      << bad_gateway;

  // A WebSocket through the gateway, both ways, twice.
  Url ws = Expose(id, "9000");
  UniqueFd socket = testing::ConnectLoopback(ws.port);
  SendAll(socket.get(),
          absl::StrCat("GET /chat?airlock_token=", ws.token, " HTTP/1.1\r\nHost: ", ws.host,
                       "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                       "Sec-WebSocket-Version: 13\r\n\r\n"));
  std::string handshake = ReadUntil(socket.get(), "\r\n\r\n");
  EXPECT_TRUE(Status(handshake, 101)) << handshake;
  EXPECT_NE(handshake.find("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), std::string::npos) << handshake;
  SendAll(socket.get(), MaskedFrame("ping"));
  EXPECT_NE(ReadUntil(socket.get(), "echo:ping").find("echo:ping"), std::string::npos);
  SendAll(socket.get(), MaskedFrame("again"));
  EXPECT_NE(ReadUntil(socket.get(), "echo:again").find("echo:again"), std::string::npos);

  // A pause cuts the open WebSocket (it does not refuse the pause), and a request resumes the
  // session, its servers still there.
  r = RunAirlock({"pause", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  char c;
  EXPECT_LE(recv(socket.get(), &c, 1, 0), 0);
  std::string woken = Get(web, "/hello.txt", "Cookie: airlock_token=" + web.token + "\r\n");
  EXPECT_TRUE(absl::EndsWith(woken, "\r\n\r\nhello\n")) << woken;
  r = RunAirlock({"ls"});
  EXPECT_NE(r.out.find(id + "  airlock/bookworm-python   running"), std::string::npos) << r.out;

  // Listed, removed, and then not found; public needs no token.
  r = RunAirlock({"expose", "ls", id});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("8000   token   http://8000-" + id), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("9000   token"), std::string::npos) << r.out;
  EXPECT_EQ(RunAirlock({"expose", "rm", id, "8000"}).exit_code, 0);
  std::string gone = Get(web, "/", "Cookie: airlock_token=" + web.token + "\r\n");
  EXPECT_TRUE(Status(gone, 404)) << gone;
  r = RunAirlock({"expose", "rm", id, "8000"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not exposed"), std::string::npos) << r.err;
  Url open = Expose(id, "8000", /*is_public=*/true);
  std::string anyone = Get(open, "/hello.txt");
  EXPECT_TRUE(absl::EndsWith(anyone, "\r\n\r\nhello\n")) << anyone;

  // The detached server ran on through the pause; its output is in its log.
  EXPECT_NE(ExecScript(id, "cat " + log).find("\"GET /hello.txt HTTP/1.1\" 200"),
            std::string::npos);
  r = RunAirlock({"exec", "-d", "-t", id, "--", "true"});
  EXPECT_EQ(r.exit_code, 2) << r.err;

  // Every exposure and connection is in the session's timeline.
  r = RunAirlock({"log", id});
  EXPECT_NE(r.out.find("session.expose: port 8000, with a token"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("session.http: port 9000 through the HTTP gateway from 127.0.0.1:"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("session.unexpose: port 8000"), std::string::npos) << r.out;

  // The session's end ends its exposures.
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);
  std::string ended = Get(open, "/hello.txt");
  EXPECT_TRUE(Status(ended, 404)) << ended;
  r = RunAirlock({"expose", "8000"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

}  // namespace
}  // namespace airlock
