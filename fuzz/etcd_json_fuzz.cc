// Fuzz target: etcd's JSON answers (the endpoint is configuration, the network may be hostile):
// every parser the etcd client uses on the same bytes, and the capacity another host of a fleet
// published there. Besides not crashing: what they hand
// back stays within its caps and is what the client may rely on (revisions and counts not
// negative, entries that exist, a granted lease that is one).
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/providers/etcd_json.h"
#include "src/providers/host_provider.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

bool Printable(const std::string& s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace airlock::providers;
  absl::string_view body(reinterpret_cast<const char*>(data), size);
  if (std::optional<EtcdError> error = ParseEtcdError(body)) {
    Check(error->code >= 0 && error->code <= 16);
    Check(error->message.size() <= kMaxEtcdMessage && Printable(error->message));
  }
  if (absl::StatusOr<EtcdRangeAnswer> range = ParseEtcdRange(body); range.ok()) {
    Check(range->revision >= 0 && range->kvs.size() <= kMaxEtcdEntries);
    Check(range->count >= static_cast<int64_t>(range->kvs.size()));
    for (const EtcdKeyValue& kv : range->kvs) {
      Check(!kv.key.empty() && kv.key.size() <= kMaxEtcdKey && kv.value.size() <= kMaxEtcdValue);
      Check(kv.create_revision > 0 && kv.mod_revision >= kv.create_revision);
      Check(kv.version >= 0 && kv.lease >= 0);
    }
  }
  if (absl::StatusOr<int64_t> revision = ParseEtcdHeaderRevision(body); revision.ok()) {
    Check(*revision >= 0);
  }
  if (absl::StatusOr<int64_t> deleted = ParseEtcdDeleteRange(body); deleted.ok()) {
    Check(*deleted >= 0);
  }
  (void)ParseEtcdTxn(body);
  if (absl::StatusOr<EtcdLeaseAnswer> grant = ParseEtcdLeaseGrant(body); grant.ok()) {
    Check(grant->id > 0 && grant->ttl > 0);
  }
  if (absl::StatusOr<EtcdLeaseAnswer> alive = ParseEtcdKeepAlive(body); alive.ok()) {
    Check(alive->id >= 0 && alive->ttl >= 0);
  }
  HostCapacity capacity = ParseHostCapacity(std::string_view(body.data(), body.size()));
  Check(capacity.vcpus <= kMaxHostVcpus);
  return 0;
}
