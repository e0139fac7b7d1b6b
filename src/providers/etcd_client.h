// EtcdClient: etcd's v3 key-value store and leases, spoken through its JSON gRPC gateway (POST
// /v3/...) over libcurl, so that hosts sharing one control plane need no gRPC client of etcd's.
// The primitives ownership is built from (host_lease.h): transactions that compare a key's
// create or mod revision, and leases that take their keys with them when nobody keeps them alive.
//
// Endpoints are tried in turn: a connection error or a 5xx answer moves on to the next one, and
// after a round of them all the client backs off (exponentially, with jitter) and tries again,
// `attempts` rounds in all. A request that timed out may still have been applied: Put, Delete and
// RevokeLease are idempotent; a conditional write retried after it took effect answers false
// (its condition no longer holds), so callers that must know read the key (HostLease does). A
// retried GrantLease may leave a lease nobody holds; it expires after its TTL.
//
// Answers are read with a cap (kMaxEtcdResponseBody) and parsed in etcd_json.cc. Errors say
// what failed and what to do (start etcd, check the endpoint or the certificates).
// Thread-safe: each call uses its own connection; the object is immutable but for which
// endpoint answered last.
#ifndef AIRLOCK_PROVIDERS_ETCD_CLIENT_H_
#define AIRLOCK_PROVIDERS_ETCD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/providers/etcd_json.h"

namespace airlock::providers {

struct EtcdConfig {
  // Each "https://host[:port]", or "http://127.0.0.1:PORT" for an etcd on this host. At least one.
  std::vector<std::string> endpoints;
  // For https: the CA that signed etcd's certificate ("" for the system's), and this host's
  // client certificate and key when etcd asks for one (--client-cert-auth). PEM files.
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  int attempts = 3;  // rounds over all endpoints, 1 to 10
  absl::Duration retry_delay = absl::Milliseconds(100);
  absl::Duration request_timeout = absl::Seconds(5);
};

// A lease as etcd granted it: its TTL may be longer than asked (etcd's minimum is about
// 1.5 election timeouts: 2 s with its default settings).
struct EtcdLease {
  int64_t id = 0;
  int64_t ttl_seconds = 0;
};

class EtcdClient {
 public:
  // InvalidArgument, saying what to write, for a bad endpoint, file or number. Contacts nobody.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(EtcdConfig config);

  // The key's entry, or nullopt when there is none.
  [[nodiscard]] absl::StatusOr<std::optional<EtcdKeyValue>> Get(absl::string_view key) const;
  // Entries whose keys start with prefix (not empty), in key order, at most limit of them (1 to
  // kMaxEtcdEntries), all read at one revision.
  [[nodiscard]] absl::StatusOr<std::vector<EtcdKeyValue>> GetPrefix(absl::string_view prefix,
                                                                    size_t limit) const;
  // Sets the key; lease 0 for none, else the key is deleted when the lease ends (NotFound when
  // the lease has already ended).
  [[nodiscard]] absl::Status Put(absl::string_view key, absl::string_view value,
                                 int64_t lease = 0) const;
  // Deletes the key; OK when there is none.
  [[nodiscard]] absl::Status Delete(absl::string_view key) const;

  // Sets the key only if it does not exist; whether it did.
  [[nodiscard]] absl::StatusOr<bool> CreateIfAbsent(absl::string_view key, absl::string_view value,
                                                    int64_t lease = 0) const;
  // Sets the key only if it exists with this mod_revision; whether it did.
  [[nodiscard]] absl::StatusOr<bool> CompareAndSwap(absl::string_view key,
                                                    int64_t expected_mod_revision,
                                                    absl::string_view value,
                                                    int64_t lease = 0) const;
  // Sets the key only while guard_key holds guard_value (a claim that is still this host's);
  // whether it did.
  [[nodiscard]] absl::StatusOr<bool> PutWhile(absl::string_view guard_key,
                                              absl::string_view guard_value, absl::string_view key,
                                              absl::string_view value) const;
  // Deletes the key only if it exists with this mod_revision; whether it did.
  [[nodiscard]] absl::StatusOr<bool> DeleteIf(absl::string_view key,
                                              int64_t expected_mod_revision) const;

  // A new lease of at least ttl_seconds (1 to 1 day).
  [[nodiscard]] absl::StatusOr<EtcdLease> GrantLease(int64_t ttl_seconds) const;
  // Renews the lease; the seconds it now has left. NotFound when it has expired or was revoked.
  [[nodiscard]] absl::StatusOr<int64_t> KeepAlive(int64_t lease) const;
  // Ends the lease now, deleting its keys; OK when it had already ended.
  [[nodiscard]] absl::Status RevokeLease(int64_t lease) const;

  // "http://127.0.0.1:2379" or "a, b and c": for messages.
  std::string Endpoints() const;

  struct Response;

 private:
  explicit EtcdClient(EtcdConfig config) : config_(std::move(config)) {}

  // One POST of a JSON body to endpoint + path.
  Response Once(const std::string& endpoint, absl::string_view path, const std::string& body) const;
  // Once, over the endpoints and retried (see the class comment).
  Response Perform(absl::string_view path, const std::string& body) const;
  // A whole 200 answer's body, or the status for anything else, saying what failed (`what`).
  absl::StatusOr<std::string> Call(absl::string_view path, const std::string& body,
                                   absl::string_view what) const;
  absl::Status ErrorOf(const Response& response, absl::string_view what) const;
  absl::StatusOr<bool> Txn(const std::string& body, absl::string_view what) const;

  const EtcdConfig config_;
  mutable std::atomic<size_t> preferred_{0};  // the endpoint that answered last
};

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_ETCD_CLIENT_H_
