// Protected credentials as a user meets them: the guest holds a placeholder, the server the
// secret is bound to gets the value, and the value is nowhere a guest, a snapshot, the state
// database or a log could give it away.
//
// The test's airlockd resolves api.test and other.test to 127.0.0.1, trusts the test's own CA
// for the servers it intercepts for (AIRLOCK_UPSTREAM_CA), shares op://test/github/token with
// root (AIRLOCK_SHARED_SECRETS), and the CLI and airlockd find a fake `op` first on their PATH;
// see tests/vm_test_env.cc.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/common/file_util.h"
#include "src/common/hex.h"
#include "src/testing/test_util.h"
#include "tests/cli_runner.h"
#include "tests/loopback_http_server.h"
#include "tests/test_certs.h"

namespace airlock {
namespace {

std::string Upstream() { return getenv("AIRLOCK_TEST_UPSTREAM"); }

// A value no test could produce by accident.
std::string FreshValue(const std::string& prefix) {
  unsigned char bytes[16];
  EXPECT_EQ(getrandom(bytes, sizeof(bytes), 0), static_cast<ssize_t>(sizeof(bytes)));
  return prefix + HexString(bytes, sizeof(bytes));
}

// An HTTPS "API" on 127.0.0.1:443 for api.test that records the Authorization it receives and
// echoes it back in its body and a header.
class EchoApi {
 public:
  EchoApi()
      : server_(LoopbackHttpServer::RequestHandler(
                    [this](const std::string& path,
                           const std::string& head) -> std::optional<std::string> {
                      if (path == "/redirect") {
                        return "HTTP/1.0 302 Found\r\nLocation: http://web.test/redirected\r\n"
                               "Content-Length: 0\r\nConnection: close\r\n\r\n";
                      }
                      std::string auth;
                      size_t at = head.find("\r\nAuthorization: ");
                      if (at != std::string::npos) {
                        at += 17;
                        auth = head.substr(at, head.find("\r\n", at) - at);
                      }
                      std::lock_guard<std::mutex> lock(mu_);
                      seen_.push_back(auth);
                      return "auth=" + auth + "\n";
                    }),
                443, Issued(), "api") {}
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  static std::string Issued() {
    Issue(Upstream(), "api", "api.test");
    return Upstream();
  }
  std::mutex mu_;
  std::vector<std::string> seen_;
  LoopbackHttpServer server_;
};

std::string Home() { return getenv("AIRLOCK_HOME"); }

// Whether `needle` occurs in any file under dir (read in overlapping chunks; big files too).
std::vector<std::string> FilesContaining(const std::string& dir, const std::string& needle) {
  std::vector<std::string> found;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return found;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || name == "images" || name == "kernel") continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      for (const std::string& f : FilesContaining(path, needle)) found.push_back(f);
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string window;
    std::string chunk(1 << 20, '\0');
    ssize_t n;
    while ((n = read(fd, chunk.data(), chunk.size())) > 0) {
      window.append(chunk.data(), static_cast<size_t>(n));
      if (window.find(needle) != std::string::npos) {
        found.push_back(path);
        break;
      }
      window = window.substr(window.size() - std::min(window.size(), needle.size()));
    }
    close(fd);
  }
  closedir(d);
  return found;
}

constexpr char kCurlAuth[] =
    "curl -sS --fail-with-body -H \"Authorization: Bearer $API_KEY\" https://api.test/v1";

