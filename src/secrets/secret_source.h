// Where values come from, and what the guest holds instead of them.
//
// Every source a client names is read on the client's side, with its user's rights: env:, file:
// and op:// (1Password's `op`, through a SecretSource; Vault and cloud secret managers are new
// classes behind the same interface). airlockd reads only the sources its operator shares
// (shared_sources.h), with its own.
#ifndef AIRLOCK_SECRETS_SECRET_SOURCE_H_
#define AIRLOCK_SECRETS_SECRET_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/common/wipe.h"
#include "src/secrets/secret_spec.h"

namespace airlock::secrets {

class SecretSource {
 public:
  virtual ~SecretSource() = default;
  // The value `spec` names. Fails closed, with what went wrong in words a user can act on.
  [[nodiscard]] virtual absl::StatusOr<std::string> Resolve(const SecretSpec& spec) = 0;
};

// 1Password: runs `op read REFERENCE` (an argv array, stdin /dev/null, a timeout), found on
// `path` (a PATH list), with `env` as its environment (the OP_* variables and HOME it needs).
class OnePasswordSource : public SecretSource {
 public:
  OnePasswordSource(std::string path, std::vector<std::string> env,
                    absl::Duration timeout = absl::Seconds(30));
  absl::StatusOr<std::string> Resolve(const SecretSpec& spec) override;

 private:
  std::string path_;
  std::vector<std::string> env_;
  absl::Duration timeout_;
};

// `op` as this process would run it: found on its PATH, with its HOME, XDG_CONFIG_HOME and OP_*
// variables (1Password's session and service-account token).
std::unique_ptr<OnePasswordSource> OnePasswordFromEnvironment();

// The client's side: env:VAR from `getenv`, file:PATH from disk (one trailing newline dropped),
// op:// with OnePasswordFromEnvironment(); shared: is refused (airlockd reads those).
// *warning is set (else cleared) when the file can be read by users other than its owner.
[[nodiscard]] absl::StatusOr<std::string> ReadLocalSecret(const SecretSpec& spec,
                                                          std::string* warning);

// Checks a value before it is used: not empty, at most kMaxSecretValueBytes, and no CR, LF or
// NUL (it goes into HTTP header fields, where those would start a header of the guest's choice).
[[nodiscard]] absl::Status CheckSecretValue(const SecretSpec& spec, const std::string& value);

// A placeholder for a value of value_length bytes: "AIRLOCK_PLACEHOLDER_" and random letters
// and digits (at least 144 bits), as long as the value when the value is longer than that, so
// that masking a response keeps its length.
std::string MakePlaceholder(size_t value_length);

// Overwrites a string's bytes before it is freed (src/common/wipe.h).
using ::airlock::Wipe;

}  // namespace airlock::secrets

#endif  // AIRLOCK_SECRETS_SECRET_SOURCE_H_
