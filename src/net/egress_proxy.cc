#include "src/net/egress_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/common/log.h"
#include "src/common/wipe.h"
#include "src/net/http_intercept.h"
#include "src/net/http_request_gate.h"
#include "src/net/http_request_head.h"
#include "src/net/tls_client_hello.h"

namespace airlock::net {
namespace {

constexpr size_t kReadHighWater = 256 * 1024;
constexpr int kMaxResolving = 8;
constexpr int64_t kResolvedTtlMs = 30000;
constexpr int64_t kUnresolvedTtlMs = 5000;
constexpr int64_t kDnsEventRepeatMs = 10000;

int64_t NowMs() {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

std::once_flag libevent_threads;

socklen_t ToSockaddr(const IpAddress& a, uint16_t port, sockaddr_storage* out) {
  memset(out, 0, sizeof(*out));
  if (a.family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(out);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    memcpy(&sin->sin_addr, a.bytes.data(), 4);
    return sizeof(sockaddr_in);
  }
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(out);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(port);
  memcpy(&sin6->sin6_addr, a.bytes.data(), 16);
  return sizeof(sockaddr_in6);
}

std::string Destination(const std::string& name, const std::string& address, uint32_t port) {
  return absl::StrCat(name.empty() ? address : name, ":", port);
}

}  // namespace

absl::StatusOr<std::vector<IpAddress>> SystemResolver::Resolve(const std::string& name) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(name.c_str(), nullptr, &hints, &result);
  if (rc == EAI_NONAME || rc == EAI_NODATA) {
    return absl::NotFoundError(absl::StrCat(name, " does not resolve"));
  }
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("resolve ", name, ": ", gai_strerror(rc)));
  }
  std::vector<IpAddress> addresses;
  for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    IpAddress a;
    a.family = ai->ai_family;
    if (ai->ai_family == AF_INET) {
      memcpy(a.bytes.data(), &reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr, 4);
    } else if (ai->ai_family == AF_INET6) {
      memcpy(a.bytes.data(), &reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr, 16);
    } else {
      continue;
    }
    if (std::find(addresses.begin(), addresses.end(), a) == addresses.end()) {
      addresses.push_back(a);
    }
  }
  freeaddrinfo(result);
  if (addresses.empty()) return absl::NotFoundError(absl::StrCat(name, " has no addresses"));
  return addresses;
}

absl::StatusOr<std::unique_ptr<StaticResolver>> StaticResolver::Parse(
    std::string_view text, std::shared_ptr<Resolver> fallback) {
  auto resolver = std::unique_ptr<StaticResolver>(new StaticResolver());
  resolver->fallback_ = std::move(fallback);
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_number;
    line = line.substr(0, line.find('#'));
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    std::optional<IpAddress> address =
        IpAddress::Parse(std::string_view(fields[0].data(), fields[0].size()));
    if (!address || fields.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", line_number, ": expected \"ADDRESS NAME [NAME...]\", as in /etc/hosts"));
    }
    for (size_t i = 1; i < fields.size(); ++i) {
      std::string name = absl::AsciiStrToLower(absl::StripSuffix(fields[i], "."));
      resolver->entries_.emplace_back(name, *address);
    }
  }
  return resolver;
}

absl::StatusOr<std::vector<IpAddress>> StaticResolver::Resolve(const std::string& name) {
  std::vector<IpAddress> found;
  for (const auto& [n, a] : entries_) {
    if (n == name) found.push_back(a);
  }
  if (!found.empty()) return found;
  if (fallback_ == nullptr) return absl::NotFoundError(absl::StrCat(name, " does not resolve"));
  return fallback_->Resolve(name);
}

// What the guest is told of a name it may not reach or a connection the host refused or ended:
// the reason itself (an internal address a name resolved to, a line of the operator's ceiling,
// what an upstream said) is the host's to keep, in the session's network log.
constexpr char kToGuest[] = "refused by the host; airlock network log says why";

NetPolicyMessage GuestNetPolicy(const EgressPolicy& policy) {
  NetPolicyMessage message;
  for (const EgressRule& r : policy.session_rules()) {
    if (r.kind == EgressRule::Kind::kAddress && r.prefix.base.family == AF_INET &&
        !r.ports.empty() && message.rules.size() < kMaxListItems) {
      message.rules.push_back(
          {.base = std::string(reinterpret_cast<const char*>(r.prefix.base.bytes.data()), 4),
           .prefix = static_cast<uint32_t>(r.prefix.length),
           .ports = {r.ports.begin(),
                     r.ports.begin() + std::min<size_t>(r.ports.size(), kMaxRulePorts)}});
    }
  }
  return message;
}

std::string DescribeNetEvent(const NetEvent& e) {
  std::string where = Destination(e.name, e.address, e.port);
  if (e.kind == "dns") {
    if (e.allowed) return absl::StrCat("egress: dns ", e.name, " allowed by ", e.rule);
    return absl::StrCat("egress: dns ", e.name, " denied: ", e.reason);
  }
  if (e.kind == "secret") {
    if (e.allowed)
      return absl::StrCat("egress: secret ", e.rule, " sent to ", where, " (", e.reason, ")");
    return absl::StrCat("egress: secret ", e.rule, " at ", where, ": ", e.reason);
  }
  if (!e.allowed) return absl::StrCat("egress: connect ", where, " denied: ", e.reason);
  std::string line = absl::StrCat(
      "egress: connect ", where, e.name.empty() ? "" : absl::StrCat(" (", e.address, ")"),
      " allowed by ", e.rule, ", ", e.bytes_out, " bytes out, ", e.bytes_in, " in");
  if (!e.reason.empty()) absl::StrAppend(&line, "; ended: ", e.reason);
  return line;
}

// Work handed to the loop from other threads (the channel's reader, resolver threads, the
// daemon). Shared with resolver threads that may outlive the proxy: once closed, work is
// dropped.
struct Inbox {
  absl::Mutex mu;
  std::deque<std::function<void()>> work ABSL_GUARDED_BY(mu);
  event* wake = nullptr;
  bool closed ABSL_GUARDED_BY(mu) = false;

  void Post(std::function<void()> fn) {
    absl::MutexLock lock(&mu);
    if (closed) return;
    work.push_back(std::move(fn));
    event_active(wake, EV_READ, 0);
  }
};

