#include "src/vm/guest_channel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/errno_status.h"

namespace airlock {
namespace {

constexpr size_t kEntropyBytes = 64;
// How far behind the host's clock a guest may be left by a kSync that took long to answer, and
// how many more times it is sent to get within that.
constexpr absl::Duration kClockSlack = absl::Milliseconds(50);
constexpr int kClockAttempts = 3;

// Every kind of stream served by a handler rather than by the channel, as the channel sees it
// (the handler does the rest): a question, answered by one message that ends it, or a
// connection, data both ways under a window until a reset or both ends. The guest opens all but
// kOpenPort, the host's connection to a guest port; for those, how one is refused when nothing
// serves it.
struct GuestStreamKind {
  FrameType opens;
  bool guest_opens;
  bool connection;
  FrameType answer;  // a question's answer; kReset for a connection
  std::string (*refusal)(const std::string& why);
};
const GuestStreamKind kGuestStreamKinds[] = {
    {FrameType::kDnsQuery, true, false, FrameType::kDnsAnswer,
     [](const std::string& why) {
       return EncodePayload(DnsAnswerMessage{.verdict = DnsVerdict::kFailed, .message = why});
     }},
    {FrameType::kConnect, true, true, FrameType::kReset,
     [](const std::string& why) {
       return EncodePayload(ResetMessage{.code = ECONNREFUSED, .message = why});
     }},
    {FrameType::kOpenPort, false, true, FrameType::kReset, nullptr},
};

const GuestStreamKind* KindOf(FrameType type) {
  for (const GuestStreamKind& kind : kGuestStreamKinds) {
    if (kind.opens == type) return &kind;
  }
  return nullptr;
}

// The kind a frame from the guest opens, or nullptr if it opens none.
const GuestStreamKind* KindOpenedBy(FrameType type) {
  const GuestStreamKind* kind = KindOf(type);
  return kind != nullptr && kind->guest_opens ? kind : nullptr;
}

}  // namespace

ExecStream::~ExecStream() { channel_->CloseStream(id_); }

absl::StatusOr<ExecEvent> ExecStream::Next(absl::Time deadline) {
  return channel_->NextEvent(id_, deadline);
}

absl::Status ExecStream::WriteStdin(std::string_view data) {
  return channel_->SendInput(id_, data, absl::InfiniteFuture());
}

void ExecStream::Abandon() { channel_->AbandonStream(id_); }

absl::Status ExecStream::CloseStdin() { return channel_->Send(FrameType::kInputEnd, id_, ""); }

absl::Status ExecStream::Signal(int signal) {
  return channel_->SendMessage(id_, SignalMessage{.signal = signal});
}

absl::Status ExecStream::Resize(uint32_t rows, uint32_t cols) {
  if (rows == 0 || cols == 0 || rows > kMaxTerminalSide || cols > kMaxTerminalSide) {
    return absl::InvalidArgumentError(
        absl::StrCat("a terminal has 1 to ", kMaxTerminalSide, " rows and columns"));
  }
  return channel_->SendMessage(id_, ResizeMessage{.rows = rows, .cols = cols});
}

GuestChannel::GuestChannel(UniqueFd fd, FailureCallback on_failure, bool join_midway)
    : fd_(std::move(fd)), on_failure_(std::move(on_failure)), join_midway_(join_midway) {}

std::shared_ptr<GuestChannel> GuestChannel::Start(UniqueFd fd, FailureCallback on_failure,
                                                  bool join_midway) {
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
  std::shared_ptr<GuestChannel> channel(
      new GuestChannel(std::move(fd), std::move(on_failure), join_midway));
  channel->reader_ = std::thread([raw = channel.get()] { raw->ReadLoop(); });
  return channel;
}

GuestChannel::~GuestChannel() { Stop(); }

void GuestChannel::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (failure_.ok()) failure_ = absl::CancelledError("the VM was shut down");
  }
  cv_.SignalAll();
  if (reader_.joinable() && reader_.get_id() != std::this_thread::get_id()) reader_.join();
  DropGuestStreams("the VM was shut down");
  {
    absl::MutexLock lock(&mu_);
    guest_kinds_.clear();
  }
  absl::MutexLock lock(&write_mu_);
  fd_.reset();
}

absl::Status GuestChannel::status() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

void GuestChannel::Fail(const absl::Status& reason) {
  FailureCallback callback;
  {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return;
    failure_ = reason;
    callback = on_failure_;
  }
  cv_.SignalAll();
  DropGuestStreams(std::string(reason.message()));
  bool stopping;
  {
    absl::MutexLock lock(&mu_);
    stopping = stopping_;
  }
  if (callback && !stopping) callback(reason);
}

