// A fake guest on the other end of a socketpair: well-behaved, then hostile.
#include "src/vm/guest_channel.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "src/testing/fake_guest.h"

namespace airlock {
namespace {

// The fields of a kExecStart payload, all of them and nothing after.
struct ExecStartFields {
  std::vector<std::string> argv, env;
  std::string cwd, user;
  uint32_t flags = 0, rows = 0, cols = 0;
  uint64_t exec_id = 0;
};
bool ParseExecStart(const std::string& payload, ExecStartFields* f) {
  PayloadReader r(payload);
  return r.StrList(&f->argv) && r.StrList(&f->env) && r.Str(&f->cwd) && r.U32(&f->flags) &&
         r.Str(&f->user) && r.U32(&f->rows) && r.U32(&f->cols) && r.U64(&f->exec_id) && r.AtEnd();
}

TEST(GuestChannelTest, ACommandOnATerminalCarriesItsSizeAndResizes) {
  FakeGuest g;
  g.Handshake();
  EXPECT_FALSE(g.channel_->StartExec({.argv = {"sh"}, .tty = true, .rows = 0, .cols = 80}).ok());
  EXPECT_FALSE(
      g.channel_->StartExec({.argv = {"sh"}, .tty = true, .rows = 24, .cols = 10001}).ok());
  auto stream =
      g.channel_->StartExec({.argv = {"sh"}, .stdin = true, .tty = true, .rows = 50, .cols = 132});
  ASSERT_TRUE(stream.ok());
  Frame start = g.Receive();
  ASSERT_EQ(start.type, FrameType::kExecStart);
  ExecStartFields f;
  ASSERT_TRUE(ParseExecStart(start.payload, &f));
  auto& [argv, env, cwd, user, flags, rows, cols, exec_id] = f;
  EXPECT_EQ(flags, kExecFlagStdin | kExecFlagTty);
  EXPECT_EQ(rows, 50u);
  EXPECT_EQ(cols, 132u);
  EXPECT_FALSE((*stream)->Resize(0, 10).ok());
  ASSERT_TRUE((*stream)->Resize(60, 200).ok());
  Frame resize = g.Receive();
  EXPECT_EQ(resize.type, FrameType::kResize);
  EXPECT_EQ(resize.stream, start.stream);
  PayloadReader size(resize.payload);
  ASSERT_TRUE(size.U32(&rows) && size.U32(&cols) && size.AtEnd());
  EXPECT_EQ(rows, 60u);
  EXPECT_EQ(cols, 200u);
}

TEST(GuestChannelTest, RunsACommandWithSeparateStreams) {
  FakeGuest g;
  g.Handshake();
  auto stream = g.channel_->StartExec(
      {.argv = {"echo", "hi"}, .cwd = "/w", .user = "app:staff", .exec_id = 42});
  ASSERT_TRUE(stream.ok());
  Frame start = g.Receive();
  ASSERT_EQ(start.type, FrameType::kExecStart);
  ExecStartFields f;
  ASSERT_TRUE(ParseExecStart(start.payload, &f));
  auto& [argv, env, cwd, user, flags, rows, cols, exec_id] = f;
  EXPECT_EQ(argv[1], "hi");
  EXPECT_EQ(cwd, "/w");
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(rows, 0u);  // no terminal
  EXPECT_EQ(cols, 0u);
  EXPECT_EQ(user, "app:staff");
  EXPECT_EQ(exec_id, 42u);  // the activity record names the command's processes by it
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

TEST(GuestChannelTest, TinyOutputFramesAreJoinedWhileTheyWait) {
  FakeGuest g;
  g.Handshake();
  auto stream = g.channel_->StartExec({.argv = {"yes"}});
  ASSERT_TRUE(stream.ok());
  Frame start = g.Receive();
  // A second command whose exit comes after all of the first one's frames: once it is read,
  // every frame of the first is queued, and nobody has taken any of them yet.
  auto marker = g.channel_->StartExec({.argv = {"true"}});
  ASSERT_TRUE(marker.ok());
  Frame marker_start = g.Receive();
  std::string frames;
  for (int i = 0; i < 4000; ++i) frames += EncodeFrame(FrameType::kStdout, start.stream, "y");
  std::string exit = PayloadWriter().U32(0).I32(0).Str("").bytes();
  frames += EncodeFrame(FrameType::kExit, start.stream, exit);
  frames += EncodeFrame(FrameType::kExit, marker_start.stream, exit);
  g.Write(frames);
  auto marker_exit = (*marker)->Next(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(marker_exit.ok()) << marker_exit.status();
  auto out = (*stream)->Next(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->data, std::string(4000, 'y')) << "each 1-byte frame stayed an event of its own";
  auto end = (*stream)->Next(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->type, ExecEvent::Type::kExit);
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

TEST(GuestChannelTest, AGuestThatNeverGrantsInputWindowCannotHoldTheHostOnceItGivesUp) {
  FakeGuest g;
  g.Handshake();
  auto stream = g.channel_->StartExec({.argv = {"cat"}, .stdin = true});
  ASSERT_TRUE(stream.ok());
  g.Receive();  // the exec
  std::string input(kInitialWindow + 100000, 'i');
  absl::Status written;
  std::thread writer([&] { written = (*stream)->WriteStdin(input); });
  size_t received = 0;
  while (received < kInitialWindow) received += g.Receive().payload.size();
  usleep(100000);  // the writer now waits for a grant that will never come
  (*stream)->Abandon();
  writer.join();
  EXPECT_EQ(written.code(), absl::StatusCode::kCancelled) << written;
  EXPECT_EQ((*stream)->WriteStdin("more").code(), absl::StatusCode::kCancelled);
}

TEST(GuestChannelTest, GarbageFailsTheChannelAndKillsTheVm) {
  FakeGuest g;
  g.Write(std::string(64, '\xff'));
  absl::Status s = g.WaitFailed();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("malformed"), absl::string_view::npos) << s;
  EXPECT_EQ(g.failures_, 1);
}

TEST(GuestChannelTest, AnExitStatusNoProcessCanHaveFailsTheChannel) {
  for (auto [kind, code] : std::vector<std::pair<uint32_t, int32_t>>{
           {0, 256}, {0, -1}, {1, 0}, {1, 65}, {1, INT32_MAX}, {2, -5}, {3, 1 << 20}}) {
    FakeGuest g;
    g.Handshake();
    auto stream = g.channel_->StartExec({.argv = {"true"}});
    ASSERT_TRUE(stream.ok());
    Frame start = g.Receive();
    g.Send(FrameType::kExit, start.stream, PayloadWriter().U32(kind).I32(code).Str("").bytes());
    absl::Status s = g.WaitFailed();
    EXPECT_NE(s.message().find("exit status out of range"), absl::string_view::npos)
        << kind << " " << code << ": " << s;
  }
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

TEST(GuestChannelTest, AHostJoiningMidwaySkipsToTheAgentsNextHello) {
  FakeGuest g(/*join_midway=*/true);
  std::vector<Frame> syncs =
      g.Syncs([&] { EXPECT_TRUE(g.channel_->Handshake(absl::Now() + absl::Seconds(5)).ok()); },
              PayloadWriter().U32(0).U32(0).Str("").bytes(),
              [&] {
                // The tail of a frame the last host never read whole, then output of a stream this
                // host never opened, then the agent's hello in two pieces.
                g.Write(std::string(700, 'x'));
                g.Send(FrameType::kStdout, 7, "old output");
                std::string hello = EncodeFrame(FrameType::kHello, 0, EncodeHello("agent"));
                g.Write(hello.substr(0, 15));
                usleep(20000);
                g.Write(hello.substr(15));
              });
  EXPECT_FALSE(syncs.empty());
  EXPECT_TRUE(g.channel_->status().ok()) << g.channel_->status();
  // From here on it is an ordinary channel.
  auto stream = g.channel_->StartExec({.argv = {"true"}});
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ(g.Receive().type, FrameType::kExecStart);
}

TEST(GuestChannelTest, AHostJoiningMidwayWaitsForTheHello) {
  FakeGuest g(/*join_midway=*/true);
  g.Send(FrameType::kReady, 0, PayloadWriter().U32(0).U32(0).Str("").bytes());
  absl::Status s = g.channel_->Handshake(absl::Now() + absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_TRUE(g.channel_->status().ok());  // skipped bytes are no violation
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
    g.Send(FrameType::kMetrics, metrics.stream, EncodePayload(m));
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

TEST(GuestChannelTest, AFileWriteGivenUpOnIsCancelledInTheGuest) {
  FakeGuest g;
  g.Handshake();
  uint32_t id = 0;
  {
    auto file = g.channel_->StartFileWrite("/big", 0600);
    ASSERT_TRUE(file.ok()) << file.status();
    Frame open = g.ReceiveRequest();
    ASSERT_EQ(open.type, FrameType::kFileWrite);
    id = open.stream;
    ASSERT_TRUE((*file)->Write("first piece", absl::Now() + absl::Seconds(5)).ok());
    EXPECT_EQ(g.Receive().payload, "first piece");
  }  // no Finish: the client went away
  Frame cancel = g.Receive();
  EXPECT_EQ(cancel.type, FrameType::kSignal);
  EXPECT_EQ(cancel.stream, id);
  // The guest's late answer for the forgotten stream is not a violation.
  g.Send(FrameType::kExit, id, PayloadWriter().U32(1).I32(ECANCELED).Str("cancelled").bytes());
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(g.channel_->status().ok()) << g.channel_->status();
}

TEST(GuestChannelTest, AFileWriteTheGuestRefusesFailsWithTheGuestsReason) {
  FakeGuest g;
  g.Handshake();
  auto file = g.channel_->StartFileWrite("/no/such/dir/f", 0644);
  ASSERT_TRUE(file.ok());
  Frame open = g.ReceiveRequest();
  g.Send(FrameType::kExit, open.stream,
         PayloadWriter().U32(1).I32(ENOENT).Str("No such file or directory").bytes());
  // As a real guest does, it goes on reading its channel (and drops what it refused): a
  // guest that stops reading is a stalled channel, another failure.
  timeval limit = {1, 0};
  setsockopt(g.guest_.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  std::thread drain([&g] {
    char buf[65536];
    while (read(g.guest_.get(), buf, sizeof(buf)) > 0) {
    }
  });
  // The window lets the first pieces go before the refusal is seen; a later one reports it.
  absl::Status status;
  std::string piece(64 * 1024, 'x');
  for (int i = 0; i < 64 && status.ok(); ++i) {
    status = (*file)->Write(piece, absl::Now() + absl::Seconds(5));
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_NE(status.message().find("write /no/such/dir/f in the guest"), std::string::npos);
  EXPECT_FALSE((*file)->Finish(absl::Now() + absl::Seconds(5)).ok());
  drain.join();
}

TEST(GuestChannelTest, AFileReadComesInPiecesAndCanBeCancelled) {
  FakeGuest g;
  g.Handshake();
  auto file = g.channel_->StartFileRead("/data");
  ASSERT_TRUE(file.ok());
  Frame open = g.ReceiveRequest();
  ASSERT_EQ(open.type, FrameType::kFileRead);
  g.Send(FrameType::kStdout, open.stream, "one");
  g.Send(FrameType::kStdout, open.stream, "two");
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  std::string got;
  while (got.size() < 6) {
    absl::StatusOr<std::string> piece = (*file)->Next(deadline);
    ASSERT_TRUE(piece.ok()) << piece.status();
    got += *piece;
  }
  EXPECT_EQ(got, "onetwo");
  file->reset();
  Frame cancel = g.ReceiveRequest();
  EXPECT_EQ(cancel.type, FrameType::kSignal);
  EXPECT_EQ(cancel.stream, open.stream);
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

TEST(GuestChannelTest, AWorkspaceTheGuestCouldNotMountFailsTheHandshakeWithItsReason) {
  FakeGuest g;
  absl::Status result;
  std::vector<Frame> syncs = g.Syncs(
      [&] {
        GuestSync sync{.restored = true, .mount_workspace = true};
        result = g.channel_->Handshake(absl::Now() + absl::Seconds(5), sync);
      },
      PayloadWriter().U32(0).U32(0).Str("mount /workspace: No such device").bytes());
  ASSERT_FALSE(syncs.empty());
  PayloadReader r(syncs[0].payload);
  int64_t sec;
  uint32_t nsec, pids, flags, volumes;
  std::string entropy, hostname;
  ASSERT_TRUE(r.I64(&sec) && r.U32(&nsec) && r.Str(&entropy) && r.U32(&pids) && r.Str(&hostname) &&
              r.U32(&flags) && r.U32(&volumes) && r.AtEnd());
  EXPECT_EQ(volumes, 0u);
  EXPECT_EQ(flags, kSyncMountWorkspace);
  EXPECT_EQ(result.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(result.message().find("volumes: mount /workspace: No such device"),
            absl::string_view::npos)
      << result;
}

TEST(GuestChannelTest, ARestoredChannelSyncsWithoutHelloAndOpensStreamsAboveTheGuests) {
  FakeGuest g;
  std::vector<Frame> syncs = g.Syncs(
      [&] {
        GuestSync sync{.pids_max = 64, .hostname = "airlock-fork", .restored = true};
        EXPECT_TRUE(g.channel_->Handshake(absl::Now() + absl::Seconds(5), sync).ok());
      },
      PayloadWriter().U32(41).U32(0).Str("").bytes());
  ASSERT_FALSE(syncs.empty());
  PayloadReader r(syncs[0].payload);
  int64_t sec;
  uint32_t nsec, pids, flags, volumes;
  std::string entropy, hostname;
  ASSERT_TRUE(r.I64(&sec) && r.U32(&nsec) && r.Str(&entropy) && r.U32(&pids) && r.Str(&hostname) &&
              r.U32(&flags) && r.U32(&volumes) && r.AtEnd());
  EXPECT_EQ(volumes, 0u);
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(pids, 64u);
  EXPECT_EQ(hostname, "airlock-fork");
  EXPECT_EQ(entropy.size(), 64u);
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

TEST(GuestChannelTest, GuestStreamsWithoutAHandlerAreAnsweredNotFailed) {
  FakeGuest g;
  g.Handshake();
  g.Send(FrameType::kDnsQuery, 2, PayloadWriter().Str("pypi.org").U32(1).bytes());
  Frame answer = g.Receive();
  EXPECT_EQ(answer.type, FrameType::kDnsAnswer);
  EXPECT_EQ(answer.stream, 2u);
  EXPECT_NE(answer.payload.find("no network"), std::string::npos);
  g.Send(FrameType::kConnect, 4, PayloadWriter().Str("pypi.org").Str("abcd").U32(443).bytes());
  Frame reset = g.Receive();
  EXPECT_EQ(reset.type, FrameType::kReset);
  EXPECT_EQ(reset.stream, 4u);
  // Late frames of the refused connection are ignored.
  g.Send(FrameType::kData, 4, "late");
  usleep(50000);
  EXPECT_TRUE(g.channel_->status().ok());
}

TEST(GuestChannelTest, HostileGuestStreamFramesFailTheChannel) {
  for (int c = 0; c < 3; ++c) {
    FakeGuest g;
    g.Handshake();
    if (c == 0) g.Send(FrameType::kData, 8, "never opened");
    if (c == 1) {
      g.Send(FrameType::kDnsQuery, 2, PayloadWriter().Str("a").U32(1).bytes());
      g.Receive();
      g.Send(FrameType::kDnsQuery, 2, PayloadWriter().Str("a").U32(1).bytes());  // id reused
    }
    if (c == 2) g.Send(FrameType::kConnect, 3, "");  // odd ids are the host's
    EXPECT_EQ(g.WaitFailed().code(), absl::StatusCode::kDataLoss) << c;
  }
}

class RecordingHandler : public GuestStreamHandler {
 public:
  void OnOpen(uint32_t id, FrameType type, std::string payload) override { Add("open", id); }
  void OnData(uint32_t id, std::string data) override { Add("data:" + data, id); }
  void OnDataEnd(uint32_t id) override { Add("end", id); }
  void OnReset(uint32_t id, uint32_t code, std::string message) override { Add("reset", id); }
  void OnWindow(uint32_t id) override { Add("window", id); }
  std::vector<std::string> Seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }

 private:
  void Add(const std::string& what, uint32_t id) {
    absl::MutexLock lock(&mu_);
    seen_.push_back(what + "@" + std::to_string(id));
  }
  absl::Mutex mu_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

TEST(GuestChannelTest, AQuestionIsAnsweredOnceAndOnlyByItsKindsAnswer) {
  FakeGuest g;
  g.Handshake();
  auto handler = std::make_shared<RecordingHandler>();
  g.channel_->RegisterGuestStreamKind(FrameType::kDnsQuery, handler);
  g.channel_->RegisterGuestStreamKind(FrameType::kConnect, handler);
  g.Send(FrameType::kDnsQuery, 2, PayloadWriter().Str("pypi.org").U32(1).bytes());
  g.Send(FrameType::kConnect, 4, PayloadWriter().Str("x").Str("abcd").U32(80).bytes());
  for (int i = 0; i < 100 && handler->Seen().size() < 2; ++i) usleep(10000);
  ASSERT_EQ(handler->Seen(), (std::vector<std::string>{"open@2", "open@4"}));
  // A connection is not a question: answering it is the host's mistake, and nothing is sent.
  DnsAnswerMessage allowed{.verdict = DnsVerdict::kAllowed, .ports = {443}};
  EXPECT_EQ(g.channel_->AnswerGuestStream(4, allowed).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.channel_->AnswerGuestStream(2, ResetMessage{.code = 1}).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(g.channel_->AnswerGuestStream(2, allowed).ok());
  Frame answer = g.Receive();
  EXPECT_EQ(answer.type, FrameType::kDnsAnswer);
  EXPECT_EQ(answer.stream, 2u);
  DnsAnswerMessage decoded;
  ASSERT_TRUE(DecodePayload(answer.payload, &decoded));
  EXPECT_EQ(decoded.ports, std::vector<uint16_t>{443});
  // The answer ended the question: a second one sends nothing.
  EXPECT_TRUE(g.channel_->AnswerGuestStream(2, allowed).ok());
  // A message on the control stream, and one too big for a frame refused before it is sent.
  ASSERT_TRUE(g.channel_->Notify(NetPolicyMessage{}).ok());
  EXPECT_EQ(g.Receive().type, FrameType::kNetPolicy);
  NetPolicyMessage huge;
  huge.rules.resize(kMaxListItems, {.base = "abcd", .prefix = 32, .ports = {}});
  for (auto& rule : huge.rules) rule.ports.assign(kMaxRulePorts, 443);
  EXPECT_EQ(g.channel_->Notify(huge).code(), absl::StatusCode::kInvalidArgument);
  // Data on a question is a broken protocol.
  g.Send(FrameType::kDnsQuery, 6, PayloadWriter().Str("a").U32(1).bytes());
  g.Send(FrameType::kData, 6, "not a connection");
  EXPECT_EQ(g.WaitFailed().code(), absl::StatusCode::kDataLoss);
}

TEST(GuestChannelTest, GuestConnectionsKeepTheirWindowsAndEndWithAPause) {
  FakeGuest g;
  g.Handshake();
  auto handler = std::make_shared<RecordingHandler>();
  g.channel_->RegisterGuestStreamKind(FrameType::kConnect, handler);
  g.Send(FrameType::kConnect, 2, PayloadWriter().Str("x").Str("abcd").U32(80).bytes());
  g.Send(FrameType::kData, 2, "hello");
  for (int i = 0; i < 100 && handler->Seen().size() < 2; ++i) usleep(10000);
  // The host may send only as much as the guest's window.
  std::string big(kConnectionWindow + 10, 'x');
  size_t got = 0;
  std::thread reader([&] {
    while (got < kConnectionWindow) got += g.Receive().payload.size();
  });
  absl::StatusOr<size_t> sent = g.channel_->SendGuestData(2, big);
  reader.join();
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ(*sent, kConnectionWindow);
  EXPECT_EQ(got, kConnectionWindow);
  EXPECT_EQ(*g.channel_->SendGuestData(2, "more"), 0u);
  g.Send(FrameType::kWindow, 2, PayloadWriter().U32(4).bytes());
  for (int i = 0; i < 100 && handler->Seen().size() < 3; ++i) usleep(10000);
  std::thread pause([&] { EXPECT_TRUE(g.channel_->Quiesce(absl::Now() + absl::Seconds(5)).ok()); });
  Frame f = g.Receive();
  EXPECT_EQ(f.type, FrameType::kPause);
  g.Send(FrameType::kPaused, 0, "");
  pause.join();
  for (int i = 0; i < 100 && handler->Seen().size() < 4; ++i) usleep(10000);
  EXPECT_EQ(handler->Seen(),
            (std::vector<std::string>{"open@2", "data:hello@2", "window@2", "reset@2"}));
  // More data than the window from a hostile guest fails the channel.
  FakeGuest h;
  h.Handshake();
  h.channel_->RegisterGuestStreamKind(FrameType::kConnect, handler);
  h.Send(FrameType::kConnect, 2, PayloadWriter().Str("x").Str("abcd").U32(80).bytes());
  for (uint32_t sentb = 0; sentb <= kConnectionWindow; sentb += kMaxPayload) {
    h.Send(FrameType::kData, 2, std::string(kMaxPayload, 'y'));
  }
  EXPECT_EQ(h.WaitFailed().code(), absl::StatusCode::kDataLoss);
}

TEST(GuestChannelTest, AConnectionToAGuestPortIsAHostStreamServedLikeTheGuestsOwn) {
  FakeGuest g;
  g.Handshake();
  auto handler = std::make_shared<RecordingHandler>();
  EXPECT_EQ(g.channel_->ConnectGuestPort(0, handler).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<uint32_t> id = g.channel_->ConnectGuestPort(8000, handler);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id % 2, 1u);  // the host's ids are odd
  Frame open = g.Receive();
  EXPECT_EQ(open.type, FrameType::kOpenPort);
  EXPECT_EQ(open.stream, *id);
  OpenPortMessage port;
  ASSERT_TRUE(DecodePayload(open.payload, &port));
  EXPECT_EQ(port.port, 8000u);
  // Bytes both ways within windows, like a guest-opened connection.
  ASSERT_EQ(*g.channel_->SendGuestData(*id, "GET /"), 5u);
  EXPECT_EQ(g.Receive().payload, "GET /");
  g.Send(FrameType::kData, *id, "200 OK");
  g.Send(FrameType::kWindow, *id, PayloadWriter().U32(5).bytes());
  g.Send(FrameType::kReset, *id, PayloadWriter().U32(ECONNRESET).Str("gone").bytes());
  g.Send(FrameType::kData, *id, "late");  // after the reset: ignored
  for (int i = 0; i < 100 && handler->Seen().size() < 3; ++i) usleep(10000);
  std::string at = "@" + std::to_string(*id);
  EXPECT_EQ(handler->Seen(),
            (std::vector<std::string>{"data:200 OK" + at, "window" + at, "reset" + at}));
  // Another connection ends with a pause; a guest may not open a stream of this kind.
  absl::StatusOr<uint32_t> second = g.channel_->ConnectGuestPort(9000, handler);
  ASSERT_TRUE(second.ok());
  g.Receive();
  std::thread pause([&] { EXPECT_TRUE(g.channel_->Quiesce(absl::Now() + absl::Seconds(5)).ok()); });
  EXPECT_EQ(g.Receive().type, FrameType::kPause);
  g.Send(FrameType::kPaused, 0, "");
  pause.join();
  for (int i = 0; i < 100 && handler->Seen().size() < 4; ++i) usleep(10000);
  EXPECT_EQ(handler->Seen().back(), "reset@" + std::to_string(*second));
  EXPECT_EQ(g.channel_->ConnectGuestPort(9000, handler).status().code(),
            absl::StatusCode::kUnavailable);
  FakeGuest h;
  h.Handshake();
  h.Send(FrameType::kOpenPort, 2, PayloadWriter().U32(80).bytes());
  EXPECT_EQ(h.WaitFailed().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
TEST(GuestChannelTest, ASyncAnsweredLateGoesAgainSoTheClockIsNotLeftBehind) {
  // A guest just restored on a busy host reads the first kSync late and would set its clock to
  // a time already past; the host sends it again with the time of then.
  FakeGuest g;
  Frame first;
  std::vector<Frame> later = g.Syncs(
      [&] {
        EXPECT_TRUE(g.channel_->Handshake(absl::Now() + absl::Seconds(5), {.restored = true}).ok());
      },
      PayloadWriter().U32(0).U32(0).Str("").bytes(),
      [&] {
        first = g.Receive();
        usleep(200000);
        g.Send(FrameType::kReady, 0, PayloadWriter().U32(0).U32(0).Str("").bytes());
      });
  ASSERT_EQ(first.type, FrameType::kSync);
  ASSERT_FALSE(later.empty());
  SyncMessage was, now;
  ASSERT_TRUE(DecodePayload(first.payload, &was));
  ASSERT_TRUE(DecodePayload(later[0].payload, &now));
  int64_t apart_ns = (now.seconds - was.seconds) * 1000000000 +
                     static_cast<int64_t>(now.nanoseconds) - static_cast<int64_t>(was.nanoseconds);
  EXPECT_GE(apart_ns, 200000000);
  EXPECT_TRUE(g.channel_->status().ok());
}

}  // namespace airlock
