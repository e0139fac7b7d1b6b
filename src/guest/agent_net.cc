#include "src/guest/agent_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "src/guest/guest_boot.h"

namespace airlock::guest {
namespace {

// 198.18.0.0/15 (RFC 2544's benchmarking range): never a real destination.
constexpr uint32_t kSyntheticBase = 0xC6120000u;
constexpr uint32_t kSyntheticSize = 1u << 17;
constexpr uint32_t kSyntheticPrefix = 15;
constexpr uint32_t kMaxNames = 16384;
constexpr uint32_t kMaxListeners = 4096;
// Questions to the host at once; more get SERVFAIL (resolvers retry).
constexpr size_t kMaxQuestions = 128;
constexpr size_t kMaxWaiters = 512;
constexpr size_t kMaxConns = kMaxGuestStreams - kMaxQuestions;
// Connections the host opened to guest ports at once (the host keeps to its own cap, lower).
constexpr size_t kMaxPortConns = 1024;
// Allowed names are answered with a short TTL so that programs ask again after a change.
constexpr uint32_t kAnswerTtl = 5;
constexpr uint32_t kNegativeTtl = 1;
constexpr uint16_t kTypePtr = 12, kDnsTypeAny = 255;

// Closes a connected socket so that the peer sees a reset, not an orderly end.
void CloseWithReset(int fd) {
  linger l = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close(fd);
}

std::string AddressText(uint32_t addr) {
  in_addr a = {htonl(addr)};
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, text, sizeof(text));
  return text;
}

// Adds (or removes) a local route for base/prefix on lo: every address in it becomes the
// guest's own, so listeners can bind them. Returns what failed, or an empty string.
std::string LocalRoute(uint32_t base, uint32_t prefix, bool add) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return std::string("netlink socket: ") + strerror(errno);
  struct {
    nlmsghdr header;
    rtmsg route;
    char attrs[64];
  } request = {};
  request.header.nlmsg_type = add ? RTM_NEWROUTE : RTM_DELROUTE;
  request.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_REPLACE : 0);
  request.header.nlmsg_seq = 1;
  request.route.rtm_family = AF_INET;
  request.route.rtm_dst_len = static_cast<unsigned char>(prefix);
  request.route.rtm_table = RT_TABLE_LOCAL;
  request.route.rtm_protocol = RTPROT_BOOT;
  request.route.rtm_scope = RT_SCOPE_HOST;
  request.route.rtm_type = RTN_LOCAL;
  size_t length = NLMSG_LENGTH(sizeof(rtmsg));
  auto put = [&](unsigned short type, const void* data, size_t size) {
    auto* attr = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(&request) + NLMSG_ALIGN(length));
    attr->rta_type = type;
    attr->rta_len = static_cast<unsigned short>(RTA_LENGTH(size));
    memcpy(RTA_DATA(attr), data, size);
    length = NLMSG_ALIGN(length) + RTA_ALIGN(attr->rta_len);
  };
  uint32_t dst = htonl(base);
  uint32_t lo = if_nametoindex("lo");
  put(RTA_DST, &dst, sizeof(dst));
  put(RTA_OIF, &lo, sizeof(lo));
  request.header.nlmsg_len = static_cast<uint32_t>(length);
  sockaddr_nl kernel = {};
  kernel.nl_family = AF_NETLINK;
  std::string error;
  if (sendto(fd, &request, length, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) < 0) {
    error = std::string("netlink send: ") + strerror(errno);
  } else {
    char reply[512];
    ssize_t n = recv(fd, reply, sizeof(reply), 0);
    auto* header = reinterpret_cast<nlmsghdr*>(reply);
    if (n < static_cast<ssize_t>(NLMSG_LENGTH(sizeof(nlmsgerr)))) {
      error = "netlink: short answer";
    } else if (header->nlmsg_type == NLMSG_ERROR) {
      int code = -reinterpret_cast<nlmsgerr*>(NLMSG_DATA(header))->error;
      if (code != 0 && !(code == ESRCH && !add)) {
        error = std::string(add ? "add" : "remove") + " route " + AddressText(base) + "/" +
                std::to_string(prefix) + ": " + strerror(code);
      }
    }
  }
  close(fd);
  return error;
}

