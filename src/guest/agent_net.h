// The guest's side of egress: a DNS server on 127.0.0.1:53 that asks the host about every
// name, and the TCP listeners that stand in for the destinations the host allowed.
//
// The guest has no network device. An allowed name is answered with a synthetic address from
// 198.18.0.0/15, which a local route on `lo` makes the guest's own; the agent listens on that
// address for each port the host allowed for the name, so any TCP client connects to the agent
// without proxy settings. Each accepted connection becomes a stream the agent opens (kConnect)
// and the host relays, deciding again for itself. A connection to any other port of a synthetic
// address is refused at once by the guest's kernel (nothing listens), and any other address is
// unreachable (no route), so denials never hang.
//
// Address rules (an IP or CIDR, from kNetPolicy) get a local route for their range and a
// listener on the wildcard address for each of their ports; such a listener also serves the
// synthetic addresses on that port and resets connections to anything else.
//
// The host is authoritative: the agent only caches its answers, asks again about every name
// when the policy changes, and obeys resets. Not thread-safe: owned by AgentServer's poll loop.
#ifndef AIRLOCK_GUEST_AGENT_NET_H_
#define AIRLOCK_GUEST_AGENT_NET_H_

#include <poll.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/channel_messages.h"
#include "src/guest/dns_message.h"

namespace airlock::guest {

// Once at boot, inside the guest's root: the route for the synthetic range and
// /etc/resolv.conf pointing at the agent. Returns what failed, or an empty string.
std::string PrepareGuestNetwork();

class GuestNet {
 public:
  using SendFn = std::function<void(FrameType, uint32_t, std::string_view)>;
  explicit GuestNet(SendFn send);
  ~GuestNet();
  GuestNet(const GuestNet&) = delete;
  GuestNet& operator=(const GuestNet&) = delete;

  // Opens the DNS socket; failures are logged to the console (the guest then has no DNS).
  void Start();

  // The poll loop: adds descriptors to watch (can_send: the host may be sent more now), then
  // handles what poll reported for them. Returns a poll timeout in ms (-1: none needed).
  int AddPollFds(std::vector<pollfd>* fds, bool can_send);
  void HandlePoll(const std::vector<pollfd>& fds, bool can_send);

  // Whether a frame is this class's: kNetPolicy, one of a stream the agent opened (even ids), or
  // one of a connection to a guest port the host opened (OpenPort) that is still open.
  bool Handles(const Frame& frame) const {
    return frame.type == FrameType::kNetPolicy || (frame.stream != 0 && frame.stream % 2 == 0) ||
           (frame.type != FrameType::kOpenPort && conns_.count(frame.stream) != 0);
  }
  // kOpenPort: connects stream id (the host's) to a TCP port on the guest's loopback; the
  // connection is then carried like the guest's own. A malformed or repeated request is reset.
  void OpenPort(uint32_t id, const std::string& payload);
  // Such a frame. False, with *error set, when the host broke the protocol.
  bool HandleFrame(const Frame& frame, std::string* error);

  // At kPause: every connection is reset and every pending question fails (SERVFAIL); the
  // agent sends nothing for them afterwards.
  void DropAll();

  // The highest stream id the agent opened (0: none), for kReady.
  uint32_t highest_stream() const { return next_stream_ - 2; }

 private:
  struct Name;
  struct Listener;
  struct Conn;
  struct Question;
  struct AddressRule {
    uint32_t base = 0;  // host byte order
    uint32_t prefix = 32;
    std::vector<uint16_t> ports;
    bool Contains(uint32_t addr) const;
  };

  uint32_t OpenStream();
  void ReadDns();
  // Answers everyone waiting on q from what the host last said of its name (SERVFAIL when
  // failed), and forgets them.
  void AnswerWaiters(Question& q, bool failed);
  void Ask(const std::string& name, bool refresh);
  void ApplyAnswer(const std::string& name, DnsVerdict verdict, std::vector<uint16_t> ports);
  void ApplyPolicy(std::vector<AddressRule> rules);
  void SyncListeners(Name& name);
  void Accept(Listener& listener);
  void PumpConn(uint32_t id, Conn& c, short revents, bool can_send);
  // A connection to a guest port: made, or tried on the next address, or reset with why not.
  void FinishConnect(uint32_t id, Conn& c);
  // Starts connecting c to its port on the next loopback address to try; false if none is left.
  bool StartConnect(Conn& c);
  void GrantConn(uint32_t id, Conn& c, bool force);
  void CloseConn(uint32_t id, bool reset_socket, bool tell_host, uint32_t code,
                 const std::string& why);

  SendFn send_;
  template <typename Message>
  void SendMessage(uint32_t stream, const Message& m) {
    send_(Message::kType, stream, EncodePayload(m));
  }
  int dns_fd_ = -1;
  uint32_t next_stream_ = 2;
  uint32_t next_address_ = 0;  // offset into the synthetic range
  std::map<std::string, std::unique_ptr<Name>> names_;
  std::map<uint32_t, std::string> address_names_;            // synthetic address -> name
  std::map<uint32_t, std::unique_ptr<Question>> questions_;  // by stream id
  std::map<std::string, uint32_t> asking_;                   // name -> stream of its question
  std::vector<AddressRule> address_rules_;
  std::map<uint16_t, std::unique_ptr<Listener>> wildcard_;  // address rules' ports
  std::map<uint32_t, std::unique_ptr<Conn>> conns_;         // the guest's and the host's (odd ids)
  size_t port_conns_ = 0;                                   // of conns_, the host's
  // What the last AddPollFds watched, in order, after the agent's own descriptors.
  struct Watched {
    int kind;  // 0 dns, 1 listener (by fd), 2 connection
    int fd;
    uint32_t id;
  };
  std::vector<Watched> watched_;
  size_t watched_first_ = 0;
};

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_AGENT_NET_H_
