#include "src/daemon/port_forward.h"

#include <deque>
#include <memory>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "src/common/log.h"
#include "src/vm/guest_channel.h"

namespace airlock {
namespace {

// How long a client that was told of a reset may take to half-close before the call is ended.
constexpr absl::Duration kResetGrace = absl::Seconds(5);

// The channel's side of one connection: what the guest sent, waiting for the client, and
// whether the guest's window opened. Its On* methods run on the channel's reader thread and only
// queue and signal.
class GuestRelay final : public GuestStreamHandler {
 public:
  void OnOpen(uint32_t, FrameType, std::string) override {}  // the host opened it
  void OnData(uint32_t, std::string data) override {
    absl::MutexLock lock(&mu_);
    from_guest_.push_back(std::move(data));
  }
  void OnDataEnd(uint32_t) override {
    absl::MutexLock lock(&mu_);
    guest_ended_ = true;
  }
  void OnReset(uint32_t, uint32_t code, std::string message) override {
    absl::MutexLock lock(&mu_);
    reset_ = code == 0 ? absl::AbortedError(absl::StrCat("the connection ended: ", message))
                       : absl::UnavailableError(message);
  }
  void OnWindow(uint32_t) override {
    absl::MutexLock lock(&mu_);
    window_ = true;
  }

  // What the writer does next: bytes to write, the guest's end, a reset, or the call's end.
  struct Next {
    std::optional<std::string> data;
    bool guest_ended = false;
    std::optional<absl::Status> reset;
    bool stopped = false;
    bool idle = false;  // nothing within the wait
  };
  Next WaitForGuest(absl::Duration wait) {
    absl::MutexLock lock(&mu_);
    bool ready = mu_.AwaitWithTimeout(absl::Condition(
                                          +[](GuestRelay* r) ABSL_SHARED_LOCKS_REQUIRED(r->mu_) {
                                            return !r->from_guest_.empty() || r->guest_ended_ ||
                                                   r->reset_.has_value() || r->stopped_;
                                          },
                                          this),
                                      wait);
    Next next;
    if (!ready) {
      next.idle = true;
      return next;
    }
    if (!from_guest_.empty()) {
      next.data = std::move(from_guest_.front());
      from_guest_.pop_front();
    } else if (reset_.has_value()) {
      next.reset = reset_;
    } else if (guest_ended_) {
      next.guest_ended = true;
    } else {
      next.stopped = true;
    }
    return next;
  }
  // Waits until the guest's window may have opened, the connection was reset, or the call
  // stopped; the reset if it was.
  std::optional<absl::Status> WaitForWindow() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](GuestRelay* r) ABSL_SHARED_LOCKS_REQUIRED(r->mu_) {
          return r->window_ || r->reset_.has_value() || r->stopped_;
        },
        this));
    window_ = false;
    if (stopped_) return absl::CancelledError("the client went away");
    return reset_;
  }
  void Stop() {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
  }
  std::optional<absl::Status> reset() {
    absl::MutexLock lock(&mu_);
    return reset_;
  }

 private:
  absl::Mutex mu_;
  std::deque<std::string> from_guest_ ABSL_GUARDED_BY(mu_);
  bool guest_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool window_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::Status> reset_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::Status PortForwarder::Run(const Principal& who, const v1::PortForwardStart& start,
                                const std::string& peer, PortForwardClient& client) {
  if (absl::Status s = CheckSessionId(start.session_id()); !s.ok()) return s;
  if (start.port() == 0 || start.port() > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port ", start.port(), " is not a TCP port; give one from 1 to 65535"));
  }
  absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(who, start.session_id());
  if (!live.ok()) return live.status();
  // Each connection holds one of airlockd's threads and descriptors: the tenant's quota.
  if (absl::Status s = sessions_->TakeConnection(live->get()->record.tenant); !s.ok()) return s;
  absl::Cleanup give = [&] { sessions_->GiveConnection((*live)->record.tenant); };
  return Relay(who, **live, static_cast<uint16_t>(start.port()), absl::StrCat("from ", peer),
               client, "session.port_forward");
}

