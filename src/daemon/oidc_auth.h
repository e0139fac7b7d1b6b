// OpenID Connect callers on airlockd's TCP listener. As a gRPC AuthMetadataProcessor it checks
// the `authorization: Bearer JWT` metadata of every call on that listener (oidc_token.h) before
// the call reaches a service: a call with a bad token is refused (UNAUTHENTICATED, saying why)
// and the refusal audited; a call without one goes on to the client certificate, when the
// listener takes certificates. Caller() then names the caller from the same metadata
// (VerifyAuthorization): the tenant is oidc:ISSUER#SUBJECT. (Not from a property of the
// AuthContext: gRPC keeps those per connection, and one connection may carry calls of several
// token holders.)
#ifndef AIRLOCK_DAEMON_OIDC_AUTH_H_
#define AIRLOCK_DAEMON_OIDC_AUTH_H_

#include <grpcpp/security/auth_metadata_processor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/daemon/oidc_token.h"

namespace airlock {

class OidcAuthenticator final : public grpc::AuthMetadataProcessor {
 public:
  struct Options {
    OidcSettings settings;
    // The provider's keys: a file (its jwks_uri, saved) or its https:// jwks_uri itself. Read
    // again, at most every 30 s, when a token names a key it lacks (the provider rotated).
    std::string jwks;
    std::string jwks_ca;  // PEM CAs for an https:// key set, instead of the host's store
    bool certificates_accepted = false;  // the listener also verifies client certificates
    // Told of refused tokens: each reason at most once a minute, at most 30 in a minute in
    // all (the next one says how many were left out).
    std::function<void(const std::string& why)> refused;
  };
  // Reads the key set once to fail early: INVALID_ARGUMENT saying what is wrong with it.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<OidcAuthenticator>> Create(Options options);

  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed, OutputMetadata* response) override;

  // The identity the value of an authorization header ("Bearer JWT") proves now.
  absl::StatusOr<OidcIdentity> VerifyAuthorization(absl::string_view value);

 private:
  explicit OidcAuthenticator(Options options) : options_(std::move(options)) {}
  // The key set; read again from its file or URL (at most every 30 s) when a token names a key
  // it does not hold: the provider rotated its keys.
  std::shared_ptr<const Jwks> Keys(bool reread);
  absl::StatusOr<OidcIdentity> Verify(absl::string_view token);
  void Refused(const std::string& why);

  const Options options_;
  absl::Mutex mu_;
  std::shared_ptr<const Jwks> keys_ ABSL_GUARDED_BY(mu_);
  // When a token's unknown key id last made it read the file.
  int64_t reread_unix_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int64_t> refusals_ ABSL_GUARDED_BY(mu_);  // reason -> when last reported
  int64_t window_start_ ABSL_GUARDED_BY(mu_) = 0;                 // this minute of refusal records
  int window_records_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unrecorded_ ABSL_GUARDED_BY(mu_) = 0;  // refusals since the last record, not in one
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_OIDC_AUTH_H_
