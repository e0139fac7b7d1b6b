// Read-only operators: principals named on airlockd's command line (--operator) who may read
// every tenant's sessions, VMs, metrics, events and the audit log, and change nothing. The
// web dashboard (airlock dashboard) connects as one. Each entry names a caller the way
// airlockd knows it: "uid:1000" (over the Unix socket), "cert:NAME" (the common name of a
// verified client certificate), "oidc:ISSUER#SUBJECT" or "oidc-group:NAME" (a verified bearer
// token's subject, or a value of its "groups" claim).
#ifndef AIRLOCK_DAEMON_OPERATORS_H_
#define AIRLOCK_DAEMON_OPERATORS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "src/daemon/records.h"

namespace airlock {

class OperatorList {
 public:
  // INVALID_ARGUMENT, saying how to write it, for anything but the four forms above; root
  // (uid:0) is refused too: it already reads everything and may change it.
  [[nodiscard]] absl::Status Add(absl::string_view entry);
  // Whether `who` (with the groups of its bearer token, if any) is named.
  bool Names(const Principal& who, const std::vector<std::string>& groups) const;
  bool empty() const { return tenants_.empty() && groups_.empty(); }

 private:
  std::set<std::string> tenants_;  // as Principal::Tenant() writes them
  std::set<std::string> groups_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_OPERATORS_H_
