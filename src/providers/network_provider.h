// NetworkProvider: how a session's egress leaves the host its VM runs on. Whatever the provider,
// the guest has no network device: its DNS questions and TCP connections arrive as streams on
// the VM's channel, and the session's EgressPolicy decides each one. The provider is the path
// from there out: LocalNetwork is this machine's egress proxy (src/net/egress_proxy.h), which
// resolves names itself and connects from the host's own network stack; a cloud host's provider
// would hand the same decisions to its own way out (an egress gateway, a NAT with a fixed
// address) behind the same two calls.
#ifndef AIRLOCK_PROVIDERS_NETWORK_PROVIDER_H_
#define AIRLOCK_PROVIDERS_NETWORK_PROVIDER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "src/net/address_guard.h"
#include "src/net/egress_policy.h"
#include "src/net/egress_proxy.h"
#include "src/vm/guest_channel.h"

namespace airlock::providers {

// Thread-safe.
class NetworkProvider {
 public:
  virtual ~NetworkProvider() = default;

  // The addresses of the host itself: every policy counts them internal, so no session reaches
  // the host's own services unless the operator's ceiling names them.
  [[nodiscard]] virtual absl::StatusOr<std::vector<net::IpAddress>> HostAddresses() = 0;

  // Starts the egress of a session whose VM now runs: serves the channel's guest streams with
  // `policy` until the returned path is stopped. options carry what the daemon decided for the
  // session (bandwidth, secrets and their CA, where events go); options.resolver, when null,
  // is the provider's own.
  [[nodiscard]] virtual absl::StatusOr<std::shared_ptr<net::EgressPath>> Attach(
      std::shared_ptr<GuestChannel> channel, std::shared_ptr<const net::EgressPolicy> policy,
      net::EgressProxyOptions options) = 0;
};

// This machine's network: the egress proxy, names resolved with `resolver` (null: the host's
// resolver, getaddrinfo).
class LocalNetwork : public NetworkProvider {
 public:
  explicit LocalNetwork(std::shared_ptr<net::Resolver> resolver = nullptr)
      : resolver_(resolver != nullptr ? std::move(resolver)
                                      : std::make_shared<net::SystemResolver>()) {}

  absl::StatusOr<std::vector<net::IpAddress>> HostAddresses() override {
    return net::HostAddresses();
  }
  absl::StatusOr<std::shared_ptr<net::EgressPath>> Attach(
      std::shared_ptr<GuestChannel> channel, std::shared_ptr<const net::EgressPolicy> policy,
      net::EgressProxyOptions options) override {
    if (options.resolver == nullptr) options.resolver = resolver_;
    absl::StatusOr<std::shared_ptr<net::EgressProxy>> proxy =
        net::EgressProxy::Start(std::move(channel), std::move(policy), std::move(options));
    if (!proxy.ok()) return proxy.status();
    return std::shared_ptr<net::EgressPath>(*std::move(proxy));
  }

 private:
  std::shared_ptr<net::Resolver> resolver_;
};

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_NETWORK_PROVIDER_H_
