// Two airlockd hosts of one fleet on this machine: separate homes and sockets, an S3 server
// (s3rver) as their blob store and an etcd as their control plane, all on loopback. A session
// paused on one resumes on the other with its files and processes; a changed blob is refused;
// a host that dies loses its sessions to the other once its lease expires.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "proto/airlock/fleet/v1/fleet.grpc.pb.h"
#include "proto/airlock/v1/airlock.grpc.pb.h"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/testing/etcd_server.h"
#include "src/testing/s3rver.h"
#include "src/testing/test_util.h"
#include "tests/cli_runner.h"
#include "tests/fault_proxy.h"
#include "tests/test_certs.h"

extern char** environ;

namespace airlock {
namespace {

constexpr char kBucket[] = "fleet";
constexpr int kLeaseTtl = 5;
const std::vector<std::string> kS3Keys = {"AWS_ACCESS_KEY_ID=S3RVER",
                                          "AWS_SECRET_ACCESS_KEY=S3RVER"};

bool Answers(const std::string& socket_path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_path.c_str());
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// One host: its own home (the test daemon's kernel, by symlink) and socket, and either the test
// daemon's images (by symlink) or an empty image store of its own.
class Host {
 public:
  Host(std::string name, const std::string& dir, bool shared_images = true)
      : name_(std::move(name)) {
    home_ = absl::StrCat(dir, "/", name_);
    EXPECT_EQ(mkdir(home_.c_str(), 0755), 0);
    HostPaths shared = DefaultHostPaths();
    if (shared_images) {
      EXPECT_EQ(symlink(shared.images.c_str(), (home_ + "/images").c_str()), 0);
    } else {
      EXPECT_EQ(mkdir((home_ + "/images").c_str(), 0755), 0);
    }
    EXPECT_EQ(symlink((shared.home + "/kernel").c_str(), (home_ + "/kernel").c_str()), 0);
  }
  ~Host() { Stop(SIGTERM); }

  const std::string& home() const { return home_; }
  std::string socket() const { return home_ + "/airlockd.sock"; }

  // This process's environment with this host's home and socket, and `more`.
  std::vector<std::string> Environment(const std::vector<std::string>& more) const {
    std::vector<std::string> out;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry = *e;
      if (entry.rfind("AIRLOCK_HOME=", 0) == 0 || entry.rfind("AIRLOCK_SOCKET=", 0) == 0) continue;
      out.push_back(entry);
    }
    out.push_back("AIRLOCK_HOME=" + home_);
    out.push_back("AIRLOCK_SOCKET=" + socket());
    out.insert(out.end(), more.begin(), more.end());
    return out;
  }

