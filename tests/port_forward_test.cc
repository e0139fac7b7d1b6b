// airlock port-forward: connections here reach servers in a session's guest, as a user would
// use it (a dev server, a bulk download, a protocol that half-closes).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/common/sha256.h"
#include "src/common/unique_fd.h"
#include "src/testing/test_util.h"
#include "tests/cli_runner.h"

namespace airlock {
namespace {

const RunAs kOtherTenant{61007, 61007};

// Sends `request` to 127.0.0.1:port, half-closes, and returns everything that comes back
// until the other side closes; "" and a failure if it cannot connect.
std::string Exchange(uint16_t port, const std::string& request) {
  UniqueFd fd = testing::ConnectLoopback(port);
  if (!fd.valid()) return "";
  for (size_t done = 0; done < request.size();) {
    ssize_t n = send(fd.get(), request.data() + done, request.size() - done, MSG_NOSIGNAL);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  shutdown(fd.get(), SHUT_WR);
  std::string got;
  char buf[65536];
  for (;;) {
    ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// The body of an HTTP/1.0 response, "" if it is not one.
std::string Body(const std::string& response) {
  size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

// `airlock port-forward ID PAIRS...` running, with the local port of each remote one.
struct Forward {
  std::unique_ptr<Airlock> process;
  std::map<uint16_t, uint16_t> local;  // remote -> local
};

Forward StartForward(const std::string& id, const std::vector<std::string>& pairs) {
  std::vector<std::string> args = {"port-forward", id};
  args.insert(args.end(), pairs.begin(), pairs.end());
  Forward f;
  f.process = std::make_unique<Airlock>(args);
  auto lines = [&] {
    return static_cast<size_t>(
        std::count(f.process->partial().out.begin(), f.process->partial().out.end(), '\n'));
  };
  EXPECT_TRUE(f.process->ReadUntil([&] { return lines() >= pairs.size(); }))
      << f.process->partial().err;
  // "forwarding 127.0.0.1:LOCAL -> ID:REMOTE"
  for (absl::string_view line : absl::StrSplit(f.process->partial().out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> words = absl::StrSplit(line, absl::ByAnyChar(" :"));
    uint32_t local = 0, remote = 0;
    if (words.size() == 6 && absl::SimpleAtoi(words[2], &local) &&
        absl::SimpleAtoi(words[5], &remote)) {
      f.local[static_cast<uint16_t>(remote)] = static_cast<uint16_t>(local);
    }
  }
  EXPECT_EQ(f.local.size(), pairs.size()) << f.process->partial().out;
  return f;
}

TEST(PortForwardTest, ConnectionsHereReachServersInTheGuestAndWakeAPausedSession) {
  Result r = RunAirlock({"session", "create"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string id(absl::StripTrailingAsciiWhitespace(r.out));
  // A web server over a directory with a 6 MiB file, and an echo server that answers only once
  // its client half-closed (so a lost end of data would hang it).
  std::string digest = ExecScript(
      id,
      "mkdir -p /srv && cd /srv && head -c 6291456 /dev/urandom > big && echo small > small && "
      "(setsid python3 -m http.server 8000 </dev/null >/dev/null 2>&1 &) && "
      "cat > /root/echo.py <<'EOF'\n"
      "import socket\n"
      "s = socket.socket(socket.AF_INET6)\n"
      "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "s.bind(('::1', 9000)); s.listen()\n"
      "while True:\n"
      "    c, _ = s.accept(); data = b''\n"
      "    while chunk := c.recv(65536): data += chunk\n"
      "    c.sendall(b'echo:' + data); c.close()\n"
      "EOF\n"
      "(setsid python3 /root/echo.py </dev/null >/dev/null 2>&1 &) && "
      "until python3 -c \"import socket; socket.create_connection(('127.0.0.1', 8000)); "
      "socket.create_connection(('::1', 9000))\" 2>/dev/null; do sleep 0.2; done && "
      "sha256sum big | cut -d' ' -f1");
  digest = std::string(absl::StripTrailingAsciiWhitespace(digest));
  ASSERT_EQ(digest.size(), 64u);

  Forward forward = StartForward(id, {":8000", ":9000", ":9999"});
  // A bulk download keeps every byte and its order through both windows.
  std::string big = Body(Exchange(forward.local[8000], "GET /big HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(big.size(), 6291456u);
  EXPECT_EQ(Sha256Hex(big), digest);
  // An upload bigger than a window, its end carried through (the server listens on ::1 only).
  std::string upload(3 << 20, 'u');
  EXPECT_EQ(Exchange(forward.local[9000], upload), "echo:" + upload);
  // Nothing listens on 9999: the connection here ends with nothing, and the CLI says why.
  EXPECT_EQ(Exchange(forward.local[9999], "hello"), "");
  ASSERT_TRUE(forward.process->ReadUntil([&] {
    return forward.process->partial().err.find("nothing accepts connections on port 9999") !=
           std::string::npos;
  })) << forward.process->partial().err;

  // A session is not paused while a connection is open (like while a command runs): the pause
  // goes through once the connections above have ended on airlockd's side too. A paused session
  // is then resumed by a connection, its server still there.
  r = RunAirlock({"pause", id});
  for (int i = 0; i < 100 && r.exit_code != 0; ++i, usleep(100000)) {
    EXPECT_NE(r.err.find("is in use"), std::string::npos) << r.err;
    r = RunAirlock({"pause", id});
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Body(Exchange(forward.local[8000], "GET /small HTTP/1.0\r\n\r\n")), "small\n");
  r = RunAirlock({"ls"});
  EXPECT_NE(r.out.find(id + "  airlock/bookworm-python   running"), std::string::npos) << r.out;

  // Each connection is audited with its bytes, once it ended on both sides.
  int forwarded = 0;
  for (int i = 0; i < 100 && forwarded < 4; ++i, usleep(100000)) {
    forwarded = 0;
    for (const std::string& row : AuditRows()) {
      forwarded += row.find("session.port_forward " + id) != std::string::npos;
    }
  }
  EXPECT_EQ(forwarded, 4);

  // Another tenant cannot reach this session's ports; bad pairs are refused with the syntax.
  r = RunAirlock({"port-forward", id, "8000"}, "", kOtherTenant);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no session " + id), std::string::npos) << r.err;
  r = RunAirlock({"port-forward", id, "80000"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("LOCAL:REMOTE (8080:8000)"), std::string::npos) << r.err;
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);
}

}  // namespace
}  // namespace airlock
