// A fake guest on the other end of a socketpair: well-behaved, then hostile.
#include "src/vm/guest_channel.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace airlock {
namespace {

class FakeGuest {
 public:
  FakeGuest() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    guest_.reset(fds[1]);
    channel_ = GuestChannel::Start(UniqueFd(fds[0]), [this](const absl::Status& s) {
      ++failures_;
      last_failure_ = std::string(s.message());
    });
  }
  ~FakeGuest() { channel_->Stop(); }

  void Write(const std::string& bytes) {
    ASSERT_EQ(write(guest_.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  void Send(FrameType type, uint32_t stream, const std::string& payload) {
    Write(EncodeFrame(type, stream, payload));
  }
  // Reads the next frame the host sent.
  Frame Receive() {
    Frame frame;
    for (;;) {
      std::span<const uint8_t> in(pending_.data(), pending_.size());
      FrameParser::Result r = parser_.Next(&in, &frame);
      pending_.erase(pending_.begin(), pending_.end() - static_cast<long>(in.size()));
      if (r == FrameParser::Result::kFrame) return frame;
      EXPECT_NE(r, FrameParser::Result::kError);
      uint8_t buf[65536];
      ssize_t n = read(guest_.get(), buf, sizeof(buf));
      EXPECT_GT(n, 0);
      if (n <= 0) return frame;
      pending_.insert(pending_.end(), buf, buf + n);
    }
  }
  // The next frame that is not a flow-control grant (those come whenever the host consumes).
  Frame ReceiveRequest() {
    Frame frame;
    do {
      frame = Receive();
    } while (frame.type == FrameType::kWindow);
    return frame;
  }
  void Handshake() {
    std::thread host(
        [this] { EXPECT_TRUE(channel_->Handshake(absl::Now() + absl::Seconds(5)).ok()); });
    Send(FrameType::kHello, 0, PayloadWriter().U32(kProtocolVersion).Str("fake").bytes());
    Frame sync = Receive();
    EXPECT_EQ(sync.type, FrameType::kSync);
    Send(FrameType::kReady, 0, PayloadWriter().U32(0).bytes());
    host.join();
  }
  // Waits until the channel has failed.
  absl::Status WaitFailed() {
    for (int i = 0; i < 500 && channel_->status().ok(); ++i) usleep(10000);
    return channel_->status();
  }

  std::shared_ptr<GuestChannel> channel_;
  UniqueFd guest_;
  std::atomic<int> failures_{0};
  std::string last_failure_;

 private:
  FrameParser parser_;
  std::vector<uint8_t> pending_;
};

TEST(GuestChannelTest, RunsACommandWithSeparateStreams) {
  FakeGuest g;
  g.Handshake();
  auto stream = g.channel_->StartExec({.argv = {"echo", "hi"}, .cwd = "/w", .user = "app:staff"});
  ASSERT_TRUE(stream.ok());
  Frame start = g.Receive();
  ASSERT_EQ(start.type, FrameType::kExecStart);
  PayloadReader r(start.payload);
  std::vector<std::string> argv, env;
  std::string cwd, user;
  uint32_t flags;
  ASSERT_TRUE(r.StrList(&argv) && r.StrList(&env) && r.Str(&cwd) && r.U32(&flags) && r.Str(&user) &&
              r.AtEnd());
  EXPECT_EQ(argv[1], "hi");
  EXPECT_EQ(cwd, "/w");
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(user, "app:staff");
  g.Send(FrameType::kStdout, start.stream, "out");
  g.Send(FrameType::kStderr, start.stream, "err");
  g.Send(FrameType::kExit, start.stream, PayloadWriter().U32(0).I32(3).Str("").bytes());
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  auto e1 = (*stream)->Next(deadline), e2 = (*stream)->Next(deadline),
       e3 = (*stream)->Next(deadline);
  ASSERT_TRUE(e1.ok() && e2.ok() && e3.ok());
  EXPECT_EQ(e1->type, ExecEvent::Type::kStdout);
  EXPECT_EQ(e1->data, "out");
  EXPECT_EQ(e2->type, ExecEvent::Type::kStderr);
  EXPECT_EQ(e3->type, ExecEvent::Type::kExit);
  EXPECT_EQ(e3->code, 3);
  EXPECT_TRUE(g.channel_->status().ok());
}

TEST(GuestChannelTest, StdinWaitsForTheGuestsWindow) {
  FakeGuest g;
  g.Handshake();
  auto stream = g.channel_->StartExec({.argv = {"cat"}, .stdin = true});
  ASSERT_TRUE(stream.ok());
  uint32_t id = g.Receive().stream;
  std::string input(kInitialWindow + 100000, 'i');
  std::atomic<bool> done{false};
  std::thread writer([&] {
    EXPECT_TRUE((*stream)->WriteStdin(input).ok());
    done = true;
  });
  size_t received = 0;
  while (received < kInitialWindow) {
    Frame f = g.Receive();
    ASSERT_EQ(f.type, FrameType::kInput);
    received += f.payload.size();
  }
  EXPECT_EQ(received, kInitialWindow);
  usleep(100000);
  EXPECT_FALSE(done);  // blocked: no more window
  g.Send(FrameType::kWindow, id, PayloadWriter().U32(kInitialWindow).bytes());
  while (received < input.size()) received += g.Receive().payload.size();
  writer.join();
  EXPECT_TRUE(done);
}

TEST(GuestChannelTest, GarbageFailsTheChannelAndKillsTheVm) {
  FakeGuest g;
  g.Write(std::string(64, '\xff'));
  absl::Status s = g.WaitFailed();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("malformed"), absl::string_view::npos) << s;
  EXPECT_EQ(g.failures_, 1);
}

TEST(GuestChannelTest, OversizedFrameIsRefusedBeforeAllocation) {
  FakeGuest g;
  std::string header = EncodeFrame(FrameType::kStdout, 1, "");
  header[11] = 0x7f;  // ~2 GiB payload
  g.Write(header);
  absl::Status s = g.WaitFailed();
  EXPECT_NE(s.message().find("exceeds"), absl::string_view::npos) << s;
}

TEST(GuestChannelTest, FloodBeyondTheWindowIsAViolation) {
  FakeGuest g;
  g.Handshake();
  auto stream = g.channel_->StartExec({.argv = {"yes"}});
  ASSERT_TRUE(stream.ok());
  uint32_t id = g.Receive().stream;
  std::string chunk(kMaxPayload, 'y');
  for (uint32_t sent = 0; sent <= kInitialWindow && g.channel_->status().ok();
       sent += kMaxPayload) {
    g.Send(FrameType::kStdout, id, chunk);
  }
  absl::Status s = g.WaitFailed();
  EXPECT_NE(s.message().find("beyond the window"), absl::string_view::npos) << s;
  // The consumer sees the failure instead of hanging.
  absl::StatusOr<ExecEvent> e;
  do {
    e = (*stream)->Next(absl::Now() + absl::Seconds(5));
  } while (e.ok());
  EXPECT_FALSE(absl::IsDeadlineExceeded(e.status()));
}

TEST(GuestChannelTest, FramesForUnopenedStreamsAndWrongDirectionsAreViolations) {
  {
    FakeGuest g;
    g.Send(FrameType::kStdout, 99, "x");
    EXPECT_NE(g.WaitFailed().message().find("never opened"), absl::string_view::npos);
  }
  {
    FakeGuest g;
    g.Send(FrameType::kExecStart, 0, "");
    EXPECT_FALSE(g.WaitFailed().ok());
  }
  {
    FakeGuest g;
    g.Send(FrameType::kHello, 0, "short");
    EXPECT_NE(g.WaitFailed().message().find("malformed hello"), absl::string_view::npos);
  }
}

TEST(GuestChannelTest, GuestGoingAwayFailsPendingCalls) {
  FakeGuest g;
  g.Handshake();
  auto stream = g.channel_->StartExec({.argv = {"sleep"}});
  ASSERT_TRUE(stream.ok());
  g.guest_.reset();
  absl::StatusOr<ExecEvent> e = (*stream)->Next(absl::Now() + absl::Seconds(5));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("went away"), absl::string_view::npos) << e.status();
}

TEST(GuestChannelTest, FileAndMetricsRequests) {
  FakeGuest g;
  g.Handshake();
  std::thread guest([&] {
    Frame open = g.ReceiveRequest();
    EXPECT_EQ(open.type, FrameType::kFileWrite);
    Frame data = g.Receive();
    EXPECT_EQ(data.payload, "content");
    EXPECT_EQ(g.Receive().type, FrameType::kInputEnd);
    g.Send(FrameType::kExit, open.stream, PayloadWriter().U32(0).I32(0).Str("").bytes());
    Frame read = g.ReceiveRequest();
    EXPECT_EQ(read.type, FrameType::kFileRead);
    g.Send(FrameType::kStdout, read.stream, "file bytes");
    g.Send(FrameType::kExit, read.stream, PayloadWriter().U32(0).I32(0).Str("").bytes());
    Frame metrics = g.ReceiveRequest();
    GuestMetrics m;
    m.processes = 5;
    g.Send(FrameType::kMetrics, metrics.stream, EncodeMetrics(m));
  });
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  EXPECT_TRUE(g.channel_->WriteFile("/x", 0644, "content", deadline).ok());
  absl::StatusOr<std::string> read = g.channel_->ReadFile("/x", 100, deadline);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "file bytes");
  absl::StatusOr<GuestMetrics> m = g.channel_->Metrics(deadline);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->processes, 5u);
  guest.join();
}