void GuestChannel::ReadLoop() {
  FrameParser parser;
  std::vector<uint8_t> buf(kMaxPayload + kFrameHeaderSize);
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || !failure_.ok()) return;
    }
    pollfd p = {fd_.get(), POLLIN, 0};
    int r = poll(&p, 1, 200);
    if (r < 0 && errno != EINTR) {
      Fail(ErrnoStatus("poll on the guest channel"));
      return;
    }
    if (r <= 0) continue;
    ssize_t n = read(fd_.get(), buf.data(), buf.size());
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      Fail(absl::UnavailableError(absl::StrCat("the VM went away (its channel ",
                                               n == 0 ? "closed" : strerror(errno), ")")));
      return;
    }
    std::span<const uint8_t> input(buf.data(), static_cast<size_t>(n));
    if (join_midway_) {
      // Skip to the agent's next hello; keep only a tail that could be the start of one.
      skipped_.append(reinterpret_cast<const char*>(buf.data()), static_cast<size_t>(n));
      size_t at = FindHelloFrame(skipped_);
      if (at == std::string::npos) {
        size_t keep = kFrameHeaderSize + sizeof(kHelloMagic) - 1;
        if (skipped_.size() > keep) skipped_.erase(0, skipped_.size() - keep);
        continue;
      }
      skipped_.erase(0, at);
      std::copy(skipped_.begin(), skipped_.end(), buf.begin());
      input = std::span<const uint8_t>(buf.data(), skipped_.size());
      skipped_.clear();
      join_midway_ = false;
    }
    Frame frame;
    std::function<void()> after;
    for (;;) {
      FrameParser::Result result = parser.Next(&input, &frame);
      if (result == FrameParser::Result::kNeedMore) break;
      absl::Status status = result == FrameParser::Result::kError
                                ? absl::DataLossError(absl::StrCat(
                                      "the guest sent a malformed frame: ", parser.error()))
                                : HandleFrame(frame, &after);
      if (after) {
        after();
        after = nullptr;
      }
      if (!status.ok()) {
        SendMessage(0, ProtocolErrorMessage{std::string(status.message())}).IgnoreError();
        Fail(status);
        return;
      }
    }
  }
}

absl::Status GuestChannel::HandleFrame(Frame& frame, std::function<void()>* after) {
  if (frame.stream != 0 && (frame.stream % 2 == 0 || IsPortStream(frame.stream))) {
    return HandleGuestStreamFrame(frame, after);
  }
  absl::MutexLock lock(&mu_);
  auto violation = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("the guest broke the channel protocol: ", what,
                                            " (stream ", frame.stream, ")"));
  };
  if (frame.stream == 0) {
    switch (frame.type) {
      case FrameType::kHello: {
        uint32_t version = 0;
        std::string agent;
        if (!DecodeHello(frame.payload, &version, &agent)) return violation("malformed hello");
        if (version != kProtocolVersion) {
          return absl::FailedPreconditionError(
              absl::StrCat("the guest agent speaks protocol ", version, ", this host ",
                           kProtocolVersion, "; rebuild the initramfs (scripts/setup.sh)"));
        }
        hello_ = true;
        break;
      }
      case FrameType::kReady: {
        ReadyMessage ready;
        if (!DecodePayload(frame.payload, &ready)) return violation("malformed ready");
        ready_problem_ = std::move(ready.problem);
        next_stream_ = std::max(next_stream_, (ready.highest_stream | 1) + 2);
        highest_guest_stream_ = std::max(highest_guest_stream_, ready.highest_guest_stream);
        ready_ = true;
        break;
      }
      case FrameType::kPaused:
        if (!quiescing_) return violation("pause answer nobody asked for");
        paused_ = true;
        // The guest has forgotten its background streams: their readers end once they have
        // what it sent before this.
        for (auto& [id, s] : streams_) s.interrupted = s.interrupted || s.quiesced;
        break;
      case FrameType::kProtocolError: {
        ProtocolErrorMessage error;
        if (!DecodePayload(frame.payload, &error)) return violation("malformed protocol error");
        return absl::DataLossError(absl::StrCat("the guest agent reported a protocol error: ",
                                                error.message.substr(0, 200)));
      }
      default:
        return violation("unexpected frame on the connection stream");
    }
    cv_.SignalAll();
    return absl::OkStatus();
  }
  auto it = streams_.find(frame.stream);
  if (it == streams_.end()) {
    // Late frames for a stream the host already closed are normal; unknown ids are not.
    if (frame.stream < next_stream_ && frame.stream % 2 == 1) return absl::OkStatus();
    return violation("frame for a stream the host never opened");
  }
  Stream& s = it->second;
  if (s.done) return violation("frame after the stream ended");
  if (paused_) return violation("frame after the guest paused");
  switch (frame.type) {
    case FrameType::kStdout:
    case FrameType::kStderr: {
      if (frame.payload.empty()) return violation("empty data frame");
      if (!s.window.Received(frame.payload.size())) return violation("data beyond the window");
      ExecEvent::Type type =
          frame.type == FrameType::kStdout ? ExecEvent::Type::kStdout : ExecEvent::Type::kStderr;
      // Output waiting for its reader joins the event before it: a guest sending 1-byte frames
      // costs the host bytes, not an event (~80 bytes) per byte of its window.
      if (!s.events.empty() && s.events.back().type == type &&
          s.events.back().data.size() + frame.payload.size() <= kMaxPayload) {
        s.events.back().data += frame.payload;
        break;
      }
      ExecEvent event;
      event.type = type;
      event.data = std::move(frame.payload);
      s.events.push_back(std::move(event));
      break;
    }
    case FrameType::kExit: {
      ExitMessage exit;
      if (!DecodePayload(frame.payload, &exit)) {
        return violation("malformed exit (cut short, or an exit status out of range)");
      }
      ExecEvent event;
      event.type = ExecEvent::Type::kExit;
      event.exit_kind = exit.kind;
      event.code = exit.code;
      event.message = std::move(exit.message);
      s.events.push_back(std::move(event));
      s.done = true;
      break;
    }
    case FrameType::kWindow: {
      WindowMessage window;
      if (!DecodePayload(frame.payload, &window)) return violation("malformed window");
      if (!s.window.Granted(window.bytes)) return violation("window grows beyond its size");
      break;
    }
    case FrameType::kMetrics:
      if (frame.payload.size() > 1024) return violation("oversized metrics");
      s.metrics = std::move(frame.payload);
      s.done = true;
      break;
    default:
      return violation(absl::StrCat("unexpected frame type ", static_cast<int>(frame.type)));
  }
  cv_.SignalAll();
  return absl::OkStatus();
}