class EgressProxy::Impl {
 public:
  struct Conn {
    Impl* impl = nullptr;
    uint32_t id = 0;
    std::string name;
    std::string address;  // dialed (or, for an address rule, asked for)
    uint16_t port = 0;
    std::string rule;
    bufferevent* bev = nullptr;
    event* timer = nullptr;
    bool resolved = false;  // target passed the address checks
    IpAddress target;
    bool connected = false;
    bool need_check = false;  // SNI (443) or Host (80) must be the name
    bool checked = false;
    bool relaying = false;
    std::string pending;     // guest bytes held until the check passed and the dial completed
    uint64_t ungranted = 0;  // guest bytes not yet granted back
    bool guest_ended = false;
    bool upstream_shut = false;
    bool upstream_ended = false;
    bool ended_to_guest = false;
    bool window_closed = false;
    bool counted = false;   // holds a place in options_.ledger
    int64_t active_ms = 0;  // when a byte last went either way (as of the last sweep)
    uint64_t swept_bytes = 0;
    uint64_t bytes_out = 0;
    uint64_t bytes_in = 0;
    std::string end_reason;  // why a connection that ended cleanly ended early
    // Set when the connection is intercepted (TLS terminated here; see HttpIntercept).
    struct Intercept {
      std::unique_ptr<TlsEnd> guest;     // we are the server the guest asked for
      std::unique_ptr<TlsEnd> upstream;  // we are the real server's client
      std::unique_ptr<HttpIntercept> http;
      std::string to_guest;    // ciphertext waiting for the guest's window
      bool finishing = false;  // the guest's side ends once to_guest is sent
      std::set<std::string> reported;
    };
    std::unique_ptr<Intercept> intercept;
    std::string scan_tail;  // of a plaintext connection, for placeholders split across reads
    // Port 80: every request's Host is checked, not only the first one's (see Check).
    std::unique_ptr<HttpRequestGate> gate;
    std::set<std::string> warned;
  };
  struct CacheEntry {
    absl::StatusOr<std::vector<IpAddress>> result;
    int64_t until_ms = 0;
  };

  Impl(std::shared_ptr<GuestChannel> channel, std::shared_ptr<const EgressPolicy> policy,
       EgressProxyOptions options)
      : channel_(std::move(channel)), options_(std::move(options)), policy_(std::move(policy)) {
    secrets_ = std::move(options_.secrets);
    ca_ = options_.ca;
  }

  absl::Status Start() {
    std::call_once(libevent_threads, [] { evthread_use_pthreads(); });
    base_ = event_base_new();
    if (base_ == nullptr) return absl::InternalError("event_base_new failed");
    inbox_ = std::make_shared<Inbox>();
    inbox_->wake = event_new(base_, -1, EV_PERSIST, &Impl::OnWake, this);
    flush_ = event_new(base_, -1, EV_PERSIST, &Impl::OnFlush, this);
    timeval every = {0, 250000};
    event_add(flush_, &every);
    event_add(inbox_->wake, nullptr);
    if (options_.idle_timeout_ms > 0) {
      int ms = std::clamp(options_.idle_timeout_ms / 4, 250, 5000);
      timeval sweep = {ms / 1000, (ms % 1000) * 1000};
      sweep_ = event_new(base_, -1, EV_PERSIST, &Impl::OnSweep, this);
      event_add(sweep_, &sweep);
    }
    if (options_.bytes_per_second > 0) {
      // One token bucket for the session's connections together, refilled every 100 ms.
      size_t rate = std::min<uint64_t>(options_.bytes_per_second, 1ull << 30) / 10;
      timeval tick = {0, 100000};
      rate_cfg_ = ev_token_bucket_cfg_new(rate, rate * 2, rate, rate * 2, &tick);
      rate_group_ = bufferevent_rate_limit_group_new(base_, rate_cfg_);
    }
    thread_ = std::thread([this] { event_base_loop(base_, EVLOOP_NO_EXIT_ON_EMPTY); });
    return absl::OkStatus();
  }

