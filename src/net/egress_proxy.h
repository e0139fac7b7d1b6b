// The host end of one session's egress: answers the guest's DNS questions and carries its
// connections to the destinations its policy allows, and nothing else.
//
// For each connection the guest opens (a kConnect stream, see src/common/channel_frame.h) the
// proxy decides on name + port, resolves the name itself (Resolver), refuses internal addresses
// the operator's ceiling does not name (so a name that resolves to 127.0.0.1 or the metadata
// address is no way in: DNS rebinding), dials the address it checked (never a second lookup),
// and on port 443 requires the TLS ClientHello's SNI, on port 80 the HTTP Host header, to be
// the allowed name before a byte goes out. Then it relays both ways within the channel's
// flow-control windows. Every decision becomes a NetEvent.
//
// A connection on 443 to a host that one of the session's secrets is bound to is intercepted:
// the proxy completes the guest's TLS handshake itself with a certificate the session's CA
// minted for the name (src/net/tls_intercept.h), opens its own TLS connection to the server
// (verified against the host's trust store), and passes the plaintext through HttpIntercept,
// which swaps placeholders for values on the way out and masks values on the way back.
//
// One libevent loop on a thread of its own serves the session; the channel's reader thread
// only queues work for it. Thread-safe.
#ifndef AIRLOCK_NET_EGRESS_PROXY_H_
#define AIRLOCK_NET_EGRESS_PROXY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/net/connection_ledger.h"
#include "src/net/egress_policy.h"
#include "src/net/net_event.h"
#include "src/net/tls_intercept.h"
#include "src/vm/guest_channel.h"

namespace airlock::net {

// Name resolution on the host, behind a seam: tests and operators map names to addresses.
class Resolver {
 public:
  virtual ~Resolver() = default;
  // Blocking (the proxy calls it off its loop). NOT_FOUND when the name does not exist.
  [[nodiscard]] virtual absl::StatusOr<std::vector<IpAddress>> Resolve(const std::string& name) = 0;
};

// getaddrinfo, i.e. the host's own resolver configuration.
class SystemResolver : public Resolver {
 public:
  absl::StatusOr<std::vector<IpAddress>> Resolve(const std::string& name) override;
};

// Names listed in a hosts-style file ("ADDRESS NAME [NAME...]" lines, # comments) resolve to
// those addresses; every other name goes to `fallback` (nullptr: NOT_FOUND).
class StaticResolver : public Resolver {
 public:
  static absl::StatusOr<std::unique_ptr<StaticResolver>> Parse(std::string_view text,
                                                               std::shared_ptr<Resolver> fallback);
  absl::StatusOr<std::vector<IpAddress>> Resolve(const std::string& name) override;

 private:
  std::vector<std::pair<std::string, IpAddress>> entries_;
  std::shared_ptr<Resolver> fallback_;
};

// A secret as the proxy uses it: bound to `hosts` (lower case), swapped in for `placeholder`.
struct ProxySecret {
  std::string name;
  std::string placeholder;
  std::string value;  // empty: the value is not available (the request goes out unchanged)
  std::vector<std::string> hosts;
  bool body = false;                 // may enter request bodies
  std::vector<std::string> headers;  // the request headers it may enter (lower case)
};

struct EgressProxyOptions {
  std::shared_ptr<Resolver> resolver;
  // Called on the proxy's thread with events in batches (at most every 250 ms).
  std::function<void(std::vector<NetEvent>)> on_events;
  uint32_t max_connections = 256;
  // Connections counted with every other session's, per tenant and in all (nullptr: not
  // counted); `tenant_connections` is the tenant's quota of them.
  std::shared_ptr<ConnectionLedger> ledger;
  std::string tenant;
  uint64_t tenant_connections = UINT64_MAX;
  // A connection that carries no byte either way for this long is ended; 0: never.
  int idle_timeout_ms = 10 * 60 * 1000;
  // All connections of the session together, each direction; 0: no limit.
  uint64_t bytes_per_second = 0;
  // A destination that does not accept the connection within this is reported ETIMEDOUT.
  int connect_timeout_ms = 10000;
  // Interception: the session's CA and the context real servers are verified with. Without
  // both, no connection is intercepted and secrets are never swapped in.
  std::shared_ptr<SessionCa> ca;
  std::shared_ptr<SSL_CTX> upstream_tls;
  std::vector<ProxySecret> secrets;
  // The port that carries only TLS (SNI checked, intercepted where secrets are bound). Tests
  // move it off the privileged 443.
  uint16_t tls_port = 443;
};

// A running session's egress as the daemon steers it: the local proxy below is one; a
// NetworkProvider (src/providers/network_provider.h) whose traffic leaves another way brings its
// own. Thread-safe.
class EgressPath {
 public:
  virtual ~EgressPath() = default;
  // Ends every connection; the channel's guest streams get no more answers.
  virtual void Stop() = 0;
  // A new policy: connections it no longer allows are reset, the guest re-asks about names.
  virtual void SetPolicy(std::shared_ptr<const EgressPolicy> policy) = 0;
  // New secrets (or values), and the CA that intercepts for them, for connections opened from
  // now on.
  virtual void SetSecrets(std::vector<ProxySecret> secrets, std::shared_ptr<SessionCa> ca) = 0;
  // Bytes carried and connections and denials so far.
  struct Counters {
    uint64_t bytes_out = 0;
    uint64_t bytes_in = 0;
    uint64_t connections = 0;
    uint64_t denied = 0;
  };
  virtual Counters counters() const = 0;
  // Hands every decision recorded so far to the path's event callback before it returns, so
  // that a reader that comes after (an exec that just ended, `network log`) sees them.
  virtual void Flush() = 0;
};

class EgressProxy : public EgressPath,
                    public GuestStreamHandler,
                    public std::enable_shared_from_this<EgressProxy> {
 public:
  // Serves the channel's guest streams from now on and sends the guest its address rules.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<EgressProxy>> Start(
      std::shared_ptr<GuestChannel> channel, std::shared_ptr<const EgressPolicy> policy,
      EgressProxyOptions options);
  ~EgressProxy() override;
  void Stop() override;
  void SetPolicy(std::shared_ptr<const EgressPolicy> policy) override;
  void SetSecrets(std::vector<ProxySecret> secrets, std::shared_ptr<SessionCa> ca) override;
  Counters counters() const override;
  void Flush() override;

  void OnOpen(uint32_t id, FrameType type, std::string payload) override;
  void OnData(uint32_t id, std::string data) override;
  void OnDataEnd(uint32_t id) override;
  void OnReset(uint32_t id, uint32_t code, std::string message) override;
  void OnWindow(uint32_t id) override;

  class Impl;

 private:
  explicit EgressProxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What the guest is told of a policy (kNetPolicy): its IPv4 address rules.
NetPolicyMessage GuestNetPolicy(const EgressPolicy& policy);

}  // namespace airlock::net

#endif  // AIRLOCK_NET_EGRESS_PROXY_H_
