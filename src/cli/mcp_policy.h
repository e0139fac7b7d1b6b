// What the user who starts `airlock mcp` lets the model behind it ask for. The model is a caller
// to distrust like a guest (text it reads can steer it), so it names only what the user
// configured, in the MCP client's configuration:
//   --secret NAME=SOURCE@HOST[,HOST...]  a secret the model may bind by NAME, sent only to HOST
//   --allow RULE                         the widest egress the model may ask for (rules as in
//                                        --allow, plus * for any name); a secret's hosts count
//   --workspace-root DIR                 directories under which the model may name a project
//   --volume NAME[:ro]                   a volume of the user's the model may attach (with :ro,
//                                        only read-only); it never creates, fills, exports or
//                                        removes one
// Nothing configured: no secrets, no egress, no workspaces, no volumes. Every refusal tells the
// user what to configure, since the model cannot do it. Immutable once made; thread-safe.
#ifndef AIRLOCK_CLI_MCP_POLICY_H_
#define AIRLOCK_CLI_MCP_POLICY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/net/egress_rule.h"
#include "src/secrets/secret_spec.h"

namespace airlock {

class McpPolicy {
 public:
  // From `airlock mcp`'s flags. INVALID_ARGUMENT names the flag and the value at fault: a
  // malformed secret or rule, a secret name given twice, a root that is not a directory.
  [[nodiscard]] static absl::StatusOr<McpPolicy> Create(
      const std::vector<std::string>& secrets, const std::vector<std::string>& allow,
      const std::vector<std::string>& workspace_roots,
      const std::vector<std::string>& volumes = {});

  // The configured secret called `name` (NAME=SOURCE@HOSTS, for the request). PERMISSION_DENIED
  // for any other name or for anything that is not a bare name (a source, a host).
  [[nodiscard]] absl::StatusOr<std::string> Secret(const std::string& name) const;
  // OK when a configured rule (or a configured secret's host, on ports 80 and 443) covers every
  // destination `rule` allows; INVALID_ARGUMENT for a malformed rule, PERMISSION_DENIED
  // otherwise.
  [[nodiscard]] absl::Status CheckAllow(const std::string& rule) const;
  // The project directory, resolved (symbolic links followed), when it is one of the roots or
  // lies under one; PERMISSION_DENIED otherwise, NOT_FOUND when it does not exist.
  [[nodiscard]] absl::StatusOr<std::string> Workspace(const std::string& path) const;
  // OK when the user configured volume `name`, and read-write unless `read_only`;
  // PERMISSION_DENIED saying what is offered otherwise.
  [[nodiscard]] absl::Status CheckVolume(const std::string& name, bool read_only) const;
  // Whether the user configured volume `name` (for listing).
  bool Offers(const std::string& volume) const;

  // For the tools' descriptions: what the model may ask for, e.g. `GH_TOKEN (to api.github.com)`.
  std::vector<std::string> SecretNames() const;
  std::vector<std::string> AllowRules() const;
  const std::vector<std::string>& workspace_roots() const { return roots_; }
  // `data`, `models (read-only)`.
  std::vector<std::string> VolumeNames() const;

 private:
  std::vector<secrets::SecretSpec> secrets_;
  std::vector<net::EgressRule> allow_;
  std::vector<std::string> roots_;  // resolved
  struct OfferedVolume {
    std::string name;
    bool read_only = false;
  };
  std::vector<OfferedVolume> volumes_;
};

}  // namespace airlock

#endif  // AIRLOCK_CLI_MCP_POLICY_H_
