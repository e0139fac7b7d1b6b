// Secrets an operator shares with tenants: named sources that airlockd reads itself, with its
// own environment, files and 1Password login, each for the tenants and hosts the operator
// names. Every other source is read by the client, with its user's rights (secret_spec.h).
//
// The file (airlockd --shared-secrets FILE), one source per line, '#' starts a comment:
//   NAME SOURCE@HOST[,HOST...][?OPTION[&OPTION...]] TENANT [TENANT...]
//   github   op://Engineering/github/token@api.github.com,uploads.github.com uid:1000 uid:1001
//   registry env:REGISTRY_TOKEN@registry.example.com?header=authorization *
// SOURCE is env:VAR, file:PATH or op://VAULT/ITEM/FIELD; a TENANT is a principal as
// `airlock whoami` prints it (uid:N, cert:NAME, oidc:ISSUER#SUBJECT), or * for every tenant.
// A tenant binds one with --secret GH_TOKEN=shared:github@api.github.com: only to hosts its line
// names, and only into the headers (and bodies) its line allows.
#ifndef AIRLOCK_SECRETS_SHARED_SOURCES_H_
#define AIRLOCK_SECRETS_SHARED_SOURCES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "src/secrets/secret_spec.h"

namespace airlock::secrets {

struct SharedSource {
  std::string name;
  SecretSpec spec;                   // its source, hosts and options (spec.name is unused)
  std::vector<std::string> tenants;  // "*": every tenant
};

inline constexpr size_t kMaxSharedSources = 1024;

class SharedSources {
 public:
  SharedSources() = default;
  // Parses the file's text. Errors name the line and say what to write.
  [[nodiscard]] static absl::StatusOr<SharedSources> Parse(std::string_view text);
  // Reads and parses `path` (the errors name it).
  [[nodiscard]] static absl::StatusOr<SharedSources> Load(const std::string& path);

  // What a binding `requested` (a shared:NAME source) of `tenant` holds: `requested` itself when
  // its hosts, body and headers are within what the source's line allows, with the line's
  // headers and body where it gives no options. A source that does not exist and one not shared
  // with `tenant` get the same answer, so tenants learn nothing of each other's.
  [[nodiscard]] absl::StatusOr<SecretSpec> Grant(const SecretSpec& requested,
                                                 std::string_view tenant) const;
  // The source behind a binding Grant made, if it is still shared with `tenant`.
  const SharedSource* Find(std::string_view name, std::string_view tenant) const;
  bool empty() const { return sources_.empty(); }

 private:
  std::vector<SharedSource> sources_;
};

}  // namespace airlock::secrets

#endif  // AIRLOCK_SECRETS_SHARED_SOURCES_H_