absl::Status GuestChannel::HandleGuestStreamFrame(Frame& frame, std::function<void()>* after) {
  absl::MutexLock lock(&mu_);
  auto violation = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("the guest broke the channel protocol: ", what,
                                            " (stream ", frame.stream, ")"));
  };
  uint32_t id = frame.stream;
  const GuestStreamKind* opened_kind = KindOpenedBy(frame.type);
  bool opens = opened_kind != nullptr;
  auto it = guest_streams_.find(id);
  if (it == guest_streams_.end() && id % 2 == 1) {
    // A connection to a guest port that the host ended meanwhile: its late frames are normal.
    if (id < next_stream_) return absl::OkStatus();
    return violation("frame for a stream the host never opened");
  }
  if (it == guest_streams_.end()) {
    if (id <= highest_guest_stream_) {
      // A late frame of a stream the host ended (a reset, a pause); reopening an id is not.
      if (opens) return violation("stream id reused");
      return absl::OkStatus();
    }
    if (!opens) return violation("frame for a stream the guest never opened");
    if (id >= (1u << 31)) return violation("stream id out of range");
    highest_guest_stream_ = id;
    if (quiescing_ || paused_) return absl::OkStatus();  // the agent drops it at kPause
    auto kind = guest_kinds_.find(frame.type);
    std::shared_ptr<GuestStreamHandler> handler =
        kind == guest_kinds_.end() ? nullptr : kind->second;
    if (guest_streams_.size() - port_streams_ >= kMaxGuestStreams || handler == nullptr) {
      std::string why = handler == nullptr
                            ? "this session has no network"
                            : absl::StrCat("too many connections and DNS questions at once (",
                                           kMaxGuestStreams, ")");
      *after = [this, id, opened_kind, why] {
        // A failed write fails the channel, which is reported there.
        Send(opened_kind->answer, id, opened_kind->refusal(why)).IgnoreError();
      };
      return absl::OkStatus();
    }
    GuestStream& opened = guest_streams_[id];
    opened.kind = frame.type;
    opened.handler = handler;
    FrameType type = frame.type;
    *after = [handler, id, type, payload = std::move(frame.payload)]() mutable {
      handler->OnOpen(id, type, std::move(payload));
    };
    return absl::OkStatus();
  }
  GuestStream& g = it->second;
  std::shared_ptr<GuestStreamHandler> handler = g.handler;
  if (opens) return violation("stream id reused");
  if (!KindOf(g.kind)->connection) return violation("frame on a question stream");
  switch (frame.type) {
    case FrameType::kData:
      if (frame.payload.empty()) return violation("empty data frame");
      if (g.guest_ended) return violation("data after the end of the data");
      if (!g.window.Received(frame.payload.size())) return violation("data beyond the window");
      *after = [handler, id, data = std::move(frame.payload)]() mutable {
        handler->OnData(id, std::move(data));
      };
      return absl::OkStatus();
    case FrameType::kDataEnd:
      if (!frame.payload.empty() || g.guest_ended) return violation("malformed end of data");
      g.guest_ended = true;
      if (g.host_ended) ForgetGuestStream(it);
      *after = [handler, id] { handler->OnDataEnd(id); };
      return absl::OkStatus();
    case FrameType::kReset: {
      ResetMessage reset;
      if (!DecodePayload(frame.payload, &reset)) return violation("malformed reset");
      ForgetGuestStream(it);
      *after = [handler, id, reset = std::move(reset)]() mutable {
        handler->OnReset(id, reset.code, std::move(reset.message));
      };
      return absl::OkStatus();
    }
    case FrameType::kWindow: {
      WindowMessage window;
      if (!DecodePayload(frame.payload, &window)) return violation("malformed window");
      if (!g.window.Granted(window.bytes)) return violation("window grows beyond its size");
      *after = [handler, id] { handler->OnWindow(id); };
      return absl::OkStatus();
    }
    default:
      return violation(
          absl::StrCat("unexpected frame type ", static_cast<int>(frame.type), " on a connection"));
  }
}

void GuestChannel::DropGuestStreams(const std::string& why) {
  std::vector<std::pair<uint32_t, std::shared_ptr<GuestStreamHandler>>> dropped;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, g] : guest_streams_) dropped.emplace_back(id, g.handler);
    guest_streams_.clear();
    port_streams_ = 0;
  }
  for (const auto& [id, handler] : dropped) handler->OnReset(id, 0, why);
}

void GuestChannel::RegisterGuestStreamKind(FrameType opens,
                                           std::shared_ptr<GuestStreamHandler> handler) {
  absl::MutexLock lock(&mu_);
  if (handler == nullptr) {
    guest_kinds_.erase(opens);
  } else {
    guest_kinds_[opens] = std::move(handler);
  }
}

absl::Status GuestChannel::AnswerGuestStream(uint32_t id, FrameType type,
                                             std::string_view payload) {
  {
    absl::MutexLock lock(&mu_);
    auto it = guest_streams_.find(id);
    if (it == guest_streams_.end()) {
      return absl::OkStatus();  // dropped by a pause: the agent forgot the question too
    }
    const GuestStreamKind* kind = KindOf(it->second.kind);
    if (kind->connection || kind->answer != type) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stream ", id, " is not a question answered by frame type ", static_cast<int>(type)));
    }
    guest_streams_.erase(it);
  }
  return Send(type, id, payload);
}

void GuestChannel::ForgetGuestStream(std::map<uint32_t, GuestStream>::iterator it) {
  if (it->second.kind == FrameType::kOpenPort) --port_streams_;
  guest_streams_.erase(it);
}