  void Stop() {
    {
      absl::MutexLock lock(&stop_mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    if (base_ == nullptr) return;
    inbox_->Post([this] { event_base_loopbreak(base_); });
    if (thread_.joinable()) thread_.join();
    {
      absl::MutexLock lock(&inbox_->mu);
      inbox_->closed = true;
      inbox_->work.clear();  // a waiting Flush() sees its promise broken and returns
    }
    for (auto& [id, c] : conns_) FreeConn(*c);
    conns_.clear();  // each connection's HttpIntercept wipes its copies
    {
      absl::MutexLock lock(&secrets_mu_);
      WipeSecrets();
    }
    FlushEvents();
    if (rate_group_ != nullptr) bufferevent_rate_limit_group_free(rate_group_);
    if (rate_cfg_ != nullptr) ev_token_bucket_cfg_free(rate_cfg_);
    event_free(inbox_->wake);
    event_free(flush_);
    if (sweep_ != nullptr) event_free(sweep_);
    event_base_free(base_);
    base_ = nullptr;
  }

  void Post(std::function<void()> fn) {
    if (inbox_ != nullptr) inbox_->Post(std::move(fn));
  }

  // --- on the loop thread from here on ---

  static void OnWake(evutil_socket_t, short, void* arg) {
    auto* self = static_cast<Impl*>(arg);
    std::deque<std::function<void()>> work;
    {
      absl::MutexLock lock(&self->inbox_->mu);
      work.swap(self->inbox_->work);
    }
    for (auto& fn : work) fn();
  }

  static void OnFlush(evutil_socket_t, short, void* arg) { static_cast<Impl*>(arg)->FlushEvents(); }

  // Ends the connections that carried nothing either way for options_.idle_timeout_ms.
  static void OnSweep(evutil_socket_t, short, void* arg) {
    auto* self = static_cast<Impl*>(arg);
    int64_t now = NowMs();
    std::vector<uint32_t> idle;
    for (auto& [id, c] : self->conns_) {
      uint64_t bytes = c->bytes_in + c->bytes_out;
      if (bytes != c->swept_bytes) {
        c->swept_bytes = bytes;
        c->active_ms = now;
      } else if (now - c->active_ms >= self->options_.idle_timeout_ms) {
        idle.push_back(id);
      }
    }
    for (uint32_t id : idle) {
      self->Close(
          *self->conns_[id], ETIMEDOUT,
          absl::StrCat("idle for ",
                       absl::FormatDuration(absl::Milliseconds(self->options_.idle_timeout_ms)),
                       " (no byte either way; airlockd --egress-idle-timeout)"),
          true);
    }
  }

  void FlushEvents() {
    if (events_.empty() || !options_.on_events) return;
    std::vector<NetEvent> batch;
    batch.swap(events_);
    options_.on_events(std::move(batch));
  }

  void Record(NetEvent e) {
    e.unix_ms = NowMs();
    {
      absl::MutexLock lock(&counters_mu_);
      if (!e.allowed && e.kind != "secret") ++counters_.denied;
      if (e.kind == "connect" && e.allowed) {
        ++counters_.connections;
        counters_.bytes_out += e.bytes_out;
        counters_.bytes_in += e.bytes_in;
      }
    }
    if (e.kind == "dns") {
      std::string key = absl::StrCat(e.name, e.allowed ? "+" : "-", e.reason);
      auto [it, fresh] = dns_seen_.try_emplace(key, e.unix_ms);
      if (!fresh && e.unix_ms - it->second < kDnsEventRepeatMs) return;
      it->second = e.unix_ms;
      if (dns_seen_.size() > 4096) dns_seen_.clear();
    }
    if (events_.size() < 100000) events_.push_back(std::move(e));
  }

  // Resolution off the loop, cached, coalesced per name, at most kMaxResolving at once.
  using ResolveCallback = std::function<void(const absl::StatusOr<std::vector<IpAddress>>&)>;
  void Resolve(const std::string& name, ResolveCallback done) {
    auto cached = cache_.find(name);
    if (cached != cache_.end() && cached->second.until_ms > NowMs()) {
      done(cached->second.result);
      return;
    }
    auto [waiting, first] = resolving_.try_emplace(name);
    waiting->second.push_back(std::move(done));
    if (!first) return;
    if (in_flight_ >= kMaxResolving) {
      queued_.push_back(name);
      return;
    }
    Launch(name);
  }

  void Launch(const std::string& name) {
    ++in_flight_;
    std::shared_ptr<Inbox> inbox = inbox_;
    std::shared_ptr<Resolver> resolver = options_.resolver;
    std::thread([inbox, resolver, name, this] {
      absl::StatusOr<std::vector<IpAddress>> result = resolver->Resolve(name);
      inbox->Post([this, name, result] { Resolved(name, result); });
    }).detach();
  }

  void Resolved(const std::string& name, const absl::StatusOr<std::vector<IpAddress>>& result) {
    --in_flight_;
    if (result.ok() || absl::IsNotFound(result.status())) {
      cache_[name] = {result, NowMs() + (result.ok() ? kResolvedTtlMs : kUnresolvedTtlMs)};
      if (cache_.size() > 4096) cache_.clear();
    }
    std::vector<ResolveCallback> waiting = std::move(resolving_[name]);
    resolving_.erase(name);
    for (auto& done : waiting) done(result);
    while (in_flight_ < kMaxResolving && !queued_.empty()) {
      std::string next = queued_.front();
      queued_.pop_front();
      Launch(next);
    }
  }

  // --- DNS questions ---

  void Question(uint32_t id, const std::string& payload) {
    DnsQueryMessage question;
    if (!DecodePayload(payload, &question)) {
      Answer(id, DnsVerdict::kFailed, {});
      return;
    }
    std::string name = absl::AsciiStrToLower(question.name);
    std::shared_ptr<const EgressPolicy> policy = Policy();
    PortSet ports = policy->PortsForName(name);
    if (ports.any) ports.ports.clear();  // the guest listens on named ports only
    if (ports.ports.empty()) {
      Decision d = policy->CheckName(name, 443);
      std::string why = d.allowed || d.reason.empty()
                            ? absl::StrCat(name,
                                           " is allowed on no port the guest can listen on; "
                                           "allow it with its ports named")
                            : d.reason;
      Record({.kind = "dns", .name = name, .reason = why});
      Answer(id, DnsVerdict::kDenied, {});
      return;
    }
    Resolve(name, [this, id, name, ports](const absl::StatusOr<std::vector<IpAddress>>& result) {
      if (!result.ok()) {
        bool missing = absl::IsNotFound(result.status());
        Record({.kind = "dns", .name = name, .reason = std::string(result.status().message())});
        Answer(id, missing ? DnsVerdict::kNoSuchName : DnsVerdict::kFailed, {});
        return;
      }
      std::shared_ptr<const EgressPolicy> policy = Policy();
      std::string why;
      for (const IpAddress& a : *result) {
        Decision d = policy->CheckAddress(name, a, ports.ports.front());
        if (d.allowed) {
          Record({.kind = "dns",
                  .name = name,
                  .address = a.ToString(),
                  .allowed = true,
                  .rule = d.rule});
          Answer(id, DnsVerdict::kAllowed, ports.ports);
          return;
        }
        if (why.empty()) why = d.reason;
      }
      Record({.kind = "dns", .name = name, .address = (*result)[0].ToString(), .reason = why});
      Answer(id, DnsVerdict::kDenied, {});
    });
  }

  // The guest hears the verdict and a fixed text; why stays on the host, in the recorded event
  // (never an internal address a name resolved to or a line of the operator's ceiling).
  void Answer(uint32_t id, DnsVerdict verdict, const std::vector<uint16_t>& ports) {
    DnsAnswerMessage answer{.verdict = verdict,
                            .ports = ports,
                            .message = verdict == DnsVerdict::kAllowed ? "" : kToGuest};
    if (std::shared_ptr<GuestChannel> channel = channel_.lock()) {
      channel->AnswerGuestStream(id, answer).IgnoreError();  // a failed write fails the channel
    }
  }

  // --- connections ---

  void Open(uint32_t id, const std::string& payload) {
    ConnectMessage open;
    if (!DecodePayload(payload, &open)) {
      Refuse(id, {.kind = "connect", .reason = "malformed connection request"}, EINVAL);
      return;
    }
    const std::string& name = open.name;
    const std::string& address = open.address;
    uint32_t port = open.port;
    IpAddress asked;
    asked.family = address.size() == 4 ? AF_INET : AF_INET6;
    memcpy(asked.bytes.data(), address.data(), address.size());
    auto conn = std::make_unique<Conn>();
    Conn& c = *conn;
    c.impl = this;
    c.id = id;
    c.name = absl::AsciiStrToLower(name);
    c.port = static_cast<uint16_t>(port);
    c.need_check = !c.name.empty() && (port == options_.tls_port || port == 80);
    if (conns_.size() >= options_.max_connections) {
      Refuse(id,
             {.kind = "connect",
              .name = c.name,
              .address = asked.ToString(),
              .port = port,
              .reason = absl::StrCat("too many connections at once (the session's cap is ",
                                     options_.max_connections, ")")},
             ECONNREFUSED);
      return;
    }
    if (options_.ledger != nullptr) {
      if (absl::Status s = options_.ledger->Take(options_.tenant, options_.tenant_connections);
          !s.ok()) {
        Refuse(id,
               {.kind = "connect",
                .name = c.name,
                .address = asked.ToString(),
                .port = port,
                .reason = std::string(s.message())},
               ECONNREFUSED);
        return;
      }
      c.counted = true;
    }
    c.active_ms = NowMs();
    conns_[id] = std::move(conn);
    std::shared_ptr<const EgressPolicy> policy = Policy();
    if (c.name.empty()) {
      Decision d = policy->CheckAddress("", asked, c.port);
      c.address = asked.ToString();
      if (!d.allowed) return Close(c, ECONNREFUSED, d.reason, false);
      c.rule = d.rule;
      c.target = asked;
      c.resolved = true;
      Check(c);
      return;
    }
    Decision d = policy->CheckName(c.name, c.port);
    if (!d.allowed) return Close(c, ECONNREFUSED, d.reason, false);
    c.rule = d.rule;
    if (d.raw) c.need_check = false;
    Resolve(c.name, [this, id](const absl::StatusOr<std::vector<IpAddress>>& result) {
      auto it = conns_.find(id);
      if (it == conns_.end()) return;
      Conn& c = *it->second;
      if (!result.ok())
        return Close(c, EHOSTUNREACH, std::string(result.status().message()), false);
      std::shared_ptr<const EgressPolicy> policy = Policy();
      std::string why;
      for (const IpAddress& a : *result) {
        Decision d = policy->CheckAddress(c.name, a, c.port);
        if (d.allowed) {
          c.rule = d.rule;
          c.target = a;
          c.address = a.ToString();
          c.resolved = true;
          Check(c);  // dials once the guest named its host, where that is checked
          return;
        }
        if (why.empty()) why = d.reason;
      }
      c.address = (*result)[0].ToString();
      Close(c, EACCES, why, false);
    });
  }

  // A connection refused before it had state of its own.
  void Refuse(uint32_t id, NetEvent e, int code) {
    Record(e);
    if (std::shared_ptr<GuestChannel> channel = channel_.lock()) {
      channel->ResetGuestStream(id, {.code = static_cast<uint32_t>(code), .message = kToGuest})
          .IgnoreError();  // a failed write fails the channel
    }
  }

  void Dial(Conn& c, const IpAddress& a) {
    c.address = a.ToString();
    sockaddr_storage sa;
    socklen_t len = ToSockaddr(a, c.port, &sa);
    c.bev = bufferevent_socket_new(base_, -1, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(c.bev, &Impl::OnUpstreamRead, &Impl::OnUpstreamWrite, &Impl::OnUpstreamEvent,
                      &c);
    bufferevent_setwatermark(c.bev, EV_READ, 0, kReadHighWater);
    if (rate_group_ != nullptr) bufferevent_add_to_rate_limit_group(c.bev, rate_group_);
    bufferevent_enable(c.bev, EV_READ | EV_WRITE);
    c.timer = evtimer_new(base_, &Impl::OnConnectTimeout, &c);
    timeval timeout = {options_.connect_timeout_ms / 1000,
                       (options_.connect_timeout_ms % 1000) * 1000};
    evtimer_add(c.timer, &timeout);
    if (bufferevent_socket_connect(c.bev, reinterpret_cast<sockaddr*>(&sa), static_cast<int>(len)) <
        0) {
      Close(c, ECONNREFUSED, absl::StrCat("connect to ", c.address, ":", c.port, " failed"), true);
    }
  }

  static void OnConnectTimeout(evutil_socket_t, short, void* arg) {
    auto* c = static_cast<Conn*>(arg);
    c->impl->Close(*c, ETIMEDOUT,
                   absl::StrCat(Destination(c->name, c->address, c->port),
                                " did not accept the connection in time"),
                   true);
  }

  static void OnUpstreamEvent(bufferevent* bev, short what, void* arg) {
    auto* c = static_cast<Conn*>(arg);
    Impl* self = c->impl;
    if (what & BEV_EVENT_CONNECTED) {
      c->connected = true;
      if (c->timer != nullptr) evtimer_del(c->timer);
      self->StartRelay(*c);
      return;
    }
    if (what & BEV_EVENT_ERROR) {
      int e = EVUTIL_SOCKET_ERROR();
      std::string why = c->connected ? absl::StrCat(Destination(c->name, c->address, c->port),
                                                    " reset the connection: ", strerror(e))
                                     : absl::StrCat(Destination(c->name, c->address, c->port),
                                                    " refused the connection: ", strerror(e));
      self->Close(*c, c->connected ? ECONNRESET : ECONNREFUSED, why, true);
      return;
    }
    if (what & BEV_EVENT_EOF) {
      c->upstream_ended = true;
      self->PumpToGuest(*c);
    }
  }

  static void OnUpstreamRead(bufferevent*, void* arg) {
    auto* c = static_cast<Conn*>(arg);
    c->impl->PumpToGuest(*c);
  }

  static void OnUpstreamWrite(bufferevent*, void* arg) {
    auto* c = static_cast<Conn*>(arg);
    c->impl->Drained(*c);
  }

  // The destination took what the guest sent: grant the guest as much again, and pass on its
  // end of data once everything before it went out.
  void Drained(Conn& c) {
    if (!c.relaying) return;
    if (c.ungranted > 0) {
      uint64_t grant = c.ungranted;
      c.ungranted = 0;
      if (std::shared_ptr<GuestChannel> channel = channel_.lock()) {
        channel->GrantGuestData(c.id, static_cast<uint32_t>(grant)).IgnoreError();
      }
    }
    if (c.guest_ended && !c.upstream_shut &&
        evbuffer_get_length(bufferevent_get_output(c.bev)) == 0) {
      shutdown(bufferevent_getfd(c.bev), SHUT_WR);
      c.upstream_shut = true;
    }
    MaybeDone(c);
  }

  void PumpToGuest(Conn& c) {
    if (c.intercept != nullptr) return InterceptPump(c);
    std::shared_ptr<GuestChannel> channel = channel_.lock();
    if (channel == nullptr || c.bev == nullptr) return;
    evbuffer* input = bufferevent_get_input(c.bev);
    char buf[kMaxPayload];
    while (evbuffer_get_length(input) > 0) {
      ev_ssize_t n = evbuffer_copyout(input, buf, sizeof(buf));
      if (n <= 0) break;
      absl::StatusOr<size_t> sent = channel->SendGuestData(c.id, std::string_view(buf, n));
      if (!sent.ok()) return;  // the channel failed; OnReset follows
      evbuffer_drain(input, *sent);
      c.bytes_in += *sent;
      if (c.gate != nullptr && c.gate->waiting_for_upgrade()) {
        // The server's answer to an upgrade request frees (or keeps checking) what followed it.
        std::string forward;
        absl::Status freed = c.gate->FromServer(std::string_view(buf, *sent), &forward);
        if (!GatePassed(c, freed, forward)) return;
      }
      if (*sent < static_cast<size_t>(n)) {
        c.window_closed = true;
        bufferevent_disable(c.bev, EV_READ);
        return;
      }
    }
    if (c.upstream_ended && !c.ended_to_guest) {
      c.ended_to_guest = true;
      channel->EndGuestData(c.id).IgnoreError();
    }
    MaybeDone(c);
  }

  void Window(uint32_t id) {
    auto it = conns_.find(id);
    if (it == conns_.end() || (it->second->bev == nullptr && it->second->intercept == nullptr)) {
      return;
    }
    Conn& c = *it->second;
    if (c.window_closed) {
      c.window_closed = false;
      if (!c.upstream_ended && c.bev != nullptr) bufferevent_enable(c.bev, EV_READ);
    }
    PumpToGuest(c);
  }

  void Data(uint32_t id, std::string data) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = *it->second;
    c.ungranted += data.size();
    c.bytes_out += data.size();
    if (c.intercept != nullptr) return FromGuestTls(c, data);
    if (c.port != options_.tls_port) ScanPlaintext(c, data);
    if (c.relaying) return ToUpstream(c, data);
    c.pending += data;
    Check(c);
  }

  // Guest bytes of a relayed plaintext connection, through its gate if it has one.
  void ToUpstream(Conn& c, std::string_view data) {
    if (c.gate == nullptr) {
      bufferevent_write(c.bev, data.data(), data.size());
      return;
    }
    std::string forward;
    absl::Status checked = c.gate->FromGuest(data, &forward);
    GatePassed(c, checked, forward);
  }

  // Sends what a connection's gate let through; false (the connection closed) if it refused.
  bool GatePassed(Conn& c, const absl::Status& verdict, const std::string& forward) {
    if (!forward.empty()) bufferevent_write(c.bev, forward.data(), forward.size());
    if (verdict.ok()) return true;
    Close(c, EACCES,
          absl::StrCat("the connection was allowed for ", c.name, " but ", verdict.message()),
          true);
    return false;
  }

  void DataEnd(uint32_t id) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = *it->second;
    c.guest_ended = true;
    if (c.intercept != nullptr && c.bev != nullptr && c.relaying && !c.upstream_shut) {
      std::string wire;
      c.intercept->upstream->Close(&wire);
      bufferevent_write(c.bev, wire.data(), wire.size());
    }
    if (!c.checked && c.need_check) {
      Check(c);
      if (!c.checked && conns_.count(id) != 0) {
        return Close(c, ECONNRESET, "the guest closed the connection before naming its host", true);
      }
    }
    if (conns_.count(id) != 0 && c.relaying) Drained(c);
    if (conns_.count(id) != 0 && c.intercept != nullptr) InterceptPump(c);
  }

  // SNI on 443, Host on 80: the guest must talk to the name it was allowed.
  // Nothing goes to the destination, not even a connection, before the guest proved it talks
  // to the name it was allowed.
  void Check(Conn& c) {
    if (!c.checked && !c.need_check) c.checked = true;
    if (c.checked) {
      if (c.resolved && c.bev == nullptr) Dial(c, c.target);
      return;
    }
    std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(c.pending.data()),
                                   c.pending.size());
    std::string error;
    std::string host;
    if (c.port == options_.tls_port) {
      ClientHelloInfo hello;
      PeekResult r = PeekClientHello(bytes, &hello, &error);
      if (r == PeekResult::kNeedMore) return;
      if (r == PeekResult::kNotTls) {
        return Close(c, EACCES,
                     absl::StrCat("the guest sent something other than TLS to ", c.name,
                                  ":443; only TLS is carried on port 443"),
                     true);
      }
      if (r == PeekResult::kMalformed) {
        return Close(c, EACCES, absl::StrCat(c.name, ":443: ", error), true);
      }
      host = hello.sni;
      if (hello.encrypted_client_hello) {
        // The name the proxy checks would be only the front's; the real one is encrypted.
        return Close(c, EACCES,
                     absl::StrCat("the TLS ClientHello to ", c.name,
                                  " offers Encrypted Client Hello, which would hide the server it "
                                  "reaches; ECH is refused (turn it off in the client)"),
                     true);
      }
      if (host.empty()) {
        return Close(
            c, EACCES,
            absl::StrCat("the TLS ClientHello names no server (SNI); ", c.name, " must be named"),
            true);
      }
    } else {
      HttpRequestHead head;
      HeadResult r = PeekHttpRequestHead(bytes, &head, &error);
      if (r == HeadResult::kNeedMore) return;
      if (r == HeadResult::kMalformed) {
        return Close(c, EACCES, absl::StrCat(c.name, ":80: ", error), true);
      }
      host = head.host;
      // The first request is checked here; it and every later one pass the gate once relayed.
      if (host == c.name) c.gate = std::make_unique<HttpRequestGate>(c.name);
    }
    if (host != c.name) {
      return Close(c, EACCES,
                   absl::StrCat("the connection was allowed for ", c.name, " but ",
                                c.port == options_.tls_port ? "its TLS SNI" : "its HTTP Host",
                                " names ", host),
                   true);
    }
    c.checked = true;
    if (c.port == options_.tls_port) {
      std::vector<InterceptedSecret> secrets = SecretsFor(c.name);
      if (!secrets.empty()) {
        if (absl::Status s = StartIntercept(c, std::move(secrets)); !s.ok()) {
          return Close(c, ECONNRESET, std::string(s.message()), true);
        }
        uint32_t id = c.id;
        std::string hello;
        hello.swap(c.pending);  // the ClientHello the check read: ours to answer now
        FromGuestTls(c, hello);
        if (conns_.count(id) == 0) return;  // the guest's handshake failed: closed
      }
    }
    if (c.resolved && c.bev == nullptr) Dial(c, c.target);
  }

