#include "src/daemon/operators.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace airlock {

namespace {

constexpr size_t kMaxEntryBytes = 512;

bool Printable(absl::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

absl::Status OperatorList::Add(absl::string_view entry) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--operator ", entry, ": ", why,
                     "; write uid:UID, cert:COMMON-NAME, oidc:ISSUER#SUBJECT or oidc-group:NAME"));
  };
  if (entry.size() > kMaxEntryBytes || !Printable(entry)) {
    return invalid("too long or not printable");
  }
  if (absl::ConsumePrefix(&entry, "uid:")) {
    uint32_t uid = 0;
    if (!absl::SimpleAtoi(entry, &uid)) return invalid("not a number after uid:");
    if (uid == 0) {
      return invalid("root already reads every tenant and may change anything; name another uid");
    }
    tenants_.insert(absl::StrCat("uid:", uid));
    return absl::OkStatus();
  }
  if (absl::StartsWith(entry, "cert:") || absl::StartsWith(entry, "oidc:")) {
    if (entry.size() <= 5) return invalid("nothing after the colon");
    if (absl::StartsWith(entry, "oidc:") && !absl::StrContains(entry, '#')) {
      return invalid("an OIDC principal is ISSUER#SUBJECT");
    }
    tenants_.insert(std::string(entry));
    return absl::OkStatus();
  }
  if (absl::ConsumePrefix(&entry, "oidc-group:")) {
    if (entry.empty()) return invalid("no group name");
    groups_.insert(std::string(entry));
    return absl::OkStatus();
  }
  return invalid("not a principal airlockd knows");
}

bool OperatorList::Names(const Principal& who, const std::vector<std::string>& groups) const {
  if (who.IsHostRoot()) return false;
  if (tenants_.count(who.Tenant()) > 0) return true;
  if (who.oidc.empty()) return false;  // groups come from a verified token only
  for (const std::string& g : groups) {
    if (groups_.count(g) > 0) return true;
  }
  return false;
}

}  // namespace airlock
