// SessionManager's egress: the operator's ceiling, a session's policy from its grants, and
// changes to it at runtime (applied by the running session's proxy at once).
#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "src/common/log.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/session_manager_internal.h"

namespace airlock {

using session_internal::EarliestExpiry;

std::shared_ptr<const net::EgressPolicy> SessionManager::PolicyFor(
    const SessionRecord& record) const {
  std::vector<net::EgressRule> rules, denies;
  int64_t now = NowMs();
  for (const EgressGrant& g : record.egress) {
    if (g.expires_ms != 0 && g.expires_ms <= now) continue;
    absl::StatusOr<net::EgressRule> rule = net::ParseEgressRule(
        g.rule, g.deny ? net::RuleContext::kCeilingDeny : net::RuleContext::kSession);
    if (!rule.ok()) continue;  // stored by an older airlockd that read rules differently
    (g.deny ? denies : rules).push_back(*std::move(rule));
  }
  return std::make_shared<const net::EgressPolicy>(std::move(rules), ceiling(), host_addresses_,
                                                   std::move(denies));
}

std::shared_ptr<const net::EgressCeiling> SessionManager::ceiling() const {
  absl::MutexLock lock(&egress_mu_);
  if (egress_.ceiling != nullptr) return egress_.ceiling;
  return std::make_shared<const net::EgressCeiling>(net::EgressCeiling::Default());
}

void SessionManager::set_ceiling(std::shared_ptr<const net::EgressCeiling> ceiling) {
  {
    absl::MutexLock lock(&egress_mu_);
    egress_.ceiling = std::move(ceiling);
  }
  std::vector<std::shared_ptr<LiveSession>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, live] : live_) all.push_back(live);
  }
  for (const std::shared_ptr<LiveSession>& live : all) {
    absl::StatusOr<SessionRecord> record =
        store_->sessions().Get(live->record.tenant, live->record.id);
    if (record.ok() && live->egress != nullptr) live->egress->SetPolicy(PolicyFor(*record));
  }
}

absl::StatusOr<SessionRecord> SessionManager::ChangeEgress(const Principal& who,
                                                           const std::string& id,
                                                           const std::vector<EgressGrant>& add,
                                                           const std::vector<std::string>& remove,
                                                           const std::string& action) {
  return ChangeEgressOf(who, who.Tenant(), id, add, remove, action);
}

absl::StatusOr<SessionRecord> SessionManager::ChangeEgressOf(const Principal& who,
                                                             const std::string& tenant,
                                                             const std::string& id,
                                                             const std::vector<EgressGrant>& add,
                                                             const std::vector<std::string>& remove,
                                                             const std::string& action) {
  // The store answers NOT_FOUND for another tenant's session before anything is locked.
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(tenant, id);
  if (!record.ok()) return record.status();
  std::shared_ptr<absl::Mutex> session_lock = SessionLock(id);
  absl::MutexLock guard(session_lock.get());
  record = store_->sessions().Get(tenant, id);
  if (!record.ok()) return record.status();
  if (record->state != SessionState::kRunning && record->state != SessionState::kPaused) {
    return absl::FailedPreconditionError(absl::StrCat("session ", id, " is ",
                                                      SessionStateName(record->state),
                                                      "; its network can no longer change"));
  }
  int64_t now = NowMs();
  std::vector<EgressGrant> grants;
  std::vector<std::string> changed;
  for (const EgressGrant& g : record->egress) {
    if (g.expires_ms == 0 || g.expires_ms > now) {
      grants.push_back(g);
    } else {
      changed.push_back("expired " + g.rule);  // its time ran out: it goes with this change
    }
  }
  for (const std::string& text : remove) {
    // As `network ls` writes it, or any spelling of the same rule ("web.test" for a deny that
    // ls writes "web.test:*").
    auto same = [&](const EgressGrant& g) {
      if (g.rule == text) return true;
      absl::StatusOr<net::EgressRule> parsed = net::ParseEgressRule(
          text, g.deny ? net::RuleContext::kCeilingDeny : net::RuleContext::kSession);
      return parsed.ok() && parsed->ToString() == g.rule;
    };
    auto it = std::find_if(grants.begin(), grants.end(), same);
    if (it == grants.end()) {
      return absl::NotFoundError(absl::StrCat("session ", id, " has no rule ", text,
                                              "; `airlock network ls ", id, "` lists its rules"));
    }
    grants.erase(it);
  }
  for (const EgressGrant& g : add) {
    auto it = std::find_if(grants.begin(), grants.end(), [&](const EgressGrant& h) {
      return h.rule == g.rule && h.deny == g.deny;
    });
    if (it != grants.end()) {
      *it = g;
    } else {
      grants.push_back(g);
    }
    changed.push_back(absl::StrCat(g.deny ? "deny " : "allow ", g.rule));
  }
  for (const std::string& text : remove) changed.push_back("rm " + text);
  if (grants.size() > 256) {
    return absl::InvalidArgumentError("a session holds at most 256 network rules");
  }
  int64_t version = record->egress_version + 1;
  if (absl::Status s = store_->sessions().SetEgress(who, record->tenant, id, grants, version,
                                                    action, absl::StrJoin(changed, ", "));
      !s.ok()) {
    return s;
  }
  record->egress = grants;
  record->egress_version = version;
  if (std::shared_ptr<LiveSession> live = FindLive(record->tenant, id)) {
    live->egress_expires_ms = EarliestExpiry(grants);
    if (live->egress != nullptr) live->egress->SetPolicy(PolicyFor(*record));
  }
  return *record;
}