  void StartRelay(Conn& c) {
    if (c.relaying || !c.connected || !c.checked) return;
    c.relaying = true;
    if (c.intercept != nullptr) {
      std::string hello;
      if (absl::Status s = c.intercept->upstream->Start(&hello); !s.ok()) {
        return UpstreamFailed(c, std::string(s.message()));
      }
      bufferevent_write(c.bev, hello.data(), hello.size());
      return;
    }
    if (!c.pending.empty()) {
      std::string pending;
      pending.swap(c.pending);
      ToUpstream(c, pending);
    } else {
      Drained(c);
    }
  }

  // --- interception ---

  // The session's secrets as one connection to `host` sees them: those bound to it with their
  // values, the others without (their placeholders are only reported). Empty: not intercepted.
  std::vector<InterceptedSecret> SecretsFor(const std::string& host) {
    absl::MutexLock lock(&secrets_mu_);
    if (ca_ == nullptr || options_.upstream_tls == nullptr) return {};
    std::vector<InterceptedSecret> out;
    bool bound = false;
    for (const ProxySecret& s : secrets_) {
      bool here = std::find(s.hosts.begin(), s.hosts.end(), host) != s.hosts.end();
      bound |= here;
      out.push_back({s.name, s.placeholder, here ? s.value : "", s.body, s.headers});
    }
    if (!bound) return {};
    return out;
  }