bool GuestChannel::IsPortStream(uint32_t id) {
  absl::MutexLock lock(&mu_);
  return guest_streams_.count(id) != 0;
}

absl::StatusOr<uint32_t> GuestChannel::ConnectGuestPort(
    uint16_t port, std::shared_ptr<GuestStreamHandler> handler) {
  if (port == 0) return absl::InvalidArgumentError("a guest port is 1 to 65535");
  uint32_t id;
  {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return failure_;
    if (quiescing_ || paused_) {
      return absl::UnavailableError("the session is being snapshotted; try again in a moment");
    }
    if (port_streams_ >= kMaxPortStreams) {
      return absl::ResourceExhaustedError(
          absl::StrCat("this session has ", kMaxPortStreams,
                       " connections to its ports open already; close some and try again"));
    }
    id = next_stream_;
    next_stream_ += 2;
    GuestStream& opened = guest_streams_[id];
    opened.kind = FrameType::kOpenPort;
    opened.handler = std::move(handler);
    ++port_streams_;
  }
  if (absl::Status s = SendMessage(id, OpenPortMessage{.port = port}); !s.ok()) return s;
  return id;
}

absl::StatusOr<size_t> GuestChannel::SendGuestData(uint32_t id, std::string_view data) {
  size_t sent = 0;
  while (sent < data.size()) {
    size_t chunk;
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) return failure_;
      auto it = guest_streams_.find(id);
      if (it == guest_streams_.end() || it->second.host_ended) return sent;
      chunk = std::min<uint64_t>({data.size() - sent, it->second.window.sendable(), kMaxPayload});
      if (chunk == 0) return sent;
      it->second.window.Sent(chunk);
    }
    if (absl::Status s = Send(FrameType::kData, id, data.substr(sent, chunk)); !s.ok()) return s;
    sent += chunk;
  }
  return sent;
}

absl::Status GuestChannel::GrantGuestData(uint32_t id, uint32_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    auto it = guest_streams_.find(id);
    if (it == guest_streams_.end() || bytes == 0) return absl::OkStatus();
    it->second.window.Consumed(std::min<uint64_t>(bytes, it->second.window.unconsumed()));
    bytes = it->second.window.TakeGrant(/*force=*/true);
    if (bytes == 0) return absl::OkStatus();
  }
  return SendMessage(id, WindowMessage{.bytes = bytes});
}

absl::Status GuestChannel::EndGuestData(uint32_t id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = guest_streams_.find(id);
    if (it == guest_streams_.end() || it->second.host_ended) return absl::OkStatus();
    it->second.host_ended = true;
    if (it->second.guest_ended) ForgetGuestStream(it);
  }
  return Send(FrameType::kDataEnd, id, "");
}

absl::Status GuestChannel::ResetGuestStream(uint32_t id, const ResetMessage& reset) {
  {
    absl::MutexLock lock(&mu_);
    auto it = guest_streams_.find(id);
    if (it == guest_streams_.end()) return absl::OkStatus();
    ForgetGuestStream(it);
  }
  return SendMessage(id, reset);
}

absl::Status GuestChannel::Notify(FrameType type, std::string_view payload) {
  if (payload.size() > kMaxPayload) {
    return absl::InvalidArgumentError(absl::StrCat("a message of ", payload.size(),
                                                   " bytes does not fit in one frame (at most ",
                                                   kMaxPayload, ")"));
  }
  return Send(type, 0, payload);
}

absl::Status GuestChannel::Send(FrameType type, uint32_t stream, std::string_view payload) {
  std::string bytes = EncodeFrame(type, stream, payload);
  absl::MutexLock lock(&write_mu_);
  if (!fd_.valid()) return absl::CancelledError("the VM was shut down");
  absl::Time deadline = absl::Now() + kWriteTimeout;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = send(fd_.get(), bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return ErrnoStatus("write to the guest channel");
    if (absl::Now() > deadline) {
      absl::Status status =
          absl::DeadlineExceededError("the guest stopped reading its channel for 10 seconds");
      Fail(status);
      return status;
    }
    pollfd p = {fd_.get(), POLLOUT, 0};
    poll(&p, 1, 100);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> GuestChannel::OpenStream(bool background) {
  absl::MutexLock lock(&mu_);
  if (quiescing_) {
    return absl::UnavailableError("the session is being snapshotted; try again in a moment");
  }
  uint32_t id = next_stream_;
  next_stream_ += 2;
  streams_[id].background = background;
  return id;
}

void GuestChannel::InterruptStream(uint32_t id) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = streams_.find(id); it != streams_.end()) it->second.interrupted = true;
  }
  cv_.SignalAll();
}

bool GuestChannel::GuestHoldsStream(uint32_t id) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(id);
  return it != streams_.end() && !it->second.done && !it->second.quiesced;
}

void GuestChannel::CloseStream(uint32_t id) {
  absl::MutexLock lock(&mu_);
  streams_.erase(id);
}

absl::Status GuestChannel::Handshake(absl::Time deadline, const GuestSync& sync) {
  {
    absl::MutexLock lock(&mu_);
    while (!hello_ && !sync.restored && !quiescing_ && failure_.ok()) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) {
        return absl::DeadlineExceededError("the guest agent did not say hello in time");
      }
    }
    if (!failure_.ok()) return failure_;
    ready_ = false;
  }
  // The guest sets its clock to the time the message carries, so it ends up behind by however
  // long the message took to be read: a few milliseconds from a running guest, but a restore on
  // a loaded host can take the guest most of a second to get to it. So when the answer took
  // longer than kClockSlack, the message goes again to the guest that is now running, until
  // one comes back in time (the rest of what kSync does is the same each time).
  for (int attempt = 0;; ++attempt) {
    absl::Time sent = absl::Now();
    if (absl::Status s = SyncOnce(deadline, sync); !s.ok()) return s;
    if (absl::Now() - sent <= kClockSlack || attempt == kClockAttempts) break;
  }
  absl::MutexLock lock(&mu_);
  quiescing_ = paused_ = false;
  if (!ready_problem_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the guest could not set up its workspace or volumes: ", ready_problem_));
  }
  return absl::OkStatus();
}

