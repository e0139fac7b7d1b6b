// What `--secret` names: a secret's name in the guest, where its value comes from, and the hosts
// it may be sent to. NAME=SOURCE@HOST[,HOST...][?body], for example
//   OPENAI_API_KEY=env:OPENAI_API_KEY@api.openai.com
//   GH_TOKEN=op://Engineering/github/token@api.github.com,uploads.github.com
//   DEPLOY_KEY=file:/run/keys/deploy@api.example.com?body
// Sources: env:VAR and file:PATH are read by the CLI (the value travels to airlockd over its
// authenticated socket); op://VAULT/ITEM/FIELD is resolved by airlockd with 1Password's `op`.
// `?body` lets the value into request bodies as well as headers.
#ifndef AIRLOCK_SECRETS_SECRET_SPEC_H_
#define AIRLOCK_SECRETS_SECRET_SPEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock::secrets {

enum class SourceKind { kEnv, kFile, kOnePassword };

struct SecretSpec {
  std::string name;                // an environment variable name: [A-Za-z_][A-Za-z0-9_]*
  std::string source;              // "env:VAR", "file:/abs/path" or "op://vault/item/field"
  std::vector<std::string> hosts;  // lower case, no duplicates
  bool body = false;

  SourceKind kind() const;
  // The text after the scheme: VAR, /abs/path, or the whole op:// reference.
  std::string reference() const;
  friend bool operator==(const SecretSpec&, const SecretSpec&) = default;
};

inline constexpr size_t kMaxSecretHosts = 16;
inline constexpr size_t kMaxSecretsPerSession = 64;
// A value longer than this is refused (API keys and tokens are far shorter).
inline constexpr size_t kMaxSecretValueBytes = 16 * 1024;

// Parses a --secret argument. Errors say what was wrong and show the form.
[[nodiscard]] absl::StatusOr<SecretSpec> ParseSecretSpec(std::string_view text);
// The canonical text of a spec (ParseSecretSpec gives it back).
std::string FormatSecretSpec(const SecretSpec& spec);

}  // namespace airlock::secrets

#endif  // AIRLOCK_SECRETS_SECRET_SPEC_H_
