// A fake guest agent on the other end of a socketpair, for tests of the channel's host end
// and what sits on it: the test plays the guest frame by frame.
#ifndef AIRLOCK_TESTING_FAKE_GUEST_H_
#define AIRLOCK_TESTING_FAKE_GUEST_H_

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/vm/guest_channel.h"

namespace airlock {

class FakeGuest {
 public:
  // join_midway: the host end joins a guest that was serving another host (GuestChannel::Start).
  explicit FakeGuest(bool join_midway = false) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    guest_.reset(fds[1]);
    channel_ = GuestChannel::Start(
        UniqueFd(fds[0]),
        [this](const absl::Status& s) {
          ++failures_;
          last_failure_ = std::string(s.message());
        },
        join_midway);
  }
  ~FakeGuest() { channel_->Stop(); }

  void Write(const std::string& bytes) {
    ASSERT_EQ(write(guest_.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  void Send(FrameType type, uint32_t stream, const std::string& payload) {
    Write(EncodeFrame(type, stream, payload));
  }
  // Reads the next frame the host sent (type FrameType{} if none can be read).
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
      if (n <= 0) {
        // Nothing came (the host closed, or a receive timeout the test set): a frame of no
        // type, so that a caller waiting for one particular frame stops instead of spinning.
        frame.type = FrameType{};
        return frame;
      }
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
    Syncs([this] { EXPECT_TRUE(channel_->Handshake(absl::Now() + absl::Seconds(5)).ok()); },
          EncodePayload(ReadyMessage{}),
          [this] { Send(FrameType::kHello, 0, EncodeHello("fake")); });
  }
  // Runs `host` (a call of Handshake) on a thread, first does `guest_first` here, then answers
  // every kSync the host sends with a kReady of `ready` until `host` returns (the host sends
  // kSync again when an answer was slow, GuestChannel::Handshake). Returns the kSyncs.
  std::vector<Frame> Syncs(const std::function<void()>& host, const std::string& ready,
                           const std::function<void()>& guest_first = {}) {
    std::atomic<bool> done{false};
    std::thread thread([&] {
      host();
      done = true;
    });
    if (guest_first) guest_first();
    std::vector<Frame> syncs;
    while (!done) {
      pollfd in{.fd = guest_.get(), .events = POLLIN, .revents = 0};
      if (pending_.empty() && poll(&in, 1, 10) <= 0) continue;
      Frame sync = Receive();
      if (sync.type != FrameType::kSync) {
        ADD_FAILURE() << "frame " << static_cast<int>(sync.type) << " instead of kSync";
        break;
      }
      syncs.push_back(sync);
      Send(FrameType::kReady, 0, ready);
    }
    thread.join();
    return syncs;
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

}  // namespace airlock

#endif  // AIRLOCK_TESTING_FAKE_GUEST_H_