absl::Status GuestChannel::SyncOnce(absl::Time deadline, const GuestSync& sync) {
  {
    absl::MutexLock lock(&mu_);
    ready_ = false;
  }
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  std::string entropy(kEntropyBytes, '\0');
  if (getrandom(entropy.data(), entropy.size(), 0) != static_cast<ssize_t>(entropy.size())) {
    return ErrnoStatus("getrandom");
  }
  SyncMessage message{.seconds = now.tv_sec,
                      .nanoseconds = static_cast<uint32_t>(now.tv_nsec),
                      .entropy = std::move(entropy),
                      .pids_max = sync.pids_max,
                      .hostname = sync.hostname,
                      .flags = sync.mount_workspace ? kSyncMountWorkspace : 0,
                      .volumes = sync.volumes};
  if (absl::Status s = SendMessage(0, message); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  while (!ready_ && failure_.ok()) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) {
      return absl::DeadlineExceededError("the guest agent did not become ready in time");
    }
  }
  return failure_;
}

absl::Status GuestChannel::Quiesce(absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return failure_;
    size_t running = 0;
    for (const auto& [id, s] : streams_) running += !s.background;
    if (running > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(running,
                       " command(s) or file operation(s) are still running; "
                       "wait for them to end (or stop them) and try again"));
    }
    for (auto& [id, s] : streams_) s.quiesced = s.quiesced || s.background;
    quiescing_ = true;
    paused_ = false;
    ready_ = false;
  }
  // Open connections end with the pause: the agent resets its side when it reads kPause, and
  // frames it sent before that are late frames of forgotten streams.
  DropGuestStreams("the session was paused");
  if (absl::Status s = Send(FrameType::kPause, 0, ""); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  while (!paused_ && failure_.ok()) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) {
      return absl::DeadlineExceededError("the guest agent did not pause in time");
    }
  }
  return failure_;
}

absl::StatusOr<ExecEvent> GuestChannel::NextEvent(uint32_t id, absl::Time deadline) {
  uint64_t grant = 0;
  ExecEvent event;
  {
    absl::MutexLock lock(&mu_);
    for (;;) {
      auto it = streams_.find(id);
      if (it == streams_.end()) return absl::FailedPreconditionError("stream closed");
      Stream& s = it->second;
      if (!s.events.empty()) {
        event = std::move(s.events.front());
        s.events.pop_front();
        if (event.type != ExecEvent::Type::kExit) {
          s.window.Consumed(event.data.size());
          grant = s.window.TakeGrant(/*force=*/s.events.empty());
        }
        break;
      }
      if (!failure_.ok()) return failure_;
      if (s.done) return absl::FailedPreconditionError("stream already ended");
      if (s.interrupted) {
        return absl::CancelledError("the reader was interrupted, or the session snapshotted");
      }
      if (cv_.WaitWithDeadline(&mu_, deadline) && absl::Now() >= deadline) {
        return absl::DeadlineExceededError("deadline passed");
      }
    }
  }
  if (grant > 0 && !event.data.empty()) {
    WindowMessage window{.bytes = static_cast<uint32_t>(grant)};
    if (absl::Status s = SendMessage(id, window); !s.ok()) return s;
  }
  return event;
}

void GuestChannel::AbandonStream(uint32_t id) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = streams_.find(id); it != streams_.end()) it->second.abandoned = true;
  }
  cv_.SignalAll();
}

absl::Status GuestChannel::SendInput(uint32_t id, std::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    size_t chunk;
    {
      absl::MutexLock lock(&mu_);
      for (;;) {
        if (!failure_.ok()) return failure_;
        auto it = streams_.find(id);
        if (it == streams_.end() || it->second.done) {
          return absl::FailedPreconditionError("the command has ended");
        }
        if (it->second.abandoned) return absl::CancelledError("the command was given up on");
        if (it->second.window.sendable() > 0) {
          chunk = std::min<uint64_t>({data.size(), it->second.window.sendable(), kMaxPayload});
          it->second.window.Sent(chunk);
          break;
        }
        if (cv_.WaitWithDeadline(&mu_, deadline) && absl::Now() >= deadline) {
          return absl::DeadlineExceededError("the guest did not accept input in time");
        }
      }
    }
    if (absl::Status s = Send(FrameType::kInput, id, data.substr(0, chunk)); !s.ok()) return s;
    data.remove_prefix(chunk);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ExecStream>> GuestChannel::StartExec(const ExecRequest& request) {
  if (request.argv.empty()) return absl::InvalidArgumentError("no command given");
  if (request.detach && (request.tty || request.stdin)) {
    return absl::InvalidArgumentError(
        "a detached command has neither input nor a terminal: leave out -i and -t with -d");
  }
  if (request.tty && (request.rows == 0 || request.cols == 0 || request.rows > kMaxTerminalSide ||
                      request.cols > kMaxTerminalSide)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a terminal has 1 to ", kMaxTerminalSide, " rows and columns"));
  }
  std::string payload = EncodePayload(ExecStartMessage{
      .argv = request.argv,
      .env = request.env,
      .cwd = request.cwd,
      .flags = (request.stdin ? kExecFlagStdin : 0) | (request.tty ? kExecFlagTty : 0) |
               (request.detach ? kExecFlagDetach : 0),
      .user = request.user,
      .rows = request.tty ? request.rows : 0,
      .cols = request.tty ? request.cols : 0,
      .exec_id = request.exec_id});
  if (payload.size() > kMaxPayload || request.argv.size() + request.env.size() > kMaxListItems) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the command line and environment together exceed ", kMaxPayload / 1024, " KiB"));
  }
  if (absl::Status s = status(); !s.ok()) return s;
  absl::StatusOr<uint32_t> opened = OpenStream();
  if (!opened.ok()) return opened.status();
  uint32_t id = *opened;
  std::unique_ptr<ExecStream> stream(new ExecStream(shared_from_this(), id));
  if (absl::Status s = Send(FrameType::kExecStart, id, payload); !s.ok()) return s;
  return stream;
}