TEST(GuestChannelTest, QuiesceRefusesWhileACommandRunsThenStopsBothDirections) {
  FakeGuest g;
  g.Handshake();
  auto stream = g.channel_->StartExec({.argv = {"sleep", "1"}});
  ASSERT_TRUE(stream.ok());
  g.Receive();
  absl::Status busy = g.channel_->Quiesce(absl::Now() + absl::Seconds(5));
  EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition) << busy;
  stream->reset();  // the host is done with it; the guest may still send late frames

  std::thread host([&] { EXPECT_TRUE(g.channel_->Quiesce(absl::Now() + absl::Seconds(5)).ok()); });
  EXPECT_EQ(g.Receive().type, FrameType::kPause);
  g.Send(FrameType::kPaused, 0, "");
  host.join();
  absl::StatusOr<std::unique_ptr<ExecStream>> refused = g.channel_->StartExec({.argv = {"true"}});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(g.channel_->status().ok());
}

TEST(GuestChannelTest, ARestoredChannelSyncsWithoutHelloAndOpensStreamsAboveTheGuests) {
  FakeGuest g;
  std::thread host([&] {
    GuestSync sync{.pids_max = 64, .hostname = "airlock-fork", .restored = true};
    EXPECT_TRUE(g.channel_->Handshake(absl::Now() + absl::Seconds(5), sync).ok());
  });
  Frame sync = g.Receive();
  ASSERT_EQ(sync.type, FrameType::kSync);
  PayloadReader r(sync.payload);
  int64_t sec;
  uint32_t nsec, pids;
  std::string entropy, hostname;
  ASSERT_TRUE(r.I64(&sec) && r.U32(&nsec) && r.Str(&entropy) && r.U32(&pids) && r.Str(&hostname) &&
              r.AtEnd());
  EXPECT_EQ(pids, 64u);
  EXPECT_EQ(hostname, "airlock-fork");
  EXPECT_EQ(entropy.size(), 64u);
  g.Send(FrameType::kReady, 0, PayloadWriter().U32(41).bytes());
  host.join();
  auto stream = g.channel_->StartExec({.argv = {"true"}});
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ(g.Receive().stream, 43u);
  // A late frame of a stream the guest had before the snapshot is not a violation.
  g.Send(FrameType::kExit, 39, PayloadWriter().U32(0).I32(0).Str("").bytes());
  usleep(50000);
  EXPECT_TRUE(g.channel_->status().ok());
}

TEST(GuestChannelTest, DataAfterPausedFailsTheChannel) {
  FakeGuest g;
  g.Handshake();
  g.Send(FrameType::kPaused, 0, "");  // nobody asked
  EXPECT_EQ(g.WaitFailed().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace airlock