TEST(SecretsTest, TheServerGetsTheValueAndNothingTheGuestOrTheHostKeepsHoldsIt) {
  EchoApi api;
  std::string value = FreshValue("sk-test-");
  setenv("AIRLOCK_TEST_API_KEY", value.c_str(), 1);
  std::string id = CreateSession(
      {"--allow", "api.test", "--secret", "API_KEY=env:AIRLOCK_TEST_API_KEY@api.test"});
  ASSERT_FALSE(id.empty());

  std::string placeholder(absl::StripTrailingAsciiWhitespace(ExecScript(id, "echo $API_KEY")));
  EXPECT_EQ(placeholder.rfind("AIRLOCK_PLACEHOLDER_", 0), 0u) << placeholder;
  EXPECT_NE(placeholder, value);

  // curl (the system bundle and CURL_CA_BUNDLE) and Python (SSL_CERT_FILE) both trust the
  // session's CA; the server gets the value; the echo comes back masked.
  std::string out = ExecScript(id, kCurlAuth);
  EXPECT_EQ(out, "auth=Bearer " + placeholder + "\n");
  out = ExecScript(
      id,
      "python3 -c \"import os, urllib.request; r = urllib.request.Request("
      "'https://api.test/py', headers={'Authorization': 'Bearer ' + os.environ['API_KEY']});"
      " print(urllib.request.urlopen(r, timeout=30).read().decode(), end='')\"");
  EXPECT_EQ(out, "auth=Bearer " + placeholder + "\n");
  std::vector<std::string> seen = api.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], "Bearer " + value);
  EXPECT_EQ(seen[1], "Bearer " + value);

  // Nothing in the guest knows the value: environments, files, the echo.
  Result r = RunAirlock(
      {"exec", id, "--", "sh", "-c", "cat /proc/*/environ; env; cat /etc/airlock/ca-bundle.pem"});
  EXPECT_EQ(r.out.find(value), std::string::npos);
  EXPECT_NE(r.out.find(placeholder), std::string::npos);

  std::string log = WaitFor({"network", "log", id}, "sent API_KEY");
  EXPECT_NE(log.find("secret"), std::string::npos) << log;
  r = RunAirlock({"secret", "ls", id});
  EXPECT_NE(r.out.find("API_KEY"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("env:AIRLOCK_TEST_API_KEY"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("never"), std::string::npos) << r.out;  // used just now

  // A fork uses the secret too, and holds the same placeholder.
  r = RunAirlock({"fork", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string fork(absl::StripTrailingAsciiWhitespace(r.out));
  EXPECT_EQ(ExecScript(fork, kCurlAuth), "auth=Bearer " + placeholder + "\n");
  EXPECT_EQ(api.seen().back(), "Bearer " + value);

  // The proof: after use, the paused session's snapshot (memory and disk), the state database
  // and every log hold no byte of the value.
  ASSERT_EQ(RunAirlock({"pause", id}).exit_code, 0);
  ASSERT_EQ(RunAirlock({"pause", fork}).exit_code, 0);
  struct stat st;
  ASSERT_EQ(stat((Home() + "/sessions/" + id + "/snapshot").c_str(), &st), 0);
  EXPECT_EQ(FilesContaining(Home(), value), std::vector<std::string>{});
  r = RunAirlock({"logs", id});
  EXPECT_EQ(r.out.find(value), std::string::npos);

  // It resumes with the value still held (airlockd did not restart).
  EXPECT_EQ(ExecScript(id, kCurlAuth), "auth=Bearer " + placeholder + "\n");
  EXPECT_EQ(api.seen().back(), "Bearer " + value);
  RunAirlock({"rm", id});
  RunAirlock({"rm", fork});
}

TEST(SecretsTest, OpReferencesAreReadWithTheCallersRightsAndSharedSourcesByAirlockd) {
  EchoApi api;
  const RunAs mallory{61004, 61004};
  std::string items = getenv("AIRLOCK_TEST_OP_ITEMS");  // root's 1Password: 0700, root's only
  std::string first = FreshValue("op-one-"), second = FreshValue("op-two-");
  ASSERT_TRUE(WriteFileAtomically(items + "/github", first + "\n", 0600).ok());
  // The caller's own reference is read by the CLI, as the caller: root's works ...
  std::string id =
      CreateSession({"--allow", "api.test", "--secret", "API_KEY=op://test/github/token@api.test"});
  ExecScript(id, kCurlAuth);
  EXPECT_EQ(api.seen().back(), "Bearer " + first);
  RunAirlock({"rm", id});
  // ... and another user's `op` cannot read root's 1Password, nor may it make airlockd read it.
  Result r = RunAirlock({"session", "create", "--allow", "api.test", "--secret",
                         "API_KEY=op://test/github/token@api.test"},
                        "", mallory);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.find(first), std::string::npos);
  r = RunAirlock(
      {"session", "create", "--allow", "api.test", "--secret", "API_KEY=shared:github@api.test"},
      "", mallory);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no source shared:github is shared with you"), std::string::npos) << r.err;

  // A source the operator shares with root (AIRLOCK_SHARED_SECRETS) is read by airlockd, and
  // again at resume: rotated in 1Password, the session picks it up, placeholder unchanged.
  id = CreateSession({"--allow", "api.test", "--secret", "API_KEY=shared:github@api.test"});
  std::string placeholder(absl::StripTrailingAsciiWhitespace(ExecScript(id, "echo $API_KEY")));
  ExecScript(id, kCurlAuth);
  EXPECT_EQ(api.seen().back(), "Bearer " + first);
  ASSERT_TRUE(WriteFileAtomically(items + "/github", second + "\n", 0600).ok());
  ASSERT_EQ(RunAirlock({"pause", id}).exit_code, 0);
  EXPECT_EQ(ExecScript(id, "echo $API_KEY"), placeholder + "\n");
  ExecScript(id, kCurlAuth);
  EXPECT_EQ(api.seen().back(), "Bearer " + second);
  // Only to the hosts its line names.
  r = RunAirlock({"secret", "set", id, "OTHER=shared:github@other.test"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("may go only to api.test"), std::string::npos) << r.err;
  RunAirlock({"rm", id});

  // A reference op cannot read: no session, and op's own words (the caller's own 1Password).
  r = RunAirlock({"session", "create", "--allow", "api.test", "--secret",
                  "API_KEY=op://test/missing/token@api.test"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no such item"), std::string::npos) << r.err;
}

TEST(SecretsTest, APlaceholderGoesNowhereElseAsTheValue) {
  EchoApi api;
  std::string value = FreshValue("sk-else-");
  setenv("AIRLOCK_TEST_API_KEY", value.c_str(), 1);
  // Plain HTTP on port 80 and HTTPS to a host the secret is not bound to: the servers get the
  // placeholder, never the value, and the log says so.
  std::vector<std::string> plain_seen;
  std::mutex mu;
  LoopbackHttpServer plain(
      LoopbackHttpServer::RequestHandler(
          [&](const std::string&, const std::string& head) -> std::optional<std::string> {
            std::lock_guard<std::mutex> lock(mu);
            plain_seen.push_back(head);
            return "ok\n";
          }),
      80);
  std::string id = CreateSession({"--allow", "api.test", "--allow", "web.test", "--secret",
                                  "API_KEY=env:AIRLOCK_TEST_API_KEY@api.test"});
  ExecScript(id, "curl -sS -H \"Authorization: Bearer $API_KEY\" http://web.test/");
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(plain_seen.size(), 1u);
    EXPECT_EQ(plain_seen[0].find(value), std::string::npos);
  }
  // The right host, but over plain HTTP; and a redirect from the bound host to another one
  // (curl told to keep the header): the placeholder both times.
  ExecScript(id, "curl -sS -H \"Authorization: Bearer $API_KEY\" http://api.test/");
  ExecScript(id,
             "curl -sS -L --location-trusted -H \"Authorization: Bearer $API_KEY\" "
             "https://api.test/redirect");
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(plain_seen.size(), 3u);
    for (const std::string& head : plain_seen) {
      EXPECT_EQ(head.find(value), std::string::npos) << head;
      EXPECT_NE(head.find("AIRLOCK_PLACEHOLDER_"), std::string::npos) << head;
    }
    EXPECT_NE(plain_seen[2].find("GET /redirected"), std::string::npos) << plain_seen[2];
  }
  std::string log = WaitFor({"network", "log", id}, "not TLS");
  EXPECT_NE(log.find("API_KEY"), std::string::npos) << log;

  // A request that smuggles a second one in its body: the proxy refuses it.
  Result r =
      RunAirlock({"exec", id, "--", "python3", "-c",
                  "import os, socket, ssl\n"
                  "ctx = ssl.create_default_context()\n"
                  "s = ctx.wrap_socket(socket.create_connection(('api.test', 443), timeout=30), "
                  "server_hostname='api.test')\n"
                  "k = os.environ['API_KEY']\n"
                  "s.sendall(('POST / HTTP/1.1\\r\\nHost: api.test\\r\\nContent-Length: 4\\r\\n'\n"
                  "  'Transfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\nGET /x "
                  "HTTP/1.1\\r\\nHost: api.test\\r\\n'\n"
                  "  'Authorization: ' + k + '\\r\\n\\r\\n').encode())\n"
                  "print(s.recv(200).decode().split('\\r\\n')[0])\n"});
  EXPECT_EQ(r.out, "HTTP/1.1 400 Bad Request\n") << r.err;
  for (const std::string& auth : api.seen()) EXPECT_EQ(auth.find(value), std::string::npos);

  // Bad sources are refused before anything is made.
  r = RunAirlock({"session", "create", "--secret", "K=file:/nonexistent/key@api.test"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent/key"), std::string::npos) << r.err;
  r = RunAirlock({"session", "create", "--secret", "K=env:AIRLOCK_TEST_API_KEY"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("NAME=SOURCE@HOST"), std::string::npos) << r.err;
  std::string open_file = Upstream() + "/open-key";
  ASSERT_TRUE(WriteFileAtomically(open_file, value + "\n", 0644).ok());
  r = RunAirlock({"run", "--allow", "api.test", "--secret", "K=file:" + open_file + "@api.test",
                  "--", "sh", "-c", "curl -sS -H \"Authorization: $K\" https://api.test/run"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("chmod 600"), std::string::npos) << r.err;
  EXPECT_EQ(api.seen().back(), value);  // a one-shot run gets the value to its server too
  EXPECT_EQ(r.out.find(value), std::string::npos);
  RunAirlock({"rm", id});
}

TEST(SecretsTest, SecretsAreBoundAndUnboundOnARunningSession) {
  EchoApi api;
  std::string value = FreshValue("sk-late-");
  setenv("AIRLOCK_TEST_API_KEY", value.c_str(), 1);
  std::string id = CreateSession({"--allow", "api.test"});
  Result r = RunAirlock({"secret", "ls", id});
  EXPECT_NE(r.out.find("no secrets"), std::string::npos) << r.out;
  r = RunAirlock({"secret", "set", id, "LATE=env:AIRLOCK_TEST_API_KEY@api.test"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("LATE"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(value), std::string::npos);
  // The guest trusts the session's CA from now on, and new commands hold the placeholder.
  std::string placeholder(absl::StripTrailingAsciiWhitespace(ExecScript(id, "echo $LATE")));
  ExecScript(id, "curl -sS -H \"Authorization: $LATE\" https://api.test/late");
  EXPECT_EQ(api.seen().back(), value);
  r = RunAirlock({"secret", "rm", id, "LATE"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ExecScript(id, "echo \"[$LATE]\""), "[]\n");
  // Unbound: the connection is an opaque tunnel again (the guest does not trust the server's
  // CA, hence -k) and the old placeholder goes out as it is.
  ExecScript(id, "curl -sSk -H 'Authorization: " + placeholder + "' https://api.test/after");
  EXPECT_EQ(api.seen().back(), placeholder);
  r = RunAirlock({"secret", "rm", id, "LATE"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("has no secret LATE"), std::string::npos) << r.err;
  RunAirlock({"rm", id});
}

// An image build's RUN uses a secret as a session does: the server gets the value, the RUN
// and every layer only the placeholder, and a new value reuses the cached step.
TEST(SecretsTest, AnImageBuildsRunSendsTheValueAndNoLayerHoldsIt) {
  EchoApi api;
  std::string value = FreshValue("sk-build-");
  setenv("AIRLOCK_TEST_API_KEY", value.c_str(), 1);
  testing::TempDir dir;
  // Named by this run, so that no earlier run's cached layer answers for it.
  std::string out = absl::StrCat("/build-", getpid(), "-", time(nullptr), ".txt");
  ASSERT_TRUE(
      WriteFileAtomically(dir.path() + "/Dockerfile",
                          absl::StrCat("FROM airlock/bookworm-python\n"
                                       "RUN ",
                                       kCurlAuth, " > ", out, " && echo $API_KEY >> ", out, "\n"),
                          0644)
          .ok());
  std::vector<std::string> build = {
      "image",   "build",    "-t",       "test/secret-build:1",
      "--allow", "api.test", "--secret", "API_KEY=env:AIRLOCK_TEST_API_KEY@api.test",
      dir.path()};
  Result r = RunAirlock(build);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> seen = api.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], "Bearer " + value);

  // The image holds what the RUN saw: the placeholder, twice (the echo came back masked).
  r = RunAirlock(
      {"run", "test/secret-build:1", "--", "sh", "-c", absl::StrCat("cat ", out, "; env")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find(value), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("auth=Bearer AIRLOCK_PLACEHOLDER_"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("API_KEY="), std::string::npos) << r.out;  // not in the image's env
  EXPECT_TRUE(FilesContaining(Home(), value).empty());
  const char* cache = getenv("AIRLOCK_CACHE");
  EXPECT_TRUE(FilesContaining(cache ? cache : "/var/cache/airlock", value).empty());

  // A new value is not a new step: the layer is reused, nothing is sent.
  std::string rotated = FreshValue("sk-rotated-");
  setenv("AIRLOCK_TEST_API_KEY", rotated.c_str(), 1);
  build[3] = "test/secret-build:2";
  r = RunAirlock(build);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("CACHED"), std::string::npos) << r.err;
  EXPECT_EQ(api.seen().size(), 1u);
  // A secret of a source that cannot be read builds nothing, and says which.
  r = RunAirlock({"image", "build", "-t", "test/secret-build:3", "--secret",
                  "K=file:/nonexistent/key@api.test", dir.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/nonexistent/key"), std::string::npos) << r.err;
  RunAirlock({"image", "rm", "test/secret-build:1", "test/secret-build:2"});
}

}  // namespace
}  // namespace airlock