GuestFileWrite::~GuestFileWrite() {
  if (!done_) channel_->CancelFileStream(id_);
  channel_->CloseStream(id_);
}

absl::Status GuestFileWrite::GuestFailure(absl::Time deadline) {
  for (;;) {
    absl::StatusOr<ExecEvent> event = channel_->NextEvent(id_, deadline);
    if (!event.ok()) return event.status();
    if (event->type != ExecEvent::Type::kExit) continue;
    done_ = true;
    absl::Status status = GuestChannel::FileExitStatus(*event, "write " + path_);
    return status.ok() ? absl::InternalError("the guest ended a file write early") : status;
  }
}

absl::Status GuestFileWrite::Write(std::string_view data, absl::Time deadline) {
  if (done_) return absl::FailedPreconditionError("the file write has ended");
  absl::Status sent = channel_->SendInput(id_, data, deadline);
  // The guest ended the stream (it could not open or write the file): its reason, not ours.
  if (absl::IsFailedPrecondition(sent) && channel_->status().ok()) return GuestFailure(deadline);
  return sent;
}

absl::Status GuestFileWrite::Finish(absl::Time deadline) {
  if (done_) return absl::FailedPreconditionError("the file write has ended");
  if (absl::Status s = channel_->Send(FrameType::kInputEnd, id_, ""); !s.ok()) return s;
  for (;;) {
    absl::StatusOr<ExecEvent> event = channel_->NextEvent(id_, deadline);
    if (!event.ok()) return event.status();
    if (event->type != ExecEvent::Type::kExit) continue;
    done_ = true;
    return GuestChannel::FileExitStatus(*event, "write " + path_);
  }
}

GuestFileRead::~GuestFileRead() {
  if (!done_) channel_->CancelFileStream(id_);
  channel_->CloseStream(id_);
}

absl::StatusOr<std::string> GuestFileRead::Next(absl::Time deadline) {
  if (done_) return std::string();
  for (;;) {
    absl::StatusOr<ExecEvent> event = channel_->NextEvent(id_, deadline);
    if (!event.ok()) return event.status();
    if (event->type == ExecEvent::Type::kExit) {
      done_ = true;
      if (absl::Status s = GuestChannel::FileExitStatus(*event, "read " + path_); !s.ok()) {
        return s;
      }
      return std::string();
    }
    if (!event->data.empty()) return std::move(event->data);
  }
}

void GuestChannel::CancelFileStream(uint32_t id) {
  // Any signal cancels a file stream; a channel that failed has nothing left to cancel.
  SendMessage(id, SignalMessage{.signal = SIGKILL}).IgnoreError();
}

absl::Status GuestChannel::FileExitStatus(const ExecEvent& exit, const std::string& what) {
  if (exit.exit_kind == ExitKind::kExited && exit.code == 0) return absl::OkStatus();
  return absl::Status(absl::ErrnoToStatusCode(exit.code),
                      absl::StrCat(what, " in the guest: ", exit.message));
}

absl::StatusOr<std::unique_ptr<GuestFileWrite>> GuestChannel::StartFileWrite(
    const std::string& path, uint32_t mode, const FileMetadata& metadata) {
  if (metadata.size() > kMaxFileMetadata) {
    return absl::InvalidArgumentError(
        absl::StrCat("a file has at most ", kMaxFileMetadata, " metadata entries"));
  }
  for (const auto& [key, value] : metadata) {
    if (!ValidMetadataKey(key) || !ValidMetadataValue(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata keys are 1 to ", kMaxMetadataKeyBytes,
                       " letters, digits or !#$%&'*+-.^_`|~, and values at most ",
                       kMaxMetadataValueBytes, " printable ASCII characters"));
    }
  }
  std::string payload =
      EncodePayload(FileWriteMessage{.path = path, .mode = mode, .metadata = metadata});
  if (payload.size() > kMaxPayload) return absl::InvalidArgumentError("path too long");
  if (absl::Status s = status(); !s.ok()) return s;
  absl::StatusOr<uint32_t> opened = OpenStream();
  if (!opened.ok()) return opened.status();
  std::unique_ptr<GuestFileWrite> file(new GuestFileWrite(shared_from_this(), *opened, path));
  if (absl::Status s = Send(FrameType::kFileWrite, *opened, payload); !s.ok()) return s;
  return file;
}

absl::StatusOr<std::unique_ptr<GuestFileRead>> GuestChannel::StartFileRead(
    const std::string& path) {
  std::string payload = EncodePayload(FileReadMessage{.path = path});
  if (payload.size() > kMaxPayload) return absl::InvalidArgumentError("path too long");
  if (absl::Status s = status(); !s.ok()) return s;
  absl::StatusOr<uint32_t> opened = OpenStream();
  if (!opened.ok()) return opened.status();
  std::unique_ptr<GuestFileRead> file(new GuestFileRead(shared_from_this(), *opened, path));
  if (absl::Status s = Send(FrameType::kFileRead, *opened, payload); !s.ok()) return s;
  return file;
}

