#include "src/providers/host_lease.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace airlock::providers {
namespace {

constexpr size_t kMaxId = 128;
constexpr size_t kMaxCapacity = 4096;
constexpr size_t kMaxPrefix = 256;
// Claim's create-then-read may race with the owner's key vanishing in between; so few tries.
constexpr int kClaimTries = 3;

bool IdChars(absl::string_view id) {
  return !id.empty() && id.size() <= kMaxId && id != "." && id != ".." &&
         std::all_of(id.begin(), id.end(), [](char c) {
           return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
         });
}

absl::Status CheckOptions(const HostLeaseOptions& o) {
  const std::string& p = o.prefix;
  if (p.size() < 2 || p.size() > kMaxPrefix || p[0] != '/' || absl::EndsWith(p, "/") ||
      !std::all_of(p.begin(), p.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the etcd prefix \"", p.substr(0, 60),
        "\" must start with '/', not end with one, and hold only printable ASCII (up to ",
        kMaxPrefix, " bytes), such as /airlock"));
  }
  if (!IdChars(o.host_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the host id \"", o.host_id.substr(0, 60), "\" must be 1 to ", kMaxId,
                     " letters, digits, '.', '_' or '-' (the host name usually is)"));
  }
  if (o.ttl_seconds < 1 || o.ttl_seconds > 3600) {
    return absl::InvalidArgumentError("a host lease's TTL must be from 1 to 3600 seconds");
  }
  nlohmann::json capacity = nlohmann::json::parse(o.capacity_json, nullptr, false);
  if (o.capacity_json.size() > kMaxCapacity || capacity.is_discarded() || !capacity.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a host's capacity must be a JSON object of at most ", kMaxCapacity, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostLease>> HostLease::Start(const EtcdClient* client,
                                                            HostLeaseOptions options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  absl::StatusOr<EtcdLease> lease = client->GrantLease(options.ttl_seconds);
  if (!lease.ok()) return lease.status();
  std::string host_key = absl::StrCat(options.prefix, "/hosts/", options.host_id);
  absl::StatusOr<bool> registered =
      client->CreateIfAbsent(host_key, options.capacity_json, lease->id);
  if (!registered.ok() || !*registered) {
    // Best effort: a lease nobody keeps alive expires on its own after its TTL.
    (void)client->RevokeLease(lease->id);
    if (!registered.ok()) return registered.status();
    return absl::FailedPreconditionError(absl::StrCat(
        "host id ", options.host_id, " is registered at etcd (", client->Endpoints(), ", key ",
        host_key,
        ") already: another airlockd uses the same id (give each host its own), or this host's "
        "previous run ended without revoking its lease (wait ",
        options.ttl_seconds, " s for it to expire)"));
  }
  std::unique_ptr<HostLease> host(new HostLease(client, std::move(options), *lease));
  {
    absl::MutexLock lock(&host->mu_);
    host->last_renewed_ = absl::Now();
  }
  host->keepalive_ = std::thread([h = host.get()] { h->KeepAliveLoop(); });
  return host;
}

HostLease::~HostLease() {
  bool revoke;
  {
    absl::MutexLock lock(&mu_);
    revoke = !abandoned_ && !lost_;
  }
  StopThread();
  // Nothing to do if it fails: the lease then expires after its TTL, with the same effect.
  if (revoke) (void)client_->RevokeLease(lease_.id);
}

void HostLease::StopThread() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.SignalAll();
  }
  if (keepalive_.joinable() && keepalive_.get_id() != std::this_thread::get_id()) {
    keepalive_.join();
  }
}

void HostLease::Abandon() {
  {
    absl::MutexLock lock(&mu_);
    abandoned_ = true;
  }
  StopThread();
}

bool HostLease::lost() const {
  absl::MutexLock lock(&mu_);
  return lost_ || abandoned_;
}

void HostLease::MarkLost(const absl::Status& why) {
  {
    absl::MutexLock lock(&mu_);
    if (lost_ || stopping_) return;
    lost_ = true;
    lost_why_ = why;
  }
  if (options_.on_lost) options_.on_lost(why);
}