absl::Status PortForwarder::Relay(const Principal& who, LiveSession& live, uint16_t port,
                                  const std::string& what, PortForwardClient& client,
                                  const std::string& action) {
  std::shared_ptr<GuestChannel> channel = live.vm->channel().shared_from_this();
  auto relay = std::make_shared<GuestRelay>();
  absl::StatusOr<uint32_t> opened = channel->ConnectGuestPort(port, relay);
  if (!opened.ok()) return opened.status();
  uint32_t id = *opened;
  absl::Time began = absl::Now();
  uint64_t to_guest = 0, from_guest = 0;

  // The guest's bytes to the client, granted back once written; its end; or its reset, told to
  // the client, who then half-closes (or is cut off after kResetGrace).
  absl::Notification reader_done;
  std::thread writer([&] {
    for (;;) {
      GuestRelay::Next next = relay->WaitForGuest(absl::Seconds(1));
      if (next.idle) {
        // A client gone while the guest's server says nothing: the server sees a reset.
        if (!client.Cancelled()) continue;
        channel->ResetGuestStream(id, {.code = ECONNRESET, .message = "the client went away"})
            .IgnoreError();
        return;
      }
      v1::PortForwardResponse response;
      if (next.data.has_value()) {
        from_guest += next.data->size();
        sessions_->Touch(live);
        if (live.ingress_from_guest) live.ingress_from_guest->Take(next.data->size());
        response.set_data(*next.data);
        if (!client.Write(response)) return;
        LogIfFailed(channel->GrantGuestData(id, static_cast<uint32_t>(next.data->size())),
                    "grant a guest connection more window");
        continue;
      }
      if (next.reset.has_value()) {
        response.set_reset(std::string(next.reset->message()));
        client.Write(response);
        if (!reader_done.WaitForNotificationWithTimeout(kResetGrace)) client.Cancel();
      } else if (next.guest_ended) {
        response.set_eof(true);
        client.Write(response);
      }
      return;
    }
  });

  // The client's bytes to the guest, within its window.
  absl::Status status;
  bool client_ended = false;
  v1::PortForwardRequest request;
  while (status.ok() && client.Read(&request)) {
    if (request.has_start()) {
      status = absl::InvalidArgumentError("ForwardPort takes its start once, first");
    } else if (request.has_eof()) {
      client_ended = true;
      status = channel->EndGuestData(id);
    } else if (!client_ended && !request.data().empty()) {
      std::string_view rest = request.data();
      to_guest += rest.size();
      sessions_->Touch(live);
      if (live.ingress_to_guest) live.ingress_to_guest->Take(rest.size());
      while (!rest.empty() && status.ok()) {
        absl::StatusOr<size_t> sent = channel->SendGuestData(id, rest);
        if (!sent.ok()) {
          status = sent.status();
        } else if (*sent > 0) {
          rest.remove_prefix(*sent);
        } else if (std::optional<absl::Status> reset = relay->WaitForWindow(); reset.has_value()) {
          status = *reset;
        }
      }
    }
  }
  reader_done.Notify();
  if (client.Cancelled()) status = absl::CancelledError("the client went away");
  if (std::optional<absl::Status> reset = relay->reset(); reset.has_value()) {
    status = *reset;  // the guest's side ended it; the writer told the client
  } else if (!status.ok()) {
    // The client is gone or broke the call: the guest's server sees a reset.
    channel->ResetGuestStream(id, {.code = ECONNRESET, .message = std::string(status.message())})
        .IgnoreError();
    relay->Stop();
  } else if (!client_ended) {
    // Half-closed without an eof message: the same as one.
    LogIfFailed(channel->EndGuestData(id), "end a guest connection's data");
  }
  // Until the guest's server ends its side too (or resets, or the session pauses).
  writer.join();
  if (std::optional<absl::Status> reset = relay->reset(); reset.has_value()) status = *reset;

  std::string outcome =
      absl::StrCat("port ", port, " ", what, ": ", to_guest, " bytes to the guest, ", from_guest,
                   " from it, ", absl::FormatDuration(absl::Now() - began));
  if (!status.ok()) absl::StrAppend(&outcome, "; ended: ", status.message());
  LogIfFailed(store_->audit().Audit(who, live.record.tenant, action, live.record.id, outcome),
              "audit a forwarded connection");
  return status;
}

}  // namespace airlock