int Listen(uint32_t addr, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd, 128) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int64_t NowMs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

bool InSyntheticRange(uint32_t addr) { return (addr & ~(kSyntheticSize - 1)) == kSyntheticBase; }

}  // namespace

std::string PrepareGuestNetwork() {
  std::string error = LocalRoute(kSyntheticBase, kSyntheticPrefix, true);
  // Programs find the agent's DNS server here. Images may ship a symlink (systemd-resolved):
  // replace whatever is there in the writable layer.
  unlink("/etc/resolv.conf");
  mkdir("/etc", 0755);
  int fd = open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  static constexpr char kResolvConf[] =
      "# Airlock: the agent answers for the names this session may reach.\n"
      "nameserver 127.0.0.1\n";
  if (fd < 0 || write(fd, kResolvConf, sizeof(kResolvConf) - 1) < 0) {
    if (!error.empty()) error += "; ";
    error += std::string("write /etc/resolv.conf: ") + strerror(errno);
  }
  if (fd >= 0) close(fd);
  return error;
}

struct GuestNet::Listener {
  int fd = -1;
  uint16_t port = 0;
  std::string name;  // empty: a wildcard listener of address rules
};

struct GuestNet::Name {
  std::string name;
  uint32_t address = 0;
  std::set<uint16_t> ports;  // allowed, as the host last said
  std::map<uint16_t, std::unique_ptr<Listener>> listeners;
  int64_t allowed_at_ms = 0;  // when the host last said it is allowed
};

struct GuestNet::Question {
  std::string name;
  bool refresh = false;  // asked again after a policy change, for no one waiting
  struct Waiter {
    sockaddr_in client;
    DnsQuestion question;
  };
  std::vector<Waiter> waiters;
};

struct GuestNet::Conn {
  int fd = -1;
  // A connection the host opened to a guest port (kOpenPort): the port, the loopback addresses
  // tried so far (127.0.0.1, then ::1), and whether the connect is still under way.
  uint16_t port = 0;
  int addresses_tried = 0;
  bool connecting = false;
  std::string to_socket;                   // from the host, not yet written to the socket
  StreamWindow window{kConnectionWindow};  // what we may send, what the host sent
  bool socket_ended = false;               // read EOF; kDataEnd sent
  bool host_ended = false;                 // kDataEnd received
  bool shut_write = false;
};

bool GuestNet::AddressRule::Contains(uint32_t addr) const {
  uint32_t mask = prefix == 0 ? 0 : ~0u << (32 - prefix);
  return (addr & mask) == (base & mask);
}

GuestNet::GuestNet(SendFn send) : send_(std::move(send)) {}

GuestNet::~GuestNet() {
  DropAll();
  for (auto& [name, n] : names_) {
    for (auto& [port, l] : n->listeners) close(l->fd);
  }
  for (auto& [port, l] : wildcard_) close(l->fd);
  if (dns_fd_ >= 0) close(dns_fd_);
}