  absl::Status StartIntercept(Conn& c, std::vector<InterceptedSecret> secrets) {
    std::shared_ptr<SessionCa> ca;
    {
      absl::MutexLock lock(&secrets_mu_);
      ca = ca_;
      for (const ProxySecret& s : secrets_) {
        if (!s.value.empty() ||
            std::find(s.hosts.begin(), s.hosts.end(), c.name) == s.hosts.end() ||
            !missing_reported_.insert(s.name).second) {
          continue;
        }
        Record({.kind = "secret",
                .name = c.name,
                .port = c.port,
                .rule = s.name,
                .reason = "airlockd holds no value for it (it restarted since the value was "
                          "given, or its source failed); its placeholder goes out unchanged "
                          "until `airlock secret set` gives it again"});
      }
    }
    absl::StatusOr<SSL_CTX*> server = ca->ServerContext(c.name);
    if (!server.ok()) return server.status();
    auto x = std::make_unique<Conn::Intercept>();
    absl::StatusOr<std::unique_ptr<TlsEnd>> guest = TlsEnd::Server(*server);
    if (!guest.ok()) return guest.status();
    absl::StatusOr<std::unique_ptr<TlsEnd>> upstream =
        TlsEnd::Client(options_.upstream_tls.get(), c.name);
    if (!upstream.ok()) return upstream.status();
    x->guest = *std::move(guest);
    x->upstream = *std::move(upstream);
    x->http = std::make_unique<HttpIntercept>(c.name, c.port, std::move(secrets));
    c.intercept = std::move(x);
    return absl::OkStatus();
  }