absl::Status GuestChannel::WriteFile(const std::string& path, uint32_t mode,
                                     std::string_view content, absl::Time deadline) {
  absl::StatusOr<std::unique_ptr<GuestFileWrite>> file = StartFileWrite(path, mode);
  if (!file.ok()) return file.status();
  if (absl::Status s = (*file)->Write(content, deadline); !s.ok()) return s;
  return (*file)->Finish(deadline);
}

absl::StatusOr<std::string> GuestChannel::ReadFile(const std::string& path, size_t max_bytes,
                                                   absl::Time deadline) {
  absl::StatusOr<std::unique_ptr<GuestFileRead>> file = StartFileRead(path);
  if (!file.ok()) return file.status();
  std::string content;
  for (;;) {
    absl::StatusOr<std::string> piece = (*file)->Next(deadline);
    if (!piece.ok()) return piece.status();
    if (piece->empty()) return content;
    if (content.size() + piece->size() > max_bytes) {
      return absl::OutOfRangeError(
          absl::StrCat("read ", path, " in the guest is larger than ", max_bytes, " bytes"));
    }
    content += *piece;
  }
}

absl::StatusOr<std::string> GuestChannel::Collect(FrameType type, const std::string& payload,
                                                  size_t max_bytes, const std::string& what,
                                                  absl::Time deadline) {
  absl::StatusOr<uint32_t> opened = OpenStream();
  if (!opened.ok()) return opened.status();
  uint32_t id = *opened;
  ExecStream stream(shared_from_this(), id);
  if (absl::Status s = Send(type, id, payload); !s.ok()) return s;
  std::string content;
  for (;;) {
    absl::StatusOr<ExecEvent> event = NextEvent(id, deadline);
    if (!event.ok()) return event.status();
    if (event->type == ExecEvent::Type::kExit) {
      if (event->exit_kind == ExitKind::kExited) return content;
      return absl::Status(absl::ErrnoToStatusCode(event->code),
                          absl::StrCat(what, " in the guest: ", event->message));
    }
    if (content.size() + event->data.size() > max_bytes) {
      return absl::OutOfRangeError(
          absl::StrCat(what, " in the guest is larger than ", max_bytes, " bytes"));
    }
    content += event->data;
  }
}

absl::StatusOr<std::vector<TailRecord>> GuestChannel::TailFiles(const TailRequest& request,
                                                                absl::Time deadline) {
  std::string payload =
      EncodePayload(TailFilesMessage{.user = request.user,
                                     .dir = request.dir,
                                     .suffix = request.suffix,
                                     .depth = request.depth,
                                     .max_bytes = request.max_bytes,
                                     .offsets = {request.offsets.begin(), request.offsets.end()}});
  if (payload.size() > kMaxPayload || request.offsets.size() > kMaxTailFiles ||
      request.max_bytes > kMaxTailBytes || request.depth > kMaxTailDepth ||
      request.suffix.size() > kMaxTailSuffixBytes) {
    return absl::InvalidArgumentError("tail request over the protocol's limits");
  }
  // Each record adds at most a name and 24 bytes of framing to the content asked for.
  absl::StatusOr<std::string> answer =
      Collect(FrameType::kTailFiles, payload, request.max_bytes + kMaxTailFiles * (4096 + 24),
              "the files under " + request.dir, deadline);
  if (!answer.ok()) return answer.status();
  std::vector<TailRecord> records;
  std::string error;
  if (!DecodeTailRecords(*answer, request.max_bytes, &records, &error)) {
    absl::Status status =
        absl::DataLossError(absl::StrCat("the guest sent a bad tail answer: ", error));
    Fail(status);
    return status;
  }
  return records;
}

absl::StatusOr<std::vector<StoreRow>> GuestChannel::ReadAgentStore(const AgentStoreMessage& request,
                                                                   absl::Time deadline) {
  std::string payload = EncodePayload(request);
  AgentStoreMessage checked;
  if (payload.size() > kMaxPayload || !DecodePayload(payload, &checked)) {
    return absl::InvalidArgumentError("agent store request over the protocol's limits");
  }
  // Each row adds at most four ids and 28 bytes of framing to the data asked for.
  absl::StatusOr<std::string> answer =
      Collect(FrameType::kReadAgentStore, payload,
              request.max_bytes + kMaxReasonBytes + 8 +
                  static_cast<size_t>(request.max_rows) * (4 * (kMaxStoreIdBytes + 4) + 28),
              "the agent's store", deadline);
  if (!answer.ok()) return answer.status();
  int number = 0;
  std::string what, error;
  std::vector<StoreRow> rows;
  if (!DecodeStoreAnswer(*answer, request, &number, &what, &rows, &error)) {
    absl::Status status =
        absl::DataLossError(absl::StrCat("the guest sent a bad agent store answer: ", error));
    Fail(status);
    return status;
  }
  if (number == ENOENT) return absl::NotFoundError(what);
  if (number != 0) return absl::UnavailableError(what);
  return rows;
}

