// What `--secret` names: a secret's name in the guest, where its value comes from, and the hosts
// it may be sent to. NAME=SOURCE@HOST[,HOST...][?OPTION[&OPTION...]], for example
//   OPENAI_API_KEY=env:OPENAI_API_KEY@api.openai.com
//   GH_TOKEN=op://Engineering/github/token@api.github.com,uploads.github.com
//   DEPLOY_KEY=file:/run/keys/deploy@api.example.com?body
//   SESSION=env:SESSION_COOKIE@app.example.com?header=cookie
// Sources: env:VAR, file:PATH and op://VAULT/ITEM/FIELD (1Password's `op read`) are read by the
// client with its user's rights (the value travels to airlockd over its authenticated socket);
// shared:NAME is a source the operator shares with some tenants (airlockd --shared-secrets, see
// src/secrets/shared_sources.h), which airlockd reads itself.
// The value goes only into the credential headers of a request (kDefaultSecretHeaders), or only
// into the headers `header=NAME` options name; `body` lets it into request bodies too.
#ifndef AIRLOCK_SECRETS_SECRET_SPEC_H_
#define AIRLOCK_SECRETS_SECRET_SPEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock::secrets {

enum class SourceKind { kEnv, kFile, kOnePassword, kShared };

struct SecretSpec {
  std::string name;  // an environment variable name: [A-Za-z_][A-Za-z0-9_]*
  // "env:VAR", "file:/abs/path", "op://vault/item/field" or "shared:NAME"
  std::string source;
  std::vector<std::string> hosts;  // lower case, no duplicates
  bool body = false;
  // The request headers the value may go into, lower case; empty: kDefaultSecretHeaders.
  std::vector<std::string> headers;

  SourceKind kind() const;
  // The headers the value may go into: `headers`, or kDefaultSecretHeaders without any.
  std::vector<std::string> EffectiveHeaders() const;
  // The text after the scheme: VAR, /abs/path, NAME, or the whole op:// reference.
  std::string reference() const;
  friend bool operator==(const SecretSpec&, const SecretSpec&) = default;
};

inline constexpr size_t kMaxSecretHosts = 16;
inline constexpr size_t kMaxSecretHeaders = 8;
// Where APIs take credentials: a secret bound without `header=` options goes into these only.
inline constexpr std::string_view kDefaultSecretHeaders[] = {
    "authorization", "proxy-authorization", "x-api-key",     "api-key",
    "x-auth-token",  "private-token",       "x-goog-api-key"};
inline constexpr size_t kMaxSecretsPerSession = 64;
// A value longer than this is refused (API keys and tokens are far shorter).
inline constexpr size_t kMaxSecretValueBytes = 16 * 1024;

// A shared source's name: 1 to 64 letters, digits, '-', '_' and '.'.
bool IsSharedName(std::string_view name);

// Parses a --secret argument. Errors say what was wrong and show the form.
[[nodiscard]] absl::StatusOr<SecretSpec> ParseSecretSpec(std::string_view text);
// The canonical text of a spec (ParseSecretSpec gives it back).
std::string FormatSecretSpec(const SecretSpec& spec);

}  // namespace airlock::secrets

#endif  // AIRLOCK_SECRETS_SECRET_SPEC_H_