  // Ciphertext from the guest of an intercepted connection.
  void FromGuestTls(Conn& c, const std::string& data) {
    const uint32_t id = c.id;  // c may be gone after a pump
    Conn::Intercept& x = *c.intercept;
    std::string plain;
    bool closed = false;
    // Even when finishing: the guest's handshake may still have to complete for it to read
    // the answer that is waiting for it.
    absl::Status s = x.guest->Receive(data, &plain, &x.to_guest, &closed);
    if (!s.ok()) {
      return Close(c, ECONNRESET,
                   absl::StrCat("TLS with the guest for ", c.name, " failed: ", s.message(),
                                " (a program must trust the session's CA, which airlock "
                                "installs in the guest's trust store)"),
                   true);
    }
    if (!plain.empty() && !x.finishing) {
      std::string up, answer;
      absl::Status h = x.http->FromGuest(plain, &up, &answer);
      ToGuest(c, answer);
      if (!up.empty()) {
        std::string wire;
        if (absl::Status u = x.upstream->Send(up, &wire); !u.ok()) {
          return UpstreamFailed(c, std::string(u.message()));
        }
        if (c.bev != nullptr) bufferevent_write(c.bev, wire.data(), wire.size());
      }
      if (!h.ok()) {
        AbandonUpstream(c);
        Finish(c, absl::StrCat("refused a request: ", h.message()));
      }
    }
    InterceptPump(c);
    if (conns_.count(id) != 0 && c.relaying &&
        (c.bev == nullptr || evbuffer_get_length(bufferevent_get_output(c.bev)) == 0)) {
      Drained(c);  // nothing waits upstream: grant the guest its window back now
    }
  }

  void ToGuest(Conn& c, const std::string& plain) {
    if (plain.empty()) return;
    if (absl::Status s = c.intercept->guest->Send(plain, &c.intercept->to_guest); !s.ok()) {
      Finish(c, std::string(s.message()));
    }
  }

  // The guest's side ends after what is queued for it (with a TLS close_notify).
  void Finish(Conn& c, const std::string& why) {
    Conn::Intercept& x = *c.intercept;
    if (x.finishing) return;
    x.finishing = true;
    if (c.end_reason.empty()) c.end_reason = why;
    x.guest->Close(&x.to_guest);
  }

  // Stops talking to the server: nothing more is read from or written to it.
  void AbandonUpstream(Conn& c) {
    c.upstream_ended = true;
    c.upstream_shut = true;
    if (c.bev == nullptr) return;
    bufferevent_disable(c.bev, EV_READ | EV_WRITE);
    evbuffer_drain(bufferevent_get_input(c.bev), evbuffer_get_length(bufferevent_get_input(c.bev)));
    evbuffer_drain(bufferevent_get_output(c.bev),
                   evbuffer_get_length(bufferevent_get_output(c.bev)));
    shutdown(bufferevent_getfd(c.bev), SHUT_RDWR);
  }

  // The server's TLS failed (its certificate did not verify, most often): the guest gets a 502
  // that says why.
  void UpstreamFailed(Conn& c, const std::string& why) {
    std::string reason = absl::StrCat(c.name, ": ", why);
    std::string answer;
    c.intercept->http->FailUpstream(why, &answer);
    ToGuest(c, answer);
    AbandonUpstream(c);
    Finish(c, reason);
    InterceptPump(c);
  }