void HostLease::KeepAliveLoop() {
  const absl::Duration ttl = absl::Seconds(lease_.ttl_seconds);
  const absl::Duration interval = std::max(ttl / 3, absl::Milliseconds(200));
  absl::Duration wait = interval;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      absl::Time until = absl::Now() + wait;
      while (!stopping_ && absl::Now() < until) wake_.WaitWithDeadline(&mu_, until);
      if (stopping_) return;
    }
    absl::StatusOr<int64_t> renewed = client_->KeepAlive(lease_.id);
    absl::Time now = absl::Now();
    if (renewed.ok()) {
      absl::MutexLock lock(&mu_);
      last_renewed_ = now;
      wait = interval;
      continue;
    }
    if (absl::IsNotFound(renewed.status())) {
      MarkLost(absl::FailedPreconditionError(
          absl::StrCat("host ", options_.host_id, " lost its etcd lease (",
                       renewed.status().message(), "); its sessions may be another host's now")));
      return;
    }
    absl::Time last;
    {
      absl::MutexLock lock(&mu_);
      last = last_renewed_;
    }
    if (now - last >= ttl) {
      MarkLost(absl::UnavailableError(
          absl::StrCat("host ", options_.host_id, " could not renew its etcd lease for ",
                       lease_.ttl_seconds, " s, so it has expired (", renewed.status().message(),
                       "); its sessions may be another host's now")));
      return;
    }
    wait = std::max(interval / 3, absl::Milliseconds(100));  // try again soon, within the TTL
  }
}

std::string HostLease::OwnerKey(const std::string& session_id) const {
  return absl::StrCat(options_.prefix, "/sessions/", session_id, "/owner");
}

absl::Status HostLease::CheckSessionId(const std::string& session_id) const {
  if (!IdChars(session_id)) {
    return absl::InvalidArgumentError(absl::StrCat("the session id \"", session_id.substr(0, 60),
                                                   "\" must be 1 to ", kMaxId,
                                                   " letters, digits, '.', '_' or '-'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> HostLease::ClaimSession(const std::string& session_id) {
  if (absl::Status s = CheckSessionId(session_id); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    if (lost_ || abandoned_) {
      return absl::FailedPreconditionError(
          absl::StrCat("host ", options_.host_id, " cannot claim session ", session_id,
                       ": it no longer holds its etcd lease",
                       lost_why_.ok() ? "" : absl::StrCat(" (", lost_why_.message(), ")"),
                       "; start a new host lease"));
    }
  }
  std::string key = OwnerKey(session_id);
  for (int attempt = 0; attempt < kClaimTries; ++attempt) {
    absl::StatusOr<bool> created = client_->CreateIfAbsent(key, options_.host_id, lease_.id);
    if (!created.ok()) return created.status();
    if (*created) return true;
    // Someone owns it: perhaps this host already (or a retried create of ours took effect).
    absl::StatusOr<std::optional<EtcdKeyValue>> owner = client_->Get(key);
    if (!owner.ok()) return owner.status();
    if (*owner) return (*owner)->value == options_.host_id && (*owner)->lease == lease_.id;
  }
  return absl::UnavailableError(
      absl::StrCat("claiming session ", session_id, ": its owner key kept changing; try again"));
}

absl::Status HostLease::ReleaseSession(const std::string& session_id) {
  if (absl::Status s = CheckSessionId(session_id); !s.ok()) return s;
  std::string key = OwnerKey(session_id);
  absl::StatusOr<std::optional<EtcdKeyValue>> owner = client_->Get(key);
  if (!owner.ok()) return owner.status();
  if (!*owner || (*owner)->value != options_.host_id || (*owner)->lease != lease_.id) {
    return absl::OkStatus();
  }
  // Only that very entry: if it changed since, it is not ours to delete.
  absl::StatusOr<bool> deleted = client_->DeleteIf(key, (*owner)->mod_revision);
  return deleted.status();
}

absl::StatusOr<std::optional<std::string>> HostLease::Owner(const std::string& session_id) const {
  if (absl::Status s = CheckSessionId(session_id); !s.ok()) return s;
  absl::StatusOr<std::optional<EtcdKeyValue>> owner = client_->Get(OwnerKey(session_id));
  if (!owner.ok()) return owner.status();
  if (!*owner) return std::nullopt;
  return std::move((*owner)->value);
}

}  // namespace airlock::providers