void GuestNet::Start() {
  dns_fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(53);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (dns_fd_ < 0 || bind(dns_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    ConsoleLog(std::string("dns: cannot serve on 127.0.0.1:53: ") + strerror(errno));
    if (dns_fd_ >= 0) close(dns_fd_);
    dns_fd_ = -1;
  }
}

uint32_t GuestNet::OpenStream() {
  uint32_t id = next_stream_;
  next_stream_ += 2;
  return id;
}

int GuestNet::AddPollFds(std::vector<pollfd>* fds, bool can_send) {
  watched_.clear();
  watched_first_ = fds->size();
  auto watch = [&](int kind, int fd, uint32_t id, short events) {
    fds->push_back({fd, events, 0});
    watched_.push_back({kind, fd, id});
  };
  if (dns_fd_ >= 0 && can_send) watch(0, dns_fd_, 0, POLLIN);
  if (can_send && conns_.size() - port_conns_ < kMaxConns) {
    for (auto& [name, n] : names_) {
      for (auto& [port, l] : n->listeners) watch(1, l->fd, port, POLLIN);
    }
    for (auto& [port, l] : wildcard_) watch(1, l->fd, port, POLLIN);
  }
  int timeout = -1;
  for (auto& [id, c] : conns_) {
    short events = 0;
    if (!c->socket_ended && c->window.sendable() > 0 && can_send) events |= POLLIN;
    if (!c->to_socket.empty() || c->connecting) events |= POLLOUT;
    if (c->connecting) events &= ~POLLIN;
    if (events != 0) watch(2, c->fd, id, events);
    if (c->window.grant_pending() && can_send) timeout = 0;
  }
  return timeout;
}

void GuestNet::HandlePoll(const std::vector<pollfd>& fds, bool can_send) {
  std::vector<Watched> watched = watched_;
  for (size_t i = 0; i < watched.size(); ++i) {
    short revents = fds[watched_first_ + i].revents;
    if (revents == 0) continue;
    const Watched& w = watched[i];
    if (w.kind == 0) {
      ReadDns();
    } else if (w.kind == 1) {
      // Find the listener by descriptor: the map may have changed since AddPollFds.
      Listener* found = nullptr;
      for (auto& [name, n] : names_) {
        for (auto& [port, l] : n->listeners) {
          if (l->fd == w.fd) found = l.get();
        }
      }
      for (auto& [port, l] : wildcard_) {
        if (l->fd == w.fd) found = l.get();
      }
      if (found != nullptr) Accept(*found);
    } else {
      auto it = conns_.find(w.id);
      if (it != conns_.end() && it->second->fd == w.fd)
        PumpConn(w.id, *it->second, revents, can_send);
    }
  }
  if (!can_send) return;
  std::vector<uint32_t> ids;
  for (auto& [id, c] : conns_) ids.push_back(id);
  for (uint32_t id : ids) {
    auto it = conns_.find(id);
    if (it != conns_.end()) GrantConn(id, *it->second, false);
  }
}

void GuestNet::ReadDns() {
  for (int i = 0; i < 64; ++i) {
    char packet[4096];
    sockaddr_in client = {};
    socklen_t client_len = sizeof(client);
    ssize_t n = recvfrom(dns_fd_, packet, sizeof(packet), 0, reinterpret_cast<sockaddr*>(&client),
                         &client_len);
    if (n < 0) return;
    auto reply = [&](const std::string& answer) {
      if (!answer.empty()) {
        sendto(dns_fd_, answer.data(), answer.size(), 0, reinterpret_cast<sockaddr*>(&client),
               client_len);
      }
    };
    std::string_view bytes(packet, static_cast<size_t>(n));
    DnsQuestion q;
    std::string error;
    DnsParse parsed = ParseDnsQuery(bytes, &q, &error);
    if (parsed != DnsParse::kOk) {
      reply(BuildDnsError(bytes,
                          parsed == DnsParse::kNotQuery ? DnsRcode::kNotImp : DnsRcode::kFormErr));
      continue;
    }
    if (q.qclass != kDnsClassIn) {
      reply(BuildDnsResponse(q, DnsRcode::kRefused, {}, kAnswerTtl, kNegativeTtl));
      continue;
    }
    if (q.name == "localhost" || q.name.ends_with(".localhost")) {
      std::vector<std::array<uint8_t, 4>> a;
      if (q.qtype == kDnsTypeA || q.qtype == kDnsTypeAny) a.push_back({127, 0, 0, 1});
      reply(BuildDnsResponse(q, DnsRcode::kNoError, a, kAnswerTtl, kNegativeTtl));
      continue;
    }
    // Reverse lookups and the root never leave the guest.
    if (q.qtype == kTypePtr || q.name.empty() || q.name.ends_with(".arpa")) {
      reply(BuildDnsResponse(q, DnsRcode::kNxDomain, {}, kAnswerTtl, kNegativeTtl));
      continue;
    }
    // The host allowed this name a moment ago: answer from that (a policy change since would
    // have asked again), so that many programs resolving at once do not each wait for it.
    if (auto known = names_.find(q.name);
        known != names_.end() && !known->second->ports.empty() &&
        NowMs() - known->second->allowed_at_ms < kAnswerTtl * 1000) {
      Question local;
      local.name = q.name;
      local.waiters.push_back({client, q});
      AnswerWaiters(local, false);
      continue;
    }
    auto asking = asking_.find(q.name);
    if (asking == asking_.end()) {
      if (questions_.size() >= kMaxQuestions) {
        reply(BuildDnsResponse(q, DnsRcode::kServFail, {}, kAnswerTtl, kNegativeTtl));
        continue;
      }
      Ask(q.name, false);
      asking = asking_.find(q.name);
    }
    Question& pending = *questions_[asking->second];
    if (pending.waiters.size() >= kMaxWaiters) {
      reply(BuildDnsResponse(q, DnsRcode::kServFail, {}, kAnswerTtl, kNegativeTtl));
      continue;
    }
    pending.waiters.push_back({client, q});
  }
}

void GuestNet::Ask(const std::string& name, bool refresh) {
  if (asking_.count(name) != 0) return;
  uint32_t id = OpenStream();
  auto q = std::make_unique<Question>();
  q->name = name;
  q->refresh = refresh;
  questions_[id] = std::move(q);
  asking_[name] = id;
  SendMessage(id, DnsQueryMessage{.name = name, .qtype = kDnsTypeA});
}

void GuestNet::AnswerWaiters(Question& q, bool failed) {
  auto it = names_.find(q.name);
  bool allowed = it != names_.end() && !it->second->ports.empty();
  for (const Question::Waiter& w : q.waiters) {
    std::string answer;
    if (failed) {
      answer = BuildDnsResponse(w.question, DnsRcode::kServFail, {}, kAnswerTtl, kNegativeTtl);
    } else if (allowed) {
      std::vector<std::array<uint8_t, 4>> a;
      if (w.question.qtype == kDnsTypeA || w.question.qtype == kDnsTypeAny) {
        uint32_t addr = it->second->address;
        a.push_back({static_cast<uint8_t>(addr >> 24), static_cast<uint8_t>(addr >> 16),
                     static_cast<uint8_t>(addr >> 8), static_cast<uint8_t>(addr)});
      }
      answer = BuildDnsResponse(w.question, DnsRcode::kNoError, a, kAnswerTtl, kNegativeTtl);
    } else {
      answer = BuildDnsResponse(w.question, DnsRcode::kNxDomain, {}, kAnswerTtl, kNegativeTtl);
    }
    sendto(dns_fd_, answer.data(), answer.size(), 0, reinterpret_cast<const sockaddr*>(&w.client),
           sizeof(w.client));
  }
  q.waiters.clear();
}

void GuestNet::ApplyAnswer(const std::string& name, DnsVerdict verdict,
                           std::vector<uint16_t> ports) {
  auto it = names_.find(name);
  if (verdict == DnsVerdict::kFailed) return;
  if (verdict != DnsVerdict::kAllowed || ports.empty()) {
    if (it != names_.end()) {
      it->second->ports.clear();
      SyncListeners(*it->second);
    }
    return;
  }
  if (it == names_.end()) {
    if (names_.size() >= kMaxNames || next_address_ + 2 >= kSyntheticSize) {
      ConsoleLog("dns: too many names; " + name + " gets no address");
      return;
    }
    auto n = std::make_unique<Name>();
    n->name = name;
    n->address = kSyntheticBase + ++next_address_;
    address_names_[n->address] = name;
    it = names_.emplace(name, std::move(n)).first;
  }
  it->second->ports = std::set<uint16_t>(ports.begin(), ports.end());
  it->second->allowed_at_ms = NowMs();
  SyncListeners(*it->second);
}

void GuestNet::SyncListeners(Name& n) {
  for (auto it = n.listeners.begin(); it != n.listeners.end();) {
    if (n.ports.count(it->first) == 0 || wildcard_.count(it->first) != 0) {
      close(it->second->fd);
      it = n.listeners.erase(it);
    } else {
      ++it;
    }
  }
  size_t total = 0;
  for (auto& [name, other] : names_) total += other->listeners.size();
  for (uint16_t port : n.ports) {
    if (n.listeners.count(port) != 0 || wildcard_.count(port) != 0) continue;
    if (total >= kMaxListeners) {
      ConsoleLog("net: too many listeners; " + n.name + ":" + std::to_string(port) + " skipped");
      return;
    }
    int fd = Listen(n.address, port);
    if (fd < 0) {
      ConsoleLog("net: listen on " + AddressText(n.address) + ":" + std::to_string(port) + " for " +
                 n.name + ": " + strerror(errno));
      continue;
    }
    auto l = std::make_unique<Listener>();
    l->fd = fd;
    l->port = port;
    l->name = n.name;
    n.listeners[port] = std::move(l);
    ++total;
  }
}

void GuestNet::ApplyPolicy(std::vector<AddressRule> rules) {
  for (const AddressRule& old : address_rules_) {
    bool kept = std::any_of(rules.begin(), rules.end(), [&](const AddressRule& r) {
      return r.base == old.base && r.prefix == old.prefix;
    });
    if (!kept) {
      std::string error = LocalRoute(old.base, old.prefix, false);
      if (!error.empty()) ConsoleLog("net: " + error);
    }
  }
  std::set<uint16_t> ports;
  for (const AddressRule& r : rules) {
    std::string error = LocalRoute(r.base, r.prefix, true);
    if (!error.empty()) ConsoleLog("net: " + error);
    ports.insert(r.ports.begin(), r.ports.end());
  }
  address_rules_ = std::move(rules);
  for (auto it = wildcard_.begin(); it != wildcard_.end();) {
    if (ports.count(it->first) == 0) {
      close(it->second->fd);
      it = wildcard_.erase(it);
    } else {
      ++it;
    }
  }
  // Names give up the ports that wildcard listeners take over (both cannot bind), then the
  // wildcard listeners open, then names take back the ports no wildcard holds any more.
  std::map<uint16_t, std::unique_ptr<Listener>> opening;
  for (uint16_t port : ports) {
    if (wildcard_.count(port) == 0) opening[port] = nullptr;
  }
  for (auto& [name, n] : names_) {
    for (auto it = n->listeners.begin(); it != n->listeners.end();) {
      if (opening.count(it->first) != 0) {
        close(it->second->fd);
        it = n->listeners.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [port, slot] : opening) {
    int fd = Listen(INADDR_ANY, port);
    if (fd < 0) {
      ConsoleLog("net: listen on port " + std::to_string(port) + ": " + strerror(errno));
      continue;
    }
    auto l = std::make_unique<Listener>();
    l->fd = fd;
    l->port = port;
    wildcard_[port] = std::move(l);
  }
  for (auto& [name, n] : names_) SyncListeners(*n);
}

void GuestNet::Accept(Listener& listener) {
  for (int i = 0; i < 16 && conns_.size() - port_conns_ < kMaxConns; ++i) {
    int fd = accept4(listener.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    std::string name = listener.name;
    sockaddr_in local = {};
    socklen_t local_len = sizeof(local);
    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len);
    uint32_t addr = ntohl(local.sin_addr.s_addr);
    if (name.empty()) {
      // A wildcard listener: a synthetic address of a name allowed on this port, or an
      // address an address rule allows on it; anything else (the guest's own loopback) is not
      // ours to carry.
      bool ok = false;
      if (InSyntheticRange(addr)) {
        auto n = address_names_.find(addr);
        if (n != address_names_.end()) {
          name = n->second;
          ok = names_.count(name) != 0 && names_[name]->ports.count(listener.port) != 0;
        }
      } else {
        ok = std::any_of(address_rules_.begin(), address_rules_.end(), [&](const AddressRule& r) {
          return r.Contains(addr) &&
                 std::find(r.ports.begin(), r.ports.end(), listener.port) != r.ports.end();
        });
      }
      if (!ok) {
        CloseWithReset(fd);
        continue;
      }
    }
    uint32_t id = OpenStream();
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    conns_[id] = std::move(c);
    uint32_t be = htonl(addr);
    SendMessage(id, ConnectMessage{.name = name,
                                   .address = std::string(reinterpret_cast<const char*>(&be), 4),
                                   .port = listener.port});
  }
}

void GuestNet::PumpConn(uint32_t id, Conn& c, short revents, bool can_send) {
  if (c.connecting) {
    if (revents & (POLLOUT | POLLERR | POLLHUP)) FinishConnect(id, c);
    return;
  }
  if ((revents & (POLLIN | POLLHUP | POLLERR)) && !c.socket_ended && can_send) {
    while (c.window.sendable() > 0) {
      char buf[kMaxPayload];
      ssize_t n = read(c.fd, buf, std::min<uint64_t>(sizeof(buf), c.window.sendable()));
      if (n > 0) {
        send_(FrameType::kData, id, std::string_view(buf, static_cast<size_t>(n)));
        c.window.Sent(static_cast<uint64_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n < 0) {
        int e = errno;
        CloseConn(id, false, true, static_cast<uint32_t>(e),
                  std::string("the guest program's socket failed: ") + strerror(e));
        return;
      }
      c.socket_ended = true;
      send_(FrameType::kDataEnd, id, "");
      break;
    }
  }
  while (!c.to_socket.empty()) {
    ssize_t n = write(c.fd, c.to_socket.data(), c.to_socket.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) {
      int e = errno;
      CloseConn(id, false, true, static_cast<uint32_t>(e),
                std::string("the guest program closed the connection: ") + strerror(e));
      return;
    }
    c.to_socket.erase(0, static_cast<size_t>(n));
    c.window.Consumed(static_cast<uint64_t>(n));
  }
  if (c.host_ended && c.to_socket.empty() && !c.shut_write) {
    shutdown(c.fd, SHUT_WR);
    c.shut_write = true;
  }
  if (c.socket_ended && c.shut_write) {
    close(c.fd);
    if (c.port != 0) --port_conns_;
    conns_.erase(id);
  }
}

void GuestNet::GrantConn(uint32_t id, Conn& c, bool force) {
  // Everything the socket took is granted once nothing more waits for it.
  if (uint32_t grant = c.window.TakeGrant(force || c.to_socket.empty()); grant > 0) {
    SendMessage(id, WindowMessage{.bytes = grant});
  }
}

void GuestNet::CloseConn(uint32_t id, bool reset_socket, bool tell_host, uint32_t code,
                         const std::string& why) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  if (reset_socket) {
    CloseWithReset(it->second->fd);
  } else {
    close(it->second->fd);
  }
  if (it->second->port != 0) --port_conns_;
  conns_.erase(it);
  if (tell_host) SendMessage(id, ResetMessage{.code = code, .message = why});
}

bool GuestNet::HandleFrame(const Frame& frame, std::string* error) {
  auto fail = [&](const std::string& what) {
    *error = what + " (stream " + std::to_string(frame.stream) + ")";
    return false;
  };
  if (frame.type == FrameType::kNetPolicy) {
    if (frame.stream != 0) return fail("address rules on a stream");
    NetPolicyMessage policy;
    if (!DecodePayload(frame.payload, &policy)) return fail("malformed address rules");
    std::vector<AddressRule> rules;
    for (AddressRuleMessage& r : policy.rules) {
      uint32_t be;
      memcpy(&be, r.base.data(), 4);
      rules.push_back({.base = ntohl(be), .prefix = r.prefix, .ports = std::move(r.ports)});
    }
    ApplyPolicy(std::move(rules));
    std::vector<std::string> names;
    for (auto& [name, n] : names_) {
      n->allowed_at_ms = 0;  // nothing is answered from memory until the host said it again
      names.push_back(name);
    }
    for (const std::string& name : names) {
      if (questions_.size() < kMaxQuestions) Ask(name, true);
    }
    return true;
  }
  uint32_t id = frame.stream;
  if (id % 2 == 1 && conns_.count(id) != 0) {
    if (frame.type == FrameType::kDnsAnswer) return fail("DNS answer on a connection");
  } else if (id == 0 || id % 2 != 0) {
    return fail("not a guest stream");
  } else if (id >= next_stream_) {
    // Frames of streams the agent already closed (or dropped at a pause) come late; fine.
    return fail("frame for a stream the guest never opened");
  }
  if (frame.type == FrameType::kDnsAnswer) {
    auto q = questions_.find(id);
    if (q == questions_.end()) return conns_.count(id) == 0 || fail("DNS answer on a connection");
    DnsAnswerMessage answer;
    if (!DecodePayload(frame.payload, &answer)) return fail("malformed DNS answer");
    std::unique_ptr<Question> question = std::move(q->second);
    questions_.erase(q);
    asking_.erase(question->name);
    ApplyAnswer(question->name, answer.verdict, std::move(answer.ports));
    AnswerWaiters(*question, answer.verdict == DnsVerdict::kFailed);
    return true;
  }
  auto it = conns_.find(id);
  if (it == conns_.end()) {
    if (questions_.count(id) != 0) return fail("connection frame on a DNS question");
    return true;
  }
  Conn& c = *it->second;
  switch (frame.type) {
    case FrameType::kData:
      if (frame.payload.empty() || c.host_ended) return fail("unexpected data");
      if (!c.window.Received(frame.payload.size())) return fail("host sent data beyond the window");
      c.to_socket += frame.payload;
      return true;
    case FrameType::kDataEnd:
      c.host_ended = true;
      if (c.to_socket.empty() && !c.connecting) PumpConn(id, c, 0, false);
      return true;
    case FrameType::kReset:
      CloseConn(id, true, false, 0, "");
      return true;
    case FrameType::kWindow: {
      WindowMessage window;
      if (!DecodePayload(frame.payload, &window)) return fail("malformed window");
      if (!c.window.Granted(window.bytes)) return fail("window grows beyond its size");
      return true;
    }
    default:
      return fail("unexpected frame type " + std::to_string(static_cast<int>(frame.type)));
  }
}

void GuestNet::DropAll() {
  for (auto& [id, c] : conns_) CloseWithReset(c->fd);
  conns_.clear();
  port_conns_ = 0;
  for (auto& [id, q] : questions_) AnswerWaiters(*q, /*failed=*/true);
  questions_.clear();
  asking_.clear();
}

void GuestNet::OpenPort(uint32_t id, const std::string& payload) {
  OpenPortMessage open;
  if (!DecodePayload(payload, &open) || conns_.count(id) != 0) {
    SendMessage(id, ResetMessage{.code = EINVAL, .message = "malformed port connection"});
    return;
  }
  if (port_conns_ >= kMaxPortConns) {
    SendMessage(id, ResetMessage{.code = EAGAIN, .message = "too many connections to guest ports"});
    return;
  }
  auto c = std::make_unique<Conn>();
  c->port = static_cast<uint16_t>(open.port);
  Conn& conn = *c;
  conns_[id] = std::move(c);
  ++port_conns_;
  if (!StartConnect(conn)) FinishConnect(id, conn);
}

bool GuestNet::StartConnect(Conn& c) {
  if (c.fd >= 0) close(c.fd);
  c.fd = -1;
  while (c.addresses_tried < 2) {
    bool v6 = c.addresses_tried++ == 1;
    sockaddr_storage address = {};
    socklen_t length;
    if (v6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&address);
      a->sin6_family = AF_INET6;
      a->sin6_port = htons(c.port);
      a->sin6_addr = in6addr_loopback;
      length = sizeof(*a);
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&address);
      a->sin_family = AF_INET;
      a->sin_port = htons(c.port);
      a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      length = sizeof(*a);
    }
    c.fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) continue;
    if (connect(c.fd, reinterpret_cast<sockaddr*>(&address), length) == 0 || errno == EINPROGRESS) {
      c.connecting = true;
      return true;
    }
    close(c.fd);
    c.fd = -1;
  }
  return false;
}

void GuestNet::FinishConnect(uint32_t id, Conn& c) {
  int err = c.fd < 0 ? ECONNREFUSED : 0;
  socklen_t len = sizeof(err);
  if (c.fd >= 0 && getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err == 0) {
    c.connecting = false;  // made; data the host sent meanwhile goes out on the next poll
    return;
  }
  if (StartConnect(c)) return;  // ::1 next
  CloseConn(id, false, true, static_cast<uint32_t>(err),
            "nothing accepts connections on port " + std::to_string(c.port) + " in the guest (" +
                strerror(err) + "); is the server running and listening?");
}

}  // namespace airlock::guest
