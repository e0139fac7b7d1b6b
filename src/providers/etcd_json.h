// The JSON bodies etcd's v3 gRPC gateway answers with, parsed as untrusted bytes: the endpoint is
// configuration and a network in between may be hostile. Proto3's JSON mapping is what they
// follow: int64 fields come as strings (numbers are accepted too), bytes as base64, and a field
// at its default (0, false, empty) is left out, so an absent field reads as its default. Every
// field that is present must have its type; keys, values, messages and counts are capped. Nothing
// here fails open: a body that does not parse is an error, never an empty answer. Thread-safe
// (no state).
#ifndef AIRLOCK_PROVIDERS_ETCD_JSON_H_
#define AIRLOCK_PROVIDERS_ETCD_JSON_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::providers {

// Bodies larger than this are refused before they are parsed (and while they are read).
inline constexpr size_t kMaxEtcdResponseBody = 4 << 20;
// A key and a value once decoded (etcd's own default request limit is 1.5 MiB).
inline constexpr size_t kMaxEtcdKey = 4096;
inline constexpr size_t kMaxEtcdValue = 1 << 20;
// Entries one range answer may hold.
inline constexpr size_t kMaxEtcdEntries = 10000;
// An error's message is made printable and cut here.
inline constexpr size_t kMaxEtcdMessage = 1024;

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;  // 0: none
};

// An error answer: {"error": "...", "code": N, "message": "..."} for a unary call, or
// {"error": {"grpc_code": N, "message": "..."}} on a stream (keepalive). code is gRPC's.
struct EtcdError {
  int code = 0;
  std::string message;  // printable ASCII, at most kMaxEtcdMessage bytes
};
// The error a body describes; nullopt when it is not an error answer (or not JSON at all).
std::optional<EtcdError> ParseEtcdError(absl::string_view body);

// /v3/kv/range.
struct EtcdRangeAnswer {
  int64_t revision = 0;  // the store's revision the answer was read at
  std::vector<EtcdKeyValue> kvs;
  bool more = false;  // a limit left keys out
  int64_t count = 0;  // keys in the range (not only those returned)
};
[[nodiscard]] absl::StatusOr<EtcdRangeAnswer> ParseEtcdRange(absl::string_view body);

// /v3/kv/put and /v3/lease/revoke: the header's revision.
[[nodiscard]] absl::StatusOr<int64_t> ParseEtcdHeaderRevision(absl::string_view body);

// /v3/kv/deleterange: how many keys were deleted.
[[nodiscard]] absl::StatusOr<int64_t> ParseEtcdDeleteRange(absl::string_view body);

// /v3/kv/txn: whether the comparisons held (and so the success branch ran).
[[nodiscard]] absl::StatusOr<bool> ParseEtcdTxn(absl::string_view body);

// /v3/lease/grant, and one answer of the /v3/lease/keepalive stream ({"result": {...}}, one per
// line; exactly one is expected). ttl 0 from keepalive: the lease has expired or never was.
struct EtcdLeaseAnswer {
  int64_t id = 0;
  int64_t ttl = 0;  // seconds
};
[[nodiscard]] absl::StatusOr<EtcdLeaseAnswer> ParseEtcdLeaseGrant(absl::string_view body);
[[nodiscard]] absl::StatusOr<EtcdLeaseAnswer> ParseEtcdKeepAlive(absl::string_view body);

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_ETCD_JSON_H_