absl::StatusOr<std::vector<FsEntry>> GuestChannel::FsRequest(const FsRequestMessage& request,
                                                             absl::Time deadline) {
  std::string payload = EncodePayload(request);
  if (payload.size() > kMaxPayload || request.depth > kMaxFsDepth) {
    return absl::InvalidArgumentError("the paths are too long");
  }
  // The guest's message names the paths; this says what was being done.
  static constexpr const char* kWhat[] = {"", "stat", "list", "mkdir", "move", "remove"};
  uint32_t op = static_cast<uint32_t>(request.op);
  absl::StatusOr<std::string> answer = Collect(FrameType::kFsRequest, payload, kMaxFsAnswerBytes,
                                               op < 6 ? kWhat[op] : "file", deadline);
  if (!answer.ok()) return answer.status();
  std::vector<FsEntry> entries;
  std::string error;
  if (!DecodeFsEntries(*answer, &entries, &error)) {
    absl::Status status =
        absl::DataLossError(absl::StrCat("the guest sent a bad answer about files: ", error));
    Fail(status);
    return status;
  }
  return entries;
}

absl::StatusOr<std::unique_ptr<GuestWatch>> GuestChannel::StartWatch(
    const WatchDirMessage& request) {
  std::string payload = EncodePayload(request);
  if (payload.size() > kMaxPayload) return absl::InvalidArgumentError("the path is too long");
  if (absl::Status s = status(); !s.ok()) return s;
  absl::StatusOr<uint32_t> opened = OpenStream();
  if (!opened.ok()) return opened.status();
  std::unique_ptr<GuestWatch> watch(new GuestWatch(shared_from_this(), *opened, request.path));
  if (absl::Status s = Send(FrameType::kWatchDir, *opened, payload); !s.ok()) return s;
  return watch;
}

GuestWatch::~GuestWatch() {
  if (!done_) channel_->CancelFileStream(id_);
  channel_->CloseStream(id_);
}

template <typename Record>
absl::StatusOr<std::vector<Record>> GuestChannel::NextRecords(
    uint32_t id, absl::Time deadline, bool* done,
    bool (*decode)(std::string_view, std::vector<Record>*, std::string*),
    const std::function<absl::Status(const ExecEvent&)>& ended, const char* what) {
  for (;;) {
    absl::StatusOr<ExecEvent> event = NextEvent(id, deadline);
    if (!event.ok()) return event.status();
    if (event->type == ExecEvent::Type::kExit) {
      *done = true;
      return ended(*event);
    }
    std::vector<Record> records;
    std::string error;
    if (!decode(event->data, &records, &error)) {
      absl::Status status =
          absl::DataLossError(absl::StrCat("the guest sent a bad ", what, ": ", error));
      Fail(status);
      return status;
    }
    if (!records.empty()) return records;
  }
}

absl::StatusOr<std::vector<WatchRecord>> GuestWatch::Next(absl::Time deadline) {
  if (done_) return absl::FailedPreconditionError("the watch has ended");
  return channel_->NextRecords<WatchRecord>(
      id_, deadline, &done_, DecodeWatchRecords,
      [this](const ExecEvent& exit) {
        if (exit.exit_kind == ExitKind::kExited) {
          return absl::OutOfRangeError(absl::StrCat(path_, " was removed or moved in the guest"));
        }
        if (exit.exit_kind == ExitKind::kFailed && exit.code == EOVERFLOW) {
          return absl::ResourceExhaustedError(
              absl::StrCat("watch ", path_, " in the guest: ", exit.message));
        }
        return GuestChannel::FileExitStatus(exit, "watch " + path_);
      },
      "watch record");
}

absl::StatusOr<std::unique_ptr<GuestActivity>> GuestChannel::StartActivity() {
  if (absl::Status s = status(); !s.ok()) return s;
  absl::StatusOr<uint32_t> opened = OpenStream(/*background=*/true);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<GuestActivity> activity(new GuestActivity(shared_from_this(), *opened));
  if (absl::Status s = Send(FrameType::kWatchActivity, *opened, ""); !s.ok()) return s;
  return activity;
}

GuestActivity::~GuestActivity() {
  // A stream a snapshot closed is not cancelled: the guest forgot it at kPause.
  if (!done_ && channel_->GuestHoldsStream(id_)) channel_->CancelFileStream(id_);
  channel_->CloseStream(id_);
}

void GuestActivity::Interrupt() { channel_->InterruptStream(id_); }

absl::StatusOr<std::vector<ActivityRecord>> GuestActivity::Next(absl::Time deadline) {
  if (done_) return absl::FailedPreconditionError("the activity record's reading has ended");
  return channel_->NextRecords<ActivityRecord>(
      id_, deadline, &done_, DecodeActivityRecords,
      [](const ExecEvent& exit) {
        if (exit.exit_kind == ExitKind::kExited) {
          return absl::CancelledError("another reader took over the activity record");
        }
        return GuestChannel::FileExitStatus(exit, "record the guest's activity");
      },
      "activity record");
}

absl::StatusOr<GuestMetrics> GuestChannel::Metrics(absl::Time deadline) {
  absl::StatusOr<uint32_t> opened = OpenStream();
  if (!opened.ok()) return opened.status();
  uint32_t id = *opened;
  ExecStream stream(shared_from_this(), id);
  if (absl::Status s = Send(FrameType::kMetricsRequest, id, ""); !s.ok()) return s;
  absl::ReleasableMutexLock lock(&mu_);
  for (;;) {
    if (!failure_.ok()) return failure_;
    Stream& s = streams_[id];
    if (s.done) {
      GuestMetrics m;
      if (!DecodePayload(s.metrics, &m)) {
        absl::Status status = absl::DataLossError("the guest sent malformed metrics");
        lock.Release();
        Fail(status);
        return status;
      }
      return m;
    }
    if (cv_.WaitWithDeadline(&mu_, deadline) && absl::Now() >= deadline) {
      return absl::DeadlineExceededError("the guest did not report metrics in time");
    }
  }
}

}  // namespace airlock