  void InterceptPump(Conn& c) {
    Conn::Intercept& x = *c.intercept;
    std::shared_ptr<GuestChannel> channel = channel_.lock();
    if (channel == nullptr) return;
    // Upstream bytes through TLS and the HTTP layer, then to the guest within its window; again
    // while bytes wait upstream and the window took everything.
    for (;;) {
      if (c.bev != nullptr && !x.finishing && c.relaying) {
        evbuffer* input = bufferevent_get_input(c.bev);
        char buf[16384];
        while (!x.finishing && evbuffer_get_length(input) > 0 &&
               x.to_guest.size() < kConnectionWindow) {
          ev_ssize_t n = evbuffer_remove(input, buf, sizeof(buf));
          if (n <= 0) break;
          c.bytes_in += static_cast<uint64_t>(n);
          std::string plain, wire;
          bool closed = false;
          absl::Status s = x.upstream->Receive(absl::string_view(buf, static_cast<size_t>(n)),
                                               &plain, &wire, &closed);
          if (!wire.empty()) bufferevent_write(c.bev, wire.data(), wire.size());
          if (!s.ok()) return UpstreamFailed(c, std::string(s.message()));
          if (!plain.empty()) {
            std::string answer;
            absl::Status h = x.http->FromUpstream(plain, &answer);
            ToGuest(c, answer);
            if (!h.ok()) {
              AbandonUpstream(c);
              Finish(c, std::string(h.message()));
            }
          }
          if (closed) c.upstream_ended = true;
        }
        if (c.upstream_ended && !x.finishing && evbuffer_get_length(input) == 0) {
          std::string answer;
          absl::Status h = x.http->UpstreamEnded(&answer);
          ToGuest(c, answer);
          Finish(c, h.ok() ? "" : std::string(h.message()));
        }
      }
      ReportIntercept(c);
      while (!x.to_guest.empty()) {
        size_t n = std::min<size_t>(x.to_guest.size(), kMaxPayload);
        absl::StatusOr<size_t> sent =
            channel->SendGuestData(c.id, std::string_view(x.to_guest.data(), n));
        if (!sent.ok()) return;
        x.to_guest.erase(0, *sent);
        if (*sent < n) {
          c.window_closed = true;
          if (c.bev != nullptr) bufferevent_disable(c.bev, EV_READ);
          return;
        }
      }
      bool more = c.bev != nullptr && !x.finishing && c.relaying &&
                  evbuffer_get_length(bufferevent_get_input(c.bev)) > 0;
      if (!more) break;
    }
    // The guest's side ends once what waits for it went out, which needs its handshake done
    // (or the guest gone).
    if (x.finishing && !c.ended_to_guest && (x.guest->handshake_done() || c.guest_ended)) {
      c.ended_to_guest = true;
      channel->EndGuestData(c.id).IgnoreError();
    }
    MaybeDone(c);
  }

  void ReportIntercept(Conn& c) {
    for (const InterceptEvent& e : c.intercept->http->TakeEvents()) {
      std::string key = absl::StrCat(e.secret, e.used ? "+" : "-", e.where);
      if (!c.intercept->reported.insert(key).second) continue;
      Record({.kind = "secret",
              .name = c.name,
              .address = c.address,
              .port = c.port,
              .allowed = e.used,
              .rule = e.secret,
              .reason = e.where});
    }
  }

  // A placeholder in the clear (plain HTTP, or any protocol but TLS) is never swapped: say so.
  void ScanPlaintext(Conn& c, const std::string& data) {
    absl::MutexLock lock(&secrets_mu_);
    if (secrets_.empty()) return;
    std::string window = c.scan_tail + data;
    size_t longest = 0;
    for (const ProxySecret& s : secrets_) {
      longest = std::max(longest, s.placeholder.size());
      if (window.find(s.placeholder) == std::string::npos || !c.warned.insert(s.name).second) {
        continue;
      }
      Record({.kind = "secret",
              .name = c.name,
              .address = c.address,
              .port = c.port,
              .rule = s.name,
              .reason = "its placeholder went out unchanged on a connection that is not TLS "
                        "(secrets are swapped in only over HTTPS on 443)"});
    }
    size_t keep = std::min(window.size(), longest);
    c.scan_tail = window.substr(window.size() - keep);
  }

  void SetSecrets(std::vector<ProxySecret> secrets, std::shared_ptr<SessionCa> ca) {
    absl::MutexLock lock(&secrets_mu_);
    WipeSecrets();
    secrets_ = std::move(secrets);
    ca_ = std::move(ca);
  }

  // The values go before their memory does.
  void WipeSecrets() ABSL_EXCLUSIVE_LOCKS_REQUIRED(secrets_mu_) {
    for (ProxySecret& s : secrets_) Wipe(s.value);
    secrets_.clear();
  }

  // The event of a connection as it ends: allowed (by its rule) or not, and why it ended.
  static NetEvent Ended(const Conn& c, bool allowed, std::string reason) {
    return {.kind = "connect",
            .name = c.name,
            .address = c.address,
            .port = c.port,
            .allowed = allowed,
            .rule = allowed ? c.rule : "",
            .reason = std::move(reason),
            .bytes_out = c.bytes_out,
            .bytes_in = c.bytes_in};
  }

  void MaybeDone(Conn& c) {
    if (!(c.guest_ended && c.upstream_shut && c.upstream_ended && c.ended_to_guest)) return;
    Record(Ended(c, true, c.end_reason));
    uint32_t id = c.id;
    FreeConn(c);
    conns_.erase(id);
  }

  // Ends a connection: the guest sees a reset (unless it is gone already), the event records
  // `why`. `allowed`: the policy allowed it and it failed later.
  void Close(Conn& c, int code, const std::string& why, bool allowed) {
    Record(Ended(c, allowed, why));
    if (std::shared_ptr<GuestChannel> channel = channel_.lock()) {
      channel->ResetGuestStream(c.id, {.code = static_cast<uint32_t>(code), .message = kToGuest})
          .IgnoreError();  // a failed write fails the channel
    }
    uint32_t id = c.id;
    FreeConn(c);
    conns_.erase(id);
  }

