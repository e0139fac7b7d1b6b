// HostLease: one airlockd host's membership in a shared control plane on etcd, and the rule for
// which host owns a session.
//
// Keys, under a prefix the hosts share (such as "/airlock"):
//   <prefix>/hosts/<host id>             this host's capacity (a JSON object of the caller's)
//   <prefix>/sessions/<session id>/owner the host id of the host that owns the session
// Both are bound to the host's lease. The lease is kept alive from a background thread every
// TTL/3; if the host dies (or is cut off from etcd for longer than the TTL), the lease expires
// and etcd deletes its keys, so its sessions have no owner and any other host may claim them:
// that is the takeover rule. A claim is a transaction (create the owner key if it does not
// exist), so at most one host owns a session at a time.
//
// Lease loss: when a keepalive finds the lease gone, or none has succeeded for a whole TTL, the
// lease is lost for good: `lost()` turns true, the on_lost callback runs once (on the keepalive
// thread; it must not destroy this object), and ClaimSession answers FailedPrecondition from
// then on. Another host may already own this host's sessions, so a host that lost its lease
// must stop serving them (and Start a new HostLease to take part again).
//
// Not wired into airlockd yet. Thread-safe: every method may be called from any thread.
#ifndef AIRLOCK_PROVIDERS_HOST_LEASE_H_
#define AIRLOCK_PROVIDERS_HOST_LEASE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/providers/etcd_client.h"

namespace airlock::providers {

struct HostLeaseOptions {
  std::string prefix = "/airlock";   // starts with '/', no trailing '/'
  std::string host_id;               // 1 to 128 of [A-Za-z0-9._-], unique per host
  int64_t ttl_seconds = 10;          // etcd may grant more (its minimum is about 2 s)
  std::string capacity_json = "{}";  // a JSON object, at most 4 KiB
  // Called once, on the keepalive thread, when the lease is lost (see above).
  std::function<void(const absl::Status&)> on_lost;
};

class HostLease {
 public:
  // Grants the lease, writes this host's key and starts keeping the lease alive. InvalidArgument
  // for bad options; FailedPrecondition when the host id is registered already (by another
  // process, or by this host's previous run until its lease expires); etcd's errors as
  // EtcdClient gives them. client must outlive the object.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HostLease>> Start(const EtcdClient* client,
                                                                        HostLeaseOptions options);
  // Stops the keepalive and revokes the lease (unless Abandon ran): this host's key and claims
  // vanish at once, so other hosts may take its sessions without waiting for the TTL.
  ~HostLease();
  HostLease(const HostLease&) = delete;
  HostLease& operator=(const HostLease&) = delete;

  // Stops keeping the lease alive without revoking it: it expires after its TTL, as when the
  // host dies, and this object counts it as lost at once (on_lost does not run). For tests of
  // takeover, and for a host that must go without touching etcd.
  void Abandon();

  // Whether the lease is lost (see above) or abandoned.
  bool lost() const;
  int64_t lease_id() const { return lease_.id; }
  int64_t ttl_seconds() const { return lease_.ttl_seconds; }
  const std::string& host_id() const { return options_.host_id; }

  // Makes this host the session's owner if it has none; true if this host owns it now (also
  // when it already did), false if another host does. FailedPrecondition once the lease is lost.
  [[nodiscard]] absl::StatusOr<bool> ClaimSession(const std::string& session_id);
  // Gives the session up if this host owns it; OK when it does not.
  [[nodiscard]] absl::Status ReleaseSession(const std::string& session_id);
  // The host id of the session's owner, or nullopt when it has none.
  [[nodiscard]] absl::StatusOr<std::optional<std::string>> Owner(
      const std::string& session_id) const;

  // The key a session's owner is kept under (for tests and tools).
  std::string OwnerKey(const std::string& session_id) const;

 private:
  HostLease(const EtcdClient* client, HostLeaseOptions options, EtcdLease lease)
      : client_(client), options_(std::move(options)), lease_(lease) {}

  void KeepAliveLoop();
  void MarkLost(const absl::Status& why);
  void StopThread();
  absl::Status CheckSessionId(const std::string& session_id) const;

  const EtcdClient* const client_;
  const HostLeaseOptions options_;
  const EtcdLease lease_;
  std::thread keepalive_;

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status lost_why_ ABSL_GUARDED_BY(mu_);
  absl::Time last_renewed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_HOST_LEASE_H_