  // The airlockd of this host, on the blob store and etcd given, with `extra` flags.
  std::vector<std::string> Argv(const std::string& s3, const std::string& etcd,
                                const std::vector<std::string>& extra) const {
    std::string airlockd =
        std::string(AIRLOCK_BINARY).substr(0, std::string(AIRLOCK_BINARY).rfind('/')) + "/airlockd";
    std::vector<std::string> argv = {airlockd,
                                     "--socket",
                                     socket(),
                                     "--blob-store",
                                     absl::StrCat("s3://", kBucket, "/sessions"),
                                     "--s3-endpoint",
                                     s3,
                                     "--etcd",
                                     etcd,
                                     "--host-id",
                                     name_,
                                     "--host-lease-ttl",
                                     absl::StrCat(kLeaseTtl)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  void Start(const std::string& s3, const std::string& etcd,
             const std::vector<std::string>& extra = {}) {
    unlink(socket().c_str());  // one a killed daemon left
    std::vector<std::string> env_strings = Environment(kS3Keys);
    std::vector<char*> env;
    for (std::string& s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    pid_ = testing::StartLogged(Argv(s3, etcd, extra), home_ + "/airlockd.log", env.data());
    ASSERT_GT(pid_, 0);
    // Until it answers (a restart first waits for its previous lease to expire).
    for (int i = 0; i < 600 && !Answers(socket()); ++i) {
      ASSERT_EQ(kill(pid_, 0), 0) << "airlockd " << name_ << " exited:\n" << Log();
      usleep(100000);
    }
    ASSERT_TRUE(Answers(socket())) << Log();
  }

  // Ends the daemon: SIGTERM as an operator stops it; SIGKILL as a host dies.
  void Stop(int signal) {
    if (pid_ <= 0) return;
    kill(pid_, signal);
    // It is this process's child: reaped here, so that a gone daemon is not seen as a zombie.
    for (int i = 0; i < 600 && waitpid(pid_, nullptr, WNOHANG) == 0; ++i) usleep(50000);
    pid_ = 0;
  }

  // `airlock ARGS` on this host in a process of its own (this process's environment is not
  // touched, so other threads may Run meanwhile), its output into `out`.
  pid_t StartCli(const std::vector<std::string>& args, const std::string& out) {
    std::vector<std::string> env_strings = Environment({});
    std::vector<char*> env;
    for (std::string& s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    std::vector<std::string> argv = {AIRLOCK_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::StartLogged(argv, out, env.data());
  }
  // `airlock watch --json` on this host, its output into `out`, until killed.
  pid_t StartWatch(const std::string& out) { return StartCli({"watch", "--json"}, out); }

  Result Run(const std::vector<std::string>& args) {
    std::string home = getenv("AIRLOCK_HOME"), sock = getenv("AIRLOCK_SOCKET");
    setenv("AIRLOCK_HOME", home_.c_str(), 1);
    setenv("AIRLOCK_SOCKET", socket().c_str(), 1);
    Result r = RunAirlock(args);
    setenv("AIRLOCK_HOME", home.c_str(), 1);
    setenv("AIRLOCK_SOCKET", sock.c_str(), 1);
    return r;
  }

  std::string Log() const {
    return ReadFileToString(home_ + "/airlockd.log", 1 << 20).value_or("(no log)");
  }

  // Hosts of a fleet share the key snapshots are signed with: this one takes `from`'s.
  void TakeKeyOf(const Host& from) {
    absl::StatusOr<std::string> key = ReadFileToString(from.home() + "/host.key", 64);
    ASSERT_TRUE(key.ok()) << key.status();
    ASSERT_TRUE(WriteFileAtomically(home_ + "/host.key", *key, 0600).ok());
  }

 private:
  std::string name_;
  std::string home_;
  pid_t pid_ = 0;
};

// The sha256 of a file in a paused session's local snapshot, from its manifest.
std::string SnapshotFileDigest(const Host& host, const std::string& id, const std::string& file) {
  absl::StatusOr<std::string> text = ReadFileToString(
      absl::StrCat(host.home(), "/sessions/", id, "/snapshot/manifest.json"), 1 << 16);
  EXPECT_TRUE(text.ok()) << text.status();
  nlohmann::json manifest = nlohmann::json::parse(text.value_or("{}"), nullptr, false);
  for (const nlohmann::json& f : manifest.value("files", nlohmann::json::array())) {
    if (f.value("name", "") == file) return f.value("sha256", "");
  }
  ADD_FAILURE() << "no " << file << " in " << text.value_or("");
  return "";
}

void FlipByte(const std::string& path, off_t at) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  char c;
  ASSERT_EQ(pread(fd, &c, 1, at), 1);
  c ^= 0x20;
  ASSERT_EQ(pwrite(fd, &c, 1, at), 1);
  close(fd);
}

// One exchange with an HTTP server on a loopback port: what it answered, until it closed.
std::string HttpExchange(int port, const std::string& request) {
  UniqueFd fd = testing::ConnectLoopback(static_cast<uint16_t>(port));
  if (!fd.valid()) return "(no connection)";
  // A server's answer ends with its close: one that never comes is a hang, not a speed.
  timeval hang = {45, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &hang, sizeof hang);
  for (size_t done = 0; done < request.size();) {
    ssize_t n = send(fd.get(), request.data() + done, request.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return "(send failed)";
    done += static_cast<size_t>(n);
  }
  std::string got;
  char buf[65536];
  ssize_t n;
  while ((n = recv(fd.get(), buf, sizeof(buf), 0)) > 0) got.append(buf, n);
  if (n < 0) got += "(no end after 45 s)";
  return got;
}

// The line of `airlock ls -a` for id on host, or "".
std::string LsLine(Host& host, const std::string& id) {
  Result r = host.Run({"ls", "-a"});
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    if (absl::StartsWith(line, id)) return std::string(line);
  }
  return "";
}

// How `airlock ls --json` on host lists id: "STATE@HOST", or "" when it does not.
std::string Listed(Host& host, const std::string& id) {
  Result r = host.Run({"ls", "--json"});
  nlohmann::json listed = nlohmann::json::parse(r.out, nullptr, false);
  for (const nlohmann::json& s : listed.is_array() ? listed : nlohmann::json::array()) {
    if (s.value("id", "") == id) return s.value("state", "") + "@" + s.value("host", "");
  }
  return "";
}

// Listed, asked again until it is `want` (the fleet's index follows each host's records within a
// moment; a pause first uploads its snapshot, and the image with a host's first), for up to a
// minute: a hang, not a speed, since other suites run beside; the last answer.
std::string WaitListed(Host& host, const std::string& id, const std::string& want) {
  std::string now = Listed(host, id);
  for (int i = 0; i < 300 && now != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    now = Listed(host, id);
  }
  return now;
}

TEST(FleetTest, APausedSessionResumesOnAnotherHostAndADeadHostsSessionIsTakenOver) {
  testing::TempDir dir;
  testing::S3rver s3(AIRLOCK_NODE, AIRLOCK_S3RVER_DIR, dir.File("s3"), kBucket);
  ASSERT_TRUE(s3.running()) << s3.Log();
  testing::EtcdServer etcd("/usr/bin/etcd", dir.File("etcd"));
  ASSERT_TRUE(etcd.running()) << etcd.Log();
  // B has no images: the session's comes with it.
  Host a("host-a", dir.path()), b("host-b", dir.path(), /*shared_images=*/false);
  a.Start(s3.Endpoint(), etcd.Endpoint());
  // Hosts of a fleet share the key snapshots are signed with.
  b.TakeKeyOf(a);
  b.Start(s3.Endpoint(), etcd.Endpoint());

  Result r = a.Run({"session", "create"});
  ASSERT_EQ(r.exit_code, 0) << r.err << a.Log();
  std::string id(absl::StripTrailingAsciiWhitespace(r.out));
  r = a.Run({"exec", id, "--", "sh", "-c",
             "echo kept > /root/kept; setsid sleep 600 </dev/null >/dev/null 2>&1 & "
             "echo $! > /root/sleeper"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = a.Run({"pause", id});
  ASSERT_EQ(r.exit_code, 0) << r.err << a.Log();

  // A watches: it hears of the session on B below from the fleet's index.
  std::string watched = dir.File("watch-a.jsonl");
  pid_t watcher = a.StartWatch(watched);
  ASSERT_GT(watcher, 0);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // it has connected (its first read)

  // Host B has never heard of the session, nor has it its image: resuming it there brings both
  // over.
  r = b.Run({"resume", id});
  ASSERT_EQ(r.exit_code, 0) << r.err << b.Log();
  EXPECT_EQ(ListDirectory(b.home() + "/images/blobs").size(), 1u);
  r = b.Run({"exec", id, "--", "sh", "-c",
             "cat /root/kept; kill -0 $(cat /root/sleeper) && "
             "echo alive"});
  EXPECT_EQ(r.out, "kept\nalive\n") << r.err;
  r = b.Run({"logs", id});
  EXPECT_NE(r.out.find("session moved here from host host-a"), std::string::npos) << r.out;
  // Every host sees the fleet: both hosts, and the session on B.
  r = a.Run({"hosts", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json hosts = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(hosts.is_array() && hosts.size() == 2) << r.out;
  EXPECT_EQ(hosts[0]["id"], "host-a");
  EXPECT_EQ(hosts[0]["this_host"], true);
  EXPECT_EQ(hosts[1]["sessions"], nlohmann::json::array({id})) << r.out;
  // Either host lists it as running on B (A's own record still says paused), and A's watcher
  // has said so.
  for (Host* h : {&a, &b}) EXPECT_EQ(WaitListed(*h, id, "running@host-b"), "running@host-b");
  auto watch_says = [&](const std::string& state) {
    for (int i = 0; i < 300; ++i) {
      for (absl::string_view line : absl::StrSplit(ReadFileToString(watched, 1 << 20).value_or(""),
                                                   '\n', absl::SkipEmpty())) {
        nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
        if (e.is_object() && e.value("session_id", "") == id && e.value("state", "") == state &&
            e.value("host", "") == "host-b") {
          return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  EXPECT_TRUE(watch_says("running"));
  EXPECT_NE(LsLine(a, id).find("host-b"), std::string::npos) << LsLine(a, id);
  // While B runs it, A may not.
  r = a.Run({"resume", id});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("runs on host host-b"), std::string::npos) << r.err;

  // Back to A, which brings B's newer snapshot (A's own copy is older).
  ASSERT_EQ(b.Run({"exec", id, "--", "sh", "-c", "echo from-b >> /root/kept"}).exit_code, 0);
  r = b.Run({"pause", id});
  ASSERT_EQ(r.exit_code, 0) << r.err << b.Log();
  // A's watcher hears of the pause before A takes the session back (so its order is known).
  EXPECT_TRUE(watch_says("paused"));
  r = a.Run({"exec", id, "--", "cat", "/root/kept"});
  EXPECT_EQ(r.out, "kept\nfrom-b\n") << r.err << a.Log();
  // A's watcher saw it run and pause on B, and come back here (its own events).
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(watcher, SIGTERM);
  waitpid(watcher, nullptr, 0);
  std::vector<std::string> seen;
  for (absl::string_view line :
       absl::StrSplit(ReadFileToString(watched, 1 << 20).value_or(""), '\n', absl::SkipEmpty())) {
    nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
    if (e.is_object() && e.value("session_id", "") == id && e.value("kind", "") == "state") {
      seen.push_back(e.value("state", "") + "@" + e.value("host", ""));
    }
  }
  auto at = [&](const std::string& what) {
    return std::find(seen.begin(), seen.end(), what) - seen.begin();
  };
  EXPECT_LT(at("running@host-b"), at("paused@host-b")) << absl::StrJoin(seen, " ");
  EXPECT_LT(at("paused@host-b"), at("running@")) << absl::StrJoin(seen, " ");
  EXPECT_LT(at("running@"), static_cast<long>(seen.size())) << absl::StrJoin(seen, " ");

  // A changed blob in the store is refused, and nothing is loaded; put back, it is accepted.
  r = a.Run({"pause", id});
  ASSERT_EQ(r.exit_code, 0) << r.err << a.Log();
  std::string state =
      s3.ObjectFile(kBucket, "sessions/sha256/" + SnapshotFileDigest(a, id, "state"));
  struct stat st;
  ASSERT_EQ(stat(state.c_str(), &st), 0) << state;
  FlipByte(state, st.st_size / 2);
  r = b.Run({"resume", id});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("sha256:"), std::string::npos) << r.err;
  r = b.Run({"ls"});
  EXPECT_EQ(r.out.find("running"), std::string::npos) << r.out;
  FlipByte(state, st.st_size / 2);
  r = b.Run({"resume", id});
  ASSERT_EQ(r.exit_code, 0) << r.err << b.Log();

  // B dies (its daemon and its VMs, as a host does) holding the session; A takes it over from
  // its last published snapshot once B's lease expires, and not before.
  pid_t vm = 0;
  {
    std::string home = getenv("AIRLOCK_HOME"), sock = getenv("AIRLOCK_SOCKET");
    setenv("AIRLOCK_HOME", b.home().c_str(), 1);
    setenv("AIRLOCK_SOCKET", b.socket().c_str(), 1);
    vm = QemuPidOf(id);
    setenv("AIRLOCK_HOME", home.c_str(), 1);
    setenv("AIRLOCK_SOCKET", sock.c_str(), 1);
  }
  ASSERT_GT(vm, 0);
  b.Stop(SIGKILL);
  kill(vm, SIGKILL);
  r = a.Run({"resume", id});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("runs on host host-b"), std::string::npos) << r.err;
  // Once B's lease expires, A lists the session as B's, says B is gone, and what a resume does.
  std::string line;
  for (int i = 0; i < 2 * (4 * kLeaseTtl + 20) && line.find("is gone") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    line = LsLine(a, id);
  }
  EXPECT_NE(line.find("host host-b is gone"), std::string::npos) << line;
  EXPECT_NE(line.find("takes it over from its last published snapshot"), std::string::npos) << line;
  for (int i = 0; i < 4 * kLeaseTtl + 20; ++i) {
    r = a.Run({"resume", id});
    if (r.exit_code == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ASSERT_EQ(r.exit_code, 0) << r.err << a.Log();
  r = a.Run({"exec", id, "--", "cat", "/root/kept"});
  EXPECT_EQ(r.out, "kept\nfrom-b\n") << r.err;

  EXPECT_EQ(a.Run({"rm", id}).exit_code, 0);
  EXPECT_EQ(WaitListed(a, id, ""), "");

  // Its blobs are named by no published session now: a dry run says so and changes nothing,
  // a collection marks them, and one past the grace removes them.
  auto collect = [&](const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"blobs", "gc", "--json"};
    args.insert(args.end(), flags.begin(), flags.end());
    Result run = a.Run(args);
    EXPECT_EQ(run.exit_code, 0) << run.err << a.Log();
    return nlohmann::json::parse(run.out, nullptr, false);
  };
  nlohmann::json gc = collect({"--dry-run"});
  size_t blobs = gc.value("blobs", 0u);
  EXPECT_GE(blobs, 5u) << gc;  // state, disk, manifest, the image's two; more pauses, more
  EXPECT_EQ(gc["marked"].size(), blobs) << gc;
  gc = collect({"--grace", "1s"});
  EXPECT_EQ(gc["marked"].size(), blobs) << gc;  // the dry run marked nothing
  EXPECT_TRUE(gc["removed"].empty()) << gc;
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  gc = collect({"--grace", "1s"});
  EXPECT_EQ(gc["removed"].size(), blobs) << gc;
  EXPECT_GT(gc.value("removed_bytes", 0u), 0u) << gc;
  EXPECT_EQ(collect({"--dry-run"}).value("blobs", 1u), 0u);
  r = a.Run({"blobs", "gc"});
  EXPECT_NE(r.out.find("0 blobs"), std::string::npos) << r.out;
  a.Stop(SIGTERM);
  auto ours = [&] { return QemuPids(dir.path()); };  // both hosts' homes are under it
  for (int i = 0; i < 100 && !ours().empty(); ++i) usleep(100000);
  EXPECT_TRUE(ours().empty());
}

// Runs `args` on host until it exits 0, for up to ~(4 TTL + 20 s); the last result.
Result RunUntilOk(Host& host, const std::vector<std::string>& args) {
  Result r;
  for (int i = 0; i < 2 * (4 * kLeaseTtl + 20); ++i) {
    r = host.Run(args);
    if (r.exit_code == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return r;
}

// A session's volumes go with it: B takes over a session paused on A with the data A's
// session wrote on its read-write volume and the content of its read-only one, and A takes it
// back with what B wrote. A host with a volume of its own by that name refuses the session.
TEST(FleetTest, AVolumeGoesWithItsSessionToAnotherHostAndBack) {
  testing::TempDir dir;
  testing::S3rver s3(AIRLOCK_NODE, AIRLOCK_S3RVER_DIR, dir.File("s3"), kBucket);
  ASSERT_TRUE(s3.running()) << s3.Log();
  testing::EtcdServer etcd("/usr/bin/etcd", dir.File("etcd"));
  ASSERT_TRUE(etcd.running()) << etcd.Log();
  Host a("host-a", dir.path()), b("host-b", dir.path());
  a.Start(s3.Endpoint(), etcd.Endpoint());
  b.TakeKeyOf(a);
  b.Start(s3.Endpoint(), etcd.Endpoint());

  auto ok = [](Host& h, const std::vector<std::string>& args) {
    Result r = h.Run(args);
    EXPECT_EQ(r.exit_code, 0) << absl::StrJoin(args, " ") << ": " << r.err << h.Log();
    return std::string(absl::StripTrailingAsciiWhitespace(r.out));
  };
  ok(a, {"volume", "create", "data", "--size", "64m"});
  ok(a, {"volume", "create", "ref", "--size", "32m"});
  std::string in = dir.File("ref-in");
  ASSERT_EQ(mkdir(in.c_str(), 0755), 0);
  ASSERT_TRUE(WriteFileAtomically(in + "/hello.txt", "hello from the ref volume\n", 0644).ok());
  ok(a, {"volume", "import", "ref", in});
  std::string id =
      ok(a, {"session", "create", "--volume", "data:/data", "--volume", "ref:/ref:ro"});
  ok(a, {"exec", id, "--", "sh", "-c", "echo written-on-a > /data/f"});
  ok(a, {"pause", id});

  // B has never had the volumes: they come with the session.
  Result r = b.Run(
      {"exec", id, "--", "sh", "-c", "cat /data/f /ref/hello.txt; echo written-on-b >> /data/f"});
  EXPECT_EQ(r.out, "written-on-a\nhello from the ref volume\n") << r.err << b.Log();
  r = b.Run({"volume", "ls", "--json"});
  nlohmann::json listed = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(listed.is_array() && listed.size() == 2) << r.out;
  EXPECT_EQ(listed[0].value("name", ""), "data");
  EXPECT_EQ(listed[0].value("origin", ""), "from host host-a") << r.out;
  // A read-only attachment stays read-only there.
  r = b.Run({"exec", id, "--", "sh", "-c", "echo x > /ref/x"});
  EXPECT_NE(r.exit_code, 0);
  ok(b, {"pause", id});

  // Back on A, with what B wrote (A's own copy was older).
  EXPECT_EQ(ok(a, {"exec", id, "--", "cat", "/data/f"}), "written-on-a\nwritten-on-b");

  // A host whose own volume has the name of the session's is refused, and keeps its own.
  ok(a, {"volume", "create", "clash", "--size", "16m"});
  std::string other = ok(a, {"session", "create", "--volume", "clash:/c"});
  ok(a, {"pause", other});
  ok(b, {"volume", "create", "clash", "--size", "16m"});
  r = b.Run({"exec", other, "--", "true"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("this host has another volume of that name"), std::string::npos) << r.err;
  EXPECT_EQ(WaitListed(a, other, "paused@host-a"), "paused@host-a");
  EXPECT_EQ(ok(a, {"exec", other, "--", "true"}), "");
  EXPECT_EQ(a.Run({"rm", id}).exit_code, 0);
  EXPECT_EQ(a.Run({"rm", other}).exit_code, 0);
}

// `airlock hosts drain`: asked on A, B stops taking work and pauses its sessions for the
// others (one running a command waits for the command to end); A resumes them; the drain
// lasts until undone.
TEST(FleetTest, ADrainedHostTakesNothingNewAndPausesItsSessionsForTheOthers) {
  testing::TempDir dir;
  testing::S3rver s3(AIRLOCK_NODE, AIRLOCK_S3RVER_DIR, dir.File("s3"), kBucket);
  ASSERT_TRUE(s3.running()) << s3.Log();
  testing::EtcdServer etcd("/usr/bin/etcd", dir.File("etcd"));
  ASSERT_TRUE(etcd.running()) << etcd.Log();
  Host a("host-a", dir.path()), b("host-b", dir.path());
  a.Start(s3.Endpoint(), etcd.Endpoint());
  b.TakeKeyOf(a);
  b.Start(s3.Endpoint(), etcd.Endpoint());

  Result r = b.Run({"session", "create"});
  ASSERT_EQ(r.exit_code, 0) << r.err << b.Log();
  std::string idle(absl::StripTrailingAsciiWhitespace(r.out));
  ASSERT_EQ(b.Run({"exec", idle, "--", "sh", "-c", "echo kept > /root/kept"}).exit_code, 0);
  r = b.Run({"session", "create"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string busy(absl::StripTrailingAsciiWhitespace(r.out));
  // A command that runs on while the drain starts, until the test lets it end.
  pid_t command =
      b.StartCli({"exec", busy, "--", "sh", "-c", "while [ ! -e /tmp/go ]; do sleep 0.2; done"},
                 dir.File("command.log"));
  ASSERT_GT(command, 0);
  for (int i = 0; i < 100 && b.Run({"exec", busy, "--", "pgrep", "-f", "/tmp/go"}).exit_code != 0;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  r = a.Run({"hosts", "drain", "host-b"});
  ASSERT_EQ(r.exit_code, 0) << r.err << a.Log();
  EXPECT_NE(r.out.find("host host-b is draining"), std::string::npos) << r.out;
  // B refuses new work at once, saying what to do.
  for (int i = 0; i < 20 && b.Run({"session", "create"}).exit_code == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  r = b.Run({"session", "create"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("host host-b is being drained and does not take new sessions"),
            std::string::npos)
      << r.err;
  // The idle session is paused for the others; the busy one once its command ends.
  EXPECT_EQ(WaitListed(a, idle, "paused@host-b"), "paused@host-b");
  EXPECT_EQ(Listed(a, busy), "running@host-b");
  // A running session still takes commands (only a resume is refused).
  ASSERT_EQ(b.Run({"exec", busy, "--", "touch", "/tmp/go"}).exit_code, 0);
  int status = 0;
  ASSERT_EQ(waitpid(command, &status, 0), command);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(WaitListed(a, busy, "paused@host-b"), "paused@host-b");
  r = b.Run({"logs", idle});
  EXPECT_NE(r.out.find("host-b is being drained"), std::string::npos) << r.out;
  r = a.Run({"hosts", "--json"});
  nlohmann::json hosts = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(hosts.is_array() && hosts.size() == 2) << r.out;
  EXPECT_EQ(hosts[1]["id"], "host-b");
  EXPECT_EQ(hosts[1]["draining"], true) << r.out;
  EXPECT_EQ(hosts[0]["draining"], false) << r.out;
  EXPECT_NE(a.Run({"hosts"}).out.find("draining"), std::string::npos);

  // A runs them now; B may not resume them.
  r = b.Run({"resume", idle});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("does not resume sessions"), std::string::npos) << r.err;
  r = a.Run({"exec", idle, "--", "cat", "/root/kept"});
  EXPECT_EQ(r.out, "kept\n") << r.err << a.Log();
  EXPECT_EQ(WaitListed(b, idle, "running@host-a"), "running@host-a");

  // Only root drains; a drain of no host id is refused; undone, B takes sessions again.
  EXPECT_NE(a.Run({"hosts", "drain", "no/such"}).exit_code, 0);
  r = a.Run({"hosts", "drain", "--undo", "host-b"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("host host-b takes sessions again"), std::string::npos) << r.out;
  bool created = false;
  for (int i = 0; i < 20 && !created; ++i) {
    r = b.Run({"session", "create"});
    created = r.exit_code == 0;
    if (!created) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_TRUE(created) << r.err;
  r = a.Run({"audit", "--json"});
  EXPECT_NE(r.out.find("host.drain"), std::string::npos);
  EXPECT_NE(r.out.find("host.undrain"), std::string::npos);
}

// Forwarding: hosts started with --fleet-listen and certificates of the fleet's own CA pass each
// other the calls for the sessions they run. A command, its exit code, a follow of the logs, a
// pause and a caller that goes away, each through A for a session B runs; the session stays on
// B. A peer whose certificate another CA signed is refused at B's fleet port, and one of the
// fleet that names no caller gets nothing. A create goes to the host with room.
TEST(FleetTest, ACallOnAnyHostReachesTheSessionWhereItRuns) {
  testing::TempDir dir;
  testing::S3rver s3(AIRLOCK_NODE, AIRLOCK_S3RVER_DIR, dir.File("s3"), kBucket);
  ASSERT_TRUE(s3.running()) << s3.Log();
  testing::EtcdServer etcd("/usr/bin/etcd", dir.File("etcd"));
  ASSERT_TRUE(etcd.running()) << etcd.Log();
  std::string ca = dir.File("fleet-ca"), rogue = dir.File("rogue-ca");
  ASSERT_EQ(mkdir(ca.c_str(), 0700), 0);
  ASSERT_EQ(mkdir(rogue.c_str(), 0700), 0);
  MakeTestCa(ca);
  MakeTestCa(rogue);
  for (const char* name : {"host-a", "host-b"}) Issue(ca, name, name);
  Issue(rogue, "host-a", "host-a");
  std::map<std::string, std::string> listen;
  std::map<std::string, int> gateway;  // each host's HTTP gateway port
  auto fleet_flags = [&](const std::string& name) {
    listen[name] = absl::StrCat("127.0.0.1:", FreePort());
    gateway[name] = FreePort();
    return std::vector<std::string>{"--fleet-listen", listen[name],
                                    "--fleet-cert",   ca + "/" + name + ".pem",
                                    "--fleet-key",    ca + "/" + name + ".key",
                                    "--fleet-ca",     ca + "/ca.pem",
                                    "--http-listen",  absl::StrCat("127.0.0.1:", gateway[name])};
  };
  // What each offers the fleet's sessions, small enough to fill.
  auto offering = [&](const std::string& name, const std::string& memory) {
    std::vector<std::string> flags = fleet_flags(name);
    flags.insert(flags.end(), {"--capacity-memory", memory});
    return flags;
  };
  Host a("host-a", dir.path()), b("host-b", dir.path());
  a.Start(s3.Endpoint(), etcd.Endpoint(), offering("host-a", "1g"));
  b.TakeKeyOf(a);
  b.Start(s3.Endpoint(), etcd.Endpoint(), offering("host-b", "2g"));

  Result r = b.Run({"session", "create"});
  ASSERT_EQ(r.exit_code, 0) << r.err << b.Log();
  std::string id(absl::StripTrailingAsciiWhitespace(r.out));
  // A command through A runs in B's VM, its output and exit code come back, and B keeps it.
  r = a.Run({"exec", id, "--", "sh", "-c", "echo through-a | tee /root/where; exit 7"});
  EXPECT_EQ(r.exit_code, 7) << r.err << a.Log();
  EXPECT_EQ(r.out, "through-a\n");
  EXPECT_EQ(b.Run({"exec", id, "--", "cat", "/root/where"}).out, "through-a\n");
  EXPECT_EQ(Listed(a, id), "running@host-b");
  // Files, and the network rules of the VM that runs it (B's proxy), the same way.
  r = a.Run({"file", "read", id, "/root/where"});
  EXPECT_EQ(r.out, "through-a\n") << r.err;
  r = a.Run({"network", "allow", id, "forwarded.example.com"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(b.Run({"network", "ls", id}).out.find("forwarded.example.com"), std::string::npos);

  // A follow of the logs through A sees what B's session does next.
  std::string follow = dir.File("follow.log");
  pid_t follower = a.StartCli({"logs", "-f", id}, follow);
  ASSERT_GT(follower, 0);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_EQ(b.Run({"exec", id, "--", "echo", "seen-through-a"}).exit_code, 0);
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    seen =
        ReadFileToString(follow, 1 << 20).value_or("").find("seen-through-a") != std::string::npos;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(seen) << ReadFileToString(follow, 1 << 20).value_or("") << a.Log();
  kill(follower, SIGTERM);
  waitpid(follower, nullptr, 0);

  // A port of B's session, exposed through A (the exposure is B's), is reached through A's
  // HTTP gateway as through B's: A passes the connection to B, which admits it by its token.
  r = b.Run({"exec", "-d", "-w", "/srv", id, "--", "python3", "-m", "http.server", "8000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(b.Run({"exec", id, "--", "sh", "-c",
                   "echo served-by-b > /srv/where.txt; until python3 -c \"import socket; "
                   "socket.create_connection(('127.0.0.1', 8000))\" 2>/dev/null; do sleep "
                   "0.2; done"})
                .exit_code,
            0);
  r = a.Run({"expose", id, "8000"});
  ASSERT_EQ(r.exit_code, 0) << r.err << a.Log();
  ASSERT_NE(r.out.find("airlock_token="), std::string::npos) << r.out;
  std::string token(absl::StripTrailingAsciiWhitespace(
      r.out.substr(r.out.find("airlock_token=") + strlen("airlock_token="))));
  // The URL names B's gateway; any host's answers for it.
  EXPECT_NE(r.out.find(absl::StrCat(":", gateway["host-b"], "/")), std::string::npos) << r.out;
  auto through = [&](const std::string& host, const std::string& token_header) {
    return HttpExchange(gateway[host], absl::StrCat("GET /where.txt HTTP/1.1\r\nHost: 8000-", id,
                                                    ".airlock.localhost:", gateway[host], "\r\n",
                                                    token_header, "Connection: close\r\n\r\n"));
  };
  for (const char* host : {"host-a", "host-b"}) {
    std::string got = through(host, "X-Airlock-Token: " + token + "\r\n");
    EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.0 200 ")) << host << ": " << got << a.Log();
    EXPECT_TRUE(absl::EndsWith(got, "\r\n\r\nserved-by-b\n")) << host << ": " << got;
  }
  std::string refused = through("host-a", "X-Airlock-Token: not-the-token\r\n");
  EXPECT_TRUE(absl::StartsWith(refused, "HTTP/1.1 401 ")) << refused;
  EXPECT_EQ(refused.find("served-by-b"), std::string::npos) << refused;
  // The connection is B's to count: its audit names the gateway the client reached.
  r = b.Run({"log", id});
  EXPECT_NE(r.out.find("at host host-a's gateway"), std::string::npos) << r.out;
  // FleetGateway is for fleet hosts alone: a caller on B's socket is refused.
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto stub = fleet::v1::FleetGateway::NewStub(
        grpc::CreateChannel("unix:" + b.socket(), grpc::InsecureChannelCredentials()));
    auto stream = stub->Relay(&context);
    fleet::v1::GatewayChunk start;
    start.mutable_start()->set_head(
        absl::StrCat("GET /where.txt HTTP/1.1\r\nHost: 8000-", id, ".airlock.localhost\r\n\r\n"));
    stream->Write(start);
    stream->WritesDone();
    fleet::v1::GatewayChunk chunk;
    std::string got;
    while (stream->Read(&chunk)) got += chunk.data();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(got, "");
  }

  // A caller that goes away takes its forwarded command along.
  pid_t caller = a.StartCli({"exec", id, "--", "sleep", "301"}, dir.File("caller.log"));
  ASSERT_GT(caller, 0);
  auto sleeping = [&] { return b.Run({"exec", id, "--", "pgrep", "-f", "sleep 301"}).exit_code; };
  for (int i = 0; i < 100 && sleeping() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(sleeping(), 0);
  kill(caller, SIGKILL);
  waitpid(caller, nullptr, 0);
  int left = 0;
  for (int i = 0; i < 300 && (left = sleeping()) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_NE(left, 0) << "the forwarded command outlived its caller";

  // The fleet port: only hosts of the fleet's CA, and only for a caller they name.
  auto channel_as = [&](const std::string& cert_dir) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = *ReadFileToString(ca + "/ca.pem", 1 << 20);
    tls.pem_private_key = *ReadFileToString(cert_dir + "/host-a.key", 1 << 20);
    tls.pem_cert_chain = *ReadFileToString(cert_dir + "/host-a.pem", 1 << 20);
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("host-b");
    return grpc::CreateCustomChannel(listen["host-b"], grpc::SslCredentials(tls), args);
  };
  for (const std::string& cert_dir : {rogue, ca}) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::GetQuotaRequest request;
    v1::QuotaReport report;
    grpc::Status status =
        v1::Sessions::NewStub(channel_as(cert_dir))->Quota(&context, request, &report);
    EXPECT_EQ(status.error_code(),
              cert_dir == rogue ? grpc::StatusCode::UNAVAILABLE : grpc::StatusCode::UNAUTHENTICATED)
        << cert_dir << ": " << status.error_message();
  }

  // Placement: a create on A goes where there is room. A (1g) holds a 768m session asked of it,
  // so the next goes to B (2g, 512m used), which then has 768m free; more than any host has, or
  // a host asked for that is full, is refused saying so.
  r = a.Run({"session", "create", "--host", "host-a", "--memory", "768m"});
  ASSERT_EQ(r.exit_code, 0) << r.err << a.Log();
  std::string on_a(absl::StripTrailingAsciiWhitespace(r.out));
  // Once B's view of the fleet holds it, B counts it against A.
  EXPECT_EQ(WaitListed(b, on_a, "running@host-a"), "running@host-a");
  r = a.Run({"session", "create", "--memory", "768m"});
  ASSERT_EQ(r.exit_code, 0) << r.err << a.Log();
  std::string placed(absl::StripTrailingAsciiWhitespace(r.out));
  EXPECT_EQ(WaitListed(a, placed, "running@host-b"), "running@host-b");
  EXPECT_EQ(b.Run({"exec", placed, "--", "true"}).exit_code, 0);
  r = a.Run({"session", "create", "--memory", "1g"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no host of the fleet has 1.0GiB of memory free"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("on host-b"), std::string::npos) << r.err;
  r = b.Run({"session", "create", "--host", "host-a", "--memory", "512m"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("host host-a has 256MiB of memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("leave out --host"), std::string::npos) << r.err;
  r = a.Run({"session", "create", "--host", "no-such-host"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("host no-such-host is not in the fleet"), std::string::npos) << r.err;
  EXPECT_EQ(a.Run({"rm", on_a}).exit_code, 0);
  EXPECT_EQ(a.Run({"rm", placed}).exit_code, 0);

  // A pause through A pauses it on B, which publishes it. A request for its port through A's
  // gateway goes to B, which paused it and keeps its exposures, and resumes it there.
  r = a.Run({"pause", id});
  EXPECT_EQ(r.exit_code, 0) << r.err << a.Log();
  EXPECT_EQ(WaitListed(a, id, "paused@host-b"), "paused@host-b");
  std::string woke = through("host-a", "X-Airlock-Token: " + token + "\r\n");
  EXPECT_TRUE(absl::EndsWith(woke, "\r\n\r\nserved-by-b\n")) << woke << a.Log() << b.Log();
  EXPECT_EQ(WaitListed(a, id, "running@host-b"), "running@host-b");
  // Paused again, the next use on A takes it over.
  r = a.Run({"pause", id});
  EXPECT_EQ(r.exit_code, 0) << r.err << a.Log();
  EXPECT_EQ(WaitListed(a, id, "paused@host-b"), "paused@host-b");
  r = a.Run({"exec", id, "--", "cat", "/root/where"});
  EXPECT_EQ(r.out, "through-a\n") << r.err << a.Log();
  EXPECT_EQ(WaitListed(b, id, "running@host-a"), "running@host-a");
  EXPECT_EQ(a.Run({"rm", id}).exit_code, 0);
}

// Scale to zero, simulated: A's host pool (--host-pool) holds one host, pool-1, an airlockd of
// its own on this machine. A create no host has room for starts it and goes there; once it runs
// nothing for the pool's release_after, it is drained and stopped, and the next such create
// starts it again.
TEST(FleetTest, AHostOfThePoolStartsWhenNoHostHasRoomAndGoesWhenIdle) {
  testing::TempDir dir;
  testing::S3rver s3(AIRLOCK_NODE, AIRLOCK_S3RVER_DIR, dir.File("s3"), kBucket);
  ASSERT_TRUE(s3.running()) << s3.Log();
  testing::EtcdServer etcd("/usr/bin/etcd", dir.File("etcd"));
  ASSERT_TRUE(etcd.running()) << etcd.Log();
  std::string ca = dir.File("fleet-ca");
  ASSERT_EQ(mkdir(ca.c_str(), 0700), 0);
  MakeTestCa(ca);
  auto fleet_flags = [&](const std::string& name, const std::string& memory) {
    Issue(ca, name, name);
    return std::vector<std::string>{"--fleet-listen",    absl::StrCat("127.0.0.1:", FreePort()),
                                    "--fleet-cert",      ca + "/" + name + ".pem",
                                    "--fleet-key",       ca + "/" + name + ".key",
                                    "--fleet-ca",        ca + "/ca.pem",
                                    "--capacity-memory", memory};
  };
  Host a("host-a", dir.path()), pool_host("pool-1", dir.path());
  nlohmann::json pool = {
      {"release_after_seconds", 3},
      {"hosts",
       {{{"id", "pool-1"},
         {"home", pool_host.home()},
         {"argv", pool_host.Argv(s3.Endpoint(), etcd.Endpoint(), fleet_flags("pool-1", "2g"))},
         // What the test's own daemons get from its environment: a gateway port of its own.
         {"env", {kS3Keys[0], kS3Keys[1], "AIRLOCK_HTTP_LISTEN=127.0.0.1:0"}}}}}};
  ASSERT_TRUE(WriteFileAtomically(dir.File("pool.json"), pool.dump(), 0600).ok());
  std::vector<std::string> a_flags = fleet_flags("host-a", "1g");
  a_flags.insert(a_flags.end(), {"--host-pool", dir.File("pool.json")});
  a.Start(s3.Endpoint(), etcd.Endpoint(), a_flags);
  pool_host.TakeKeyOf(a);
  // Whatever happens below, the pool's host ends with the test.
  struct StopPool {
    std::string pid_file;
    ~StopPool() {
      int pid = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFileToString(pid_file, 64).value_or("")),
                           &pid) &&
          pid > 1) {
        kill(pid, SIGKILL);
      }
    }
  } stop_pool{pool_host.home() + "/pool.pid"};
  auto hosts_up = [&] {
    std::vector<std::string> up;
    nlohmann::json hosts = nlohmann::json::parse(a.Run({"hosts", "--json"}).out, nullptr, false);
    for (const nlohmann::json& h : hosts.is_array() ? hosts : nlohmann::json::array()) {
      if (h.value("up", true)) up.push_back(h.value("id", ""));
    }
    return absl::StrJoin(up, ",");
  };
  EXPECT_EQ(hosts_up(), "host-a");

  Result r = a.Run({"session", "create", "--memory", "768m"});
  ASSERT_EQ(r.exit_code, 0) << r.err << a.Log();
  std::string on_a(absl::StripTrailingAsciiWhitespace(r.out));
  EXPECT_EQ(Listed(a, on_a), "running@host-a");
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    // A has 256m free: the pool's host starts, joins, and makes the session.
    r = a.Run({"session", "create", "--memory", "768m"});
    ASSERT_EQ(r.exit_code, 0) << r.err << a.Log() << pool_host.Log();
    std::string placed(absl::StripTrailingAsciiWhitespace(r.out));
    EXPECT_EQ(WaitListed(a, placed, "running@pool-1"), "running@pool-1");
    EXPECT_EQ(hosts_up(), "host-a,pool-1");
    r = a.Run({"exec", placed, "--", "echo", "on-the-pool"});
    EXPECT_EQ(r.out, "on-the-pool\n") << r.err;
    // Still busy after longer than release_after: it stays.
    std::this_thread::sleep_for(std::chrono::seconds(6));
    EXPECT_EQ(WaitListed(a, placed, "running@pool-1"), "running@pool-1");
    // Idle, it goes.
    ASSERT_EQ(a.Run({"rm", placed}).exit_code, 0);
    // It leaves the fleet as it stops, and its pool.pid once it has ended.
    auto stopped = [&] { return access((pool_host.home() + "/pool.pid").c_str(), F_OK) != 0; };
    std::string up = hosts_up();
    for (int i = 0; i < 300 && (up != "host-a" || !stopped()); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      up = hosts_up();
    }
    EXPECT_EQ(up, "host-a") << a.Log();
    EXPECT_TRUE(stopped());
    EXPECT_NE(a.Log().find("host pool: releasing host pool-1"), std::string::npos);
  }
  EXPECT_EQ(a.Run({"rm", on_a}).exit_code, 0);
}

TEST(FleetTest, AStoreOrEtcdThatFailsOrHangsLosesNothingAndAHostCutOffRejoins) {
  testing::TempDir dir;
  testing::S3rver s3(AIRLOCK_NODE, AIRLOCK_S3RVER_DIR, dir.File("s3"), kBucket);
  ASSERT_TRUE(s3.running()) << s3.Log();
  testing::EtcdServer etcd("/usr/bin/etcd", dir.File("etcd"));
  ASSERT_TRUE(etcd.running()) << etcd.Log();
  // Each host reaches the blob store, and B etcd, through a proxy that can fail or go silent.
  FaultProxy a_s3(s3.Endpoint()), b_s3(s3.Endpoint()), b_etcd(etcd.Endpoint());
  Host a("host-a", dir.path()), b("host-b", dir.path());
  const std::vector<std::string> quick = {"--blob-store-timeout", "2"};
  a.Start(a_s3.Endpoint(), etcd.Endpoint(), quick);
  b.TakeKeyOf(a);
  b.Start(b_s3.Endpoint(), b_etcd.Endpoint(), quick);

  // A session made on A and published there runs on B, which adds to its file.
  Result r = a.Run({"session", "create"});
  ASSERT_EQ(r.exit_code, 0) << r.err << a.Log();
  std::string id(absl::StripTrailingAsciiWhitespace(r.out));
  ASSERT_EQ(a.Run({"exec", id, "--", "sh", "-c", "echo kept > /root/kept"}).exit_code, 0);
  ASSERT_EQ(a.Run({"pause", id}).exit_code, 0) << a.Log();
  r = b.Run({"resume", id});
  ASSERT_EQ(r.exit_code, 0) << r.err << b.Log();
  ASSERT_EQ(b.Run({"exec", id, "--", "sh", "-c", "echo from-b >> /root/kept"}).exit_code, 0);

  // The blob store answers 500 to B's pause: the session is paused on B all the same, which says
  // so and keeps it; B resumes its own newer snapshot, not A's older published one.
  b_s3.Set(FaultProxy::Mode::kServerError);
  r = b.Run({"pause", id});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("could not be published"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("resumed on this host only"), std::string::npos) << r.err;
  EXPECT_NE(LsLine(b, id).find("paused"), std::string::npos) << LsLine(b, id);
  r = a.Run({"resume", id});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("runs on host host-b"), std::string::npos) << r.err;
  r = b.Run({"exec", id, "--", "cat", "/root/kept"});
  EXPECT_EQ(r.out, "kept\nfrom-b\n") << r.err << b.Log();
  b_s3.Set(FaultProxy::Mode::kPass);
  ASSERT_EQ(b.Run({"pause", id}).exit_code, 0) << b.Log();

  // The blob store goes silent while A fetches it: the resume gives up in bounded time, saying
  // why, and the session stays published for any host; with the store back, A resumes it.
  a_s3.Set(FaultProxy::Mode::kSilent);
  r = a.Run({"resume", id});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("could not bring session"), std::string::npos) << r.err;
  EXPECT_EQ(LsLine(a, id).find("running"), std::string::npos) << LsLine(a, id);
  a_s3.Set(FaultProxy::Mode::kPass);
  r = a.Run({"exec", id, "--", "cat", "/root/kept"});
  EXPECT_EQ(r.out, "kept\nfrom-b\n") << r.err << a.Log();

  // etcd answers 500 to B: a resume there is refused with etcd's error.
  ASSERT_EQ(a.Run({"pause", id}).exit_code, 0) << a.Log();
  b_etcd.Set(FaultProxy::Mode::kServerError);
  r = b.Run({"resume", id});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("etcd"), std::string::npos) << r.err;
  b_etcd.Set(FaultProxy::Mode::kPass);

  // B runs the session, and one of its own never published, when etcd goes silent for B for
  // longer than its lease: A takes the first over from its last published snapshot. Once etcd
  // answers B again, B rejoins by itself: it ends its VM of the session A took, and claims
  // its own again.
  r = b.Run({"resume", id});
  ASSERT_EQ(r.exit_code, 0) << r.err << b.Log();
  r = b.Run({"session", "create"});
  ASSERT_EQ(r.exit_code, 0) << r.err << b.Log();
  std::string own(absl::StripTrailingAsciiWhitespace(r.out));
  // One made on B is listed on A too.
  EXPECT_EQ(WaitListed(a, own, "running@host-b"), "running@host-b");
  b_etcd.Set(FaultProxy::Mode::kSilent);
  r = RunUntilOk(a, {"resume", id});
  ASSERT_EQ(r.exit_code, 0) << r.err << a.Log();
  b_etcd.Set(FaultProxy::Mode::kPass);
  for (int i = 0; i < 120 && b.Log().find("rejoined the fleet") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_NE(b.Log().find("rejoined the fleet"), std::string::npos) << b.Log();
  EXPECT_NE(b.Log().find(absl::StrCat("session ", id, ": ended here")), std::string::npos)
      << b.Log();
  r = b.Run({"ps", "--json"});
  EXPECT_EQ(r.out.find(id), std::string::npos) << r.out;
  // Either host lists it where it runs now.
  EXPECT_EQ(WaitListed(b, id, "running@host-a"), "running@host-a");
  EXPECT_EQ(WaitListed(a, id, "running@host-a"), "running@host-a");
  r = a.Run({"exec", id, "--", "cat", "/root/kept"});
  EXPECT_EQ(r.out, "kept\nfrom-b\n") << r.err;
  r = b.Run({"exec", own, "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err << b.Log();
  // B's claims, as the fleet sees them from A: its own session, not the one A took.
  r = a.Run({"hosts", "--json"});
  nlohmann::json hosts = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(hosts.is_array() && hosts.size() == 2) << r.out;
  EXPECT_EQ(hosts[1]["id"], "host-b");
  EXPECT_EQ(hosts[1]["sessions"], nlohmann::json::array({own})) << r.out;
  r = b.Run({"resume", id});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("runs on host host-a"), std::string::npos) << r.err;

  EXPECT_EQ(a.Run({"rm", id}).exit_code, 0);
  EXPECT_EQ(b.Run({"rm", own}).exit_code, 0);
  EXPECT_EQ(WaitListed(a, own, ""), "");  // removed: listed nowhere
  a.Stop(SIGTERM);
  b.Stop(SIGTERM);
  auto ours = [&] { return QemuPids(dir.path()); };
  for (int i = 0; i < 100 && !ours().empty(); ++i) usleep(100000);
  EXPECT_TRUE(ours().empty());
}

}  // namespace
}  // namespace airlock