  void GuestReset(uint32_t id, uint32_t code, const std::string& message) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = *it->second;
    Record(Ended(c, true, code == 0 ? message : absl::StrCat("the guest reset it: ", message)));
    FreeConn(c);
    conns_.erase(it);
  }

  void FreeConn(Conn& c) {
    if (c.counted) options_.ledger->Give(options_.tenant);
    c.counted = false;
    if (c.timer != nullptr) event_free(c.timer);
    if (c.bev != nullptr) bufferevent_free(c.bev);
    c.timer = nullptr;
    c.bev = nullptr;
  }

  void ApplyPolicy(std::shared_ptr<const EgressPolicy> policy) {
    {
      absl::MutexLock lock(&policy_mu_);
      policy_ = policy;
    }
    std::vector<uint32_t> ids;
    for (auto& [id, c] : conns_) ids.push_back(id);
    for (uint32_t id : ids) {
      Conn& c = *conns_[id];
      Decision d = c.name.empty() ? policy->CheckAddress("", c.target, c.port)
                                  : policy->CheckName(c.name, c.port);
      if (d.allowed && c.resolved && !c.name.empty()) {
        d = policy->CheckAddress(c.name, c.target, c.port);
      }
      if (!d.allowed) {
        Close(c, ECONNRESET,
              absl::StrCat("the session's egress policy no longer allows ",
                           Destination(c.name, c.address, c.port), ": ", d.reason),
              true);
      }
    }
    if (std::shared_ptr<GuestChannel> channel = channel_.lock()) {
      // The proxy enforces the new policy whatever the guest holds; the guest's copy only lets
      // it refuse early.
      LogIfFailed(channel->Notify(GuestNetPolicy(*policy)), "send the guest its new egress policy");
    }
  }

  std::shared_ptr<const EgressPolicy> Policy() {
    absl::MutexLock lock(&policy_mu_);
    return policy_;
  }

  Counters counters() {
    absl::MutexLock lock(&counters_mu_);
    return counters_;
  }

  std::weak_ptr<GuestChannel> channel_;
  EgressProxyOptions options_;
  absl::Mutex policy_mu_;
  std::shared_ptr<const EgressPolicy> policy_ ABSL_GUARDED_BY(policy_mu_);
  absl::Mutex secrets_mu_;
  std::vector<ProxySecret> secrets_ ABSL_GUARDED_BY(secrets_mu_);
  std::shared_ptr<SessionCa> ca_ ABSL_GUARDED_BY(secrets_mu_);
  absl::Mutex counters_mu_;
  Counters counters_ ABSL_GUARDED_BY(counters_mu_);
  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
  event_base* base_ = nullptr;
  event* flush_ = nullptr;
  event* sweep_ = nullptr;
  ev_token_bucket_cfg* rate_cfg_ = nullptr;
  bufferevent_rate_limit_group* rate_group_ = nullptr;
  std::shared_ptr<Inbox> inbox_;
  std::thread thread_;
  // Loop thread only.
  std::map<uint32_t, std::unique_ptr<Conn>> conns_;
  std::map<std::string, CacheEntry> cache_;
  std::map<std::string, std::vector<ResolveCallback>> resolving_;
  std::deque<std::string> queued_;
  int in_flight_ = 0;
  std::vector<NetEvent> events_;
  std::map<std::string, int64_t> dns_seen_;
  std::set<std::string> missing_reported_;  // secrets said to have no value
};

EgressProxy::EgressProxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EgressProxy::~EgressProxy() { Stop(); }

absl::StatusOr<std::shared_ptr<EgressProxy>> EgressProxy::Start(
    std::shared_ptr<GuestChannel> channel, std::shared_ptr<const EgressPolicy> policy,
    EgressProxyOptions options) {
  if (options.resolver == nullptr) options.resolver = std::make_shared<SystemResolver>();
  NetPolicyMessage rules = GuestNetPolicy(*policy);
  auto impl = std::make_unique<Impl>(channel, std::move(policy), std::move(options));
  if (absl::Status s = impl->Start(); !s.ok()) return s;
  std::shared_ptr<EgressProxy> proxy(new EgressProxy(std::move(impl)));
  channel->RegisterGuestStreamKind(FrameType::kDnsQuery, proxy);
  channel->RegisterGuestStreamKind(FrameType::kConnect, proxy);
  if (absl::Status s = channel->Notify(rules); !s.ok()) {
    proxy->Stop();
    return absl::Status(s.code(),
                        absl::StrCat("the session's address rules cannot be sent: ", s.message()));
  }
  return proxy;
}

void EgressProxy::Stop() { impl_->Stop(); }

void EgressProxy::SetSecrets(std::vector<ProxySecret> secrets, std::shared_ptr<SessionCa> ca) {
  impl_->SetSecrets(std::move(secrets), std::move(ca));
}

void EgressProxy::SetPolicy(std::shared_ptr<const EgressPolicy> policy) {
  impl_->Post([impl = impl_.get(), policy] { impl->ApplyPolicy(policy); });
}

EgressProxy::Counters EgressProxy::counters() const { return impl_->counters(); }

void EgressProxy::Flush() {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> flushed = done->get_future();
  impl_->Post([impl = impl_.get(), done] {
    impl->FlushEvents();
    done->set_value();
  });
  // A stopped proxy drops the work (and with it the promise); the bound is for a wedged store.
  flushed.wait_for(std::chrono::seconds(5));
}

void EgressProxy::OnOpen(uint32_t id, FrameType type, std::string payload) {
  Impl* impl = impl_.get();
  if (type == FrameType::kDnsQuery) {
    impl->Post([impl, id, payload = std::move(payload)] { impl->Question(id, payload); });
  } else {
    impl->Post([impl, id, payload = std::move(payload)] { impl->Open(id, payload); });
  }
}

void EgressProxy::OnData(uint32_t id, std::string data) {
  Impl* impl = impl_.get();
  impl->Post([impl, id, data = std::move(data)]() mutable { impl->Data(id, std::move(data)); });
}

void EgressProxy::OnDataEnd(uint32_t id) {
  Impl* impl = impl_.get();
  impl->Post([impl, id] { impl->DataEnd(id); });
}

void EgressProxy::OnReset(uint32_t id, uint32_t code, std::string message) {
  Impl* impl = impl_.get();
  impl->Post(
      [impl, id, code, message = std::move(message)] { impl->GuestReset(id, code, message); });
}

void EgressProxy::OnWindow(uint32_t id) {
  Impl* impl = impl_.get();
  impl->Post([impl, id] { impl->Window(id); });
}

}  // namespace airlock::net