net::EgressPath::Counters SessionManager::EgressCounters(const std::string& tenant,
                                                         const std::string& id) {
  std::shared_ptr<LiveSession> live = FindLive(tenant, id);
  if (live == nullptr || live->egress == nullptr) return {};
  return live->egress->counters();
}

void SessionManager::FlushEgressEvents(const Principal& who, const std::string& id) {
  std::shared_ptr<LiveSession> live = FindLive(who.Tenant(), id);
  if (live != nullptr && live->egress != nullptr) live->egress->Flush();
}

void SessionManager::ExpireEgress(int64_t now) {
  std::vector<std::shared_ptr<LiveSession>> due;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, live] : live_) {
      int64_t at = live->egress_expires_ms;
      if (at != 0 && at <= now) due.push_back(live);
    }
  }
  for (const std::shared_ptr<LiveSession>& live : due) {
    live->egress_expires_ms = 0;
    absl::StatusOr<SessionRecord> record =
        store_->sessions().Get(live->record.tenant, live->record.id);
    if (!record.ok()) continue;
    // A change that adds and removes nothing drops what expired, and tells the proxy.
    absl::StatusOr<SessionRecord> changed =
        ChangeEgressOf(kDaemonPrincipal, record->tenant, record->id, {}, {}, "network.expire");
    LogIfFailed(changed.status(), absl::StrCat("session ", record->id, ": expiring network rules"));
  }
}

absl::StatusOr<std::vector<EgressGrant>> SessionManager::ResolveEgress(
    const std::vector<std::string>& rules, const std::vector<std::string>& presets,
    const std::string& source) const {
  std::vector<EgressGrant> out;
  std::shared_ptr<const net::EgressCeiling> ceiling = this->ceiling();
  auto add = [&](const net::EgressRule& rule, const std::string& from) -> absl::Status {
    std::string why;
    if (!ceiling->Admits(rule, &why)) {
      return absl::PermissionDeniedError(
          absl::StrCat("--allow ", rule.ToString(), ": ", why,
                       " (the operator's egress ceiling; ask them to extend it)"));
    }
    std::string text = rule.ToString();
    for (const EgressGrant& g : out) {
      if (g.rule == text) return absl::OkStatus();
    }
    out.push_back({text, from, 0});
    return absl::OkStatus();
  };
  if (rules.size() + presets.size() > 256) {
    return absl::InvalidArgumentError("at most 256 --allow rules and presets per session");
  }
  for (const std::string& preset : presets) {
    absl::StatusOr<std::vector<net::EgressRule>> expanded = net::PresetRules(preset);
    if (!expanded.ok()) return expanded.status();
    for (const net::EgressRule& rule : *expanded) {
      if (absl::Status s = add(rule, "preset:" + preset); !s.ok()) return s;
    }
  }
  for (const std::string& text : rules) {
    absl::StatusOr<net::EgressRule> rule = net::ParseSessionRule(text);
    if (!rule.ok()) return rule.status();
    if (absl::Status s = add(*rule, source); !s.ok()) return s;
  }
  return out;
}

}  // namespace airlock
