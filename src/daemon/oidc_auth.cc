#include "src/daemon/oidc_auth.h"

#include <time.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/common/file_util.h"

namespace airlock {
namespace {

constexpr int64_t kRereadSeconds = 30;
constexpr int kMaxRefusalRecordsPerMinute = 30;

absl::StatusOr<std::shared_ptr<const Jwks>> ReadKeys(const std::string& file) {
  absl::StatusOr<std::string> text = ReadFileToString(file, kMaxJwksBytes);
  if (!text.ok()) return text.status();
  absl::StatusOr<Jwks> keys = Jwks::Parse(*text);
  if (!keys.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", keys.status().message()));
  }
  return std::make_shared<const Jwks>(*std::move(keys));
}

}  // namespace

absl::StatusOr<std::shared_ptr<OidcAuthenticator>> OidcAuthenticator::Create(Options options) {
  if (options.settings.issuer.empty() || options.settings.audience.empty()) {
    return absl::InvalidArgumentError(
        "OIDC needs --oidc-issuer (the provider's issuer URL) and --oidc-audience (the client "
        "id its tokens are issued for)");
  }
  absl::StatusOr<std::shared_ptr<const Jwks>> keys = ReadKeys(options.jwks_file);
  if (!keys.ok()) return keys.status();
  std::shared_ptr<OidcAuthenticator> out(new OidcAuthenticator(std::move(options)));
  out->keys_ = *keys;
  return out;
}

std::shared_ptr<const Jwks> OidcAuthenticator::Keys(bool reread) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = time(nullptr);
  if (reread && now - reread_unix_ >= kRereadSeconds) {
    reread_unix_ = now;
    absl::StatusOr<std::shared_ptr<const Jwks>> fresh = ReadKeys(options_.jwks_file);
    // A file being rewritten keeps the keys there were.
    if (fresh.ok()) keys_ = *fresh;
  }
  return keys_;
}

absl::StatusOr<OidcIdentity> OidcAuthenticator::Verify(absl::string_view token) {
  absl::StatusOr<OidcIdentity> id =
      VerifyOidcToken(token, *Keys(false), options_.settings, time(nullptr));
  if (!id.ok() && absl::StrContains(id.status().message(), "key id")) {
    id = VerifyOidcToken(token, *Keys(true), options_.settings, time(nullptr));
  }
  return id;
}

absl::StatusOr<OidcIdentity> OidcAuthenticator::VerifyAuthorization(absl::string_view value) {
  if (value.size() < 7 || !absl::EqualsIgnoreCase(value.substr(0, 7), "bearer ")) {
    return absl::UnauthenticatedError("the authorization metadata must be `Bearer JWT`");
  }
  return Verify(absl::StripAsciiWhitespace(value.substr(7)));
}

void OidcAuthenticator::Refused(const std::string& why) {
  if (!options_.refused) return;
  std::string record = why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t now = time(nullptr);
    // Anyone who reaches the port can send tokens: what they cost the audit log is bounded, by
    // reason and in all, and what was left out is counted in the next record.
    if (now - window_start_ >= 60) {
      window_start_ = now;
      window_records_ = 0;
    }
    auto last = refusals_.find(why);
    if ((last != refusals_.end() && now - last->second < 60) ||
        window_records_ >= kMaxRefusalRecordsPerMinute) {
      ++unrecorded_;
      return;
    }
    if (refusals_.size() >= 1000) refusals_.clear();
    refusals_[why] = now;
    ++window_records_;
    if (unrecorded_ > 0) absl::StrAppend(&record, " (and ", unrecorded_, " refusals not recorded)");
    unrecorded_ = 0;
  }
  options_.refused(record);
}

grpc::Status OidcAuthenticator::Process(const InputMetadata& metadata, grpc::AuthContext* context,
                                        OutputMetadata* /*consumed*/,
                                        OutputMetadata* /*response*/) {
  auto header = metadata.find("authorization");
  if (header == metadata.end()) {
    if (options_.certificates_accepted &&
        !context->FindPropertyValues("x509_common_name").empty()) {
      return grpc::Status::OK;  // the certificate names the caller
    }
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        options_.certificates_accepted
                            ? "send a bearer token (authorization: Bearer JWT) or connect with "
                              "a client certificate"
                            : "send a bearer token from the identity provider (authorization: "
                              "Bearer JWT)");
  }
  absl::StatusOr<OidcIdentity> id =
      VerifyAuthorization(absl::string_view(header->second.data(), header->second.size()));
  if (!id.ok()) {
    Refused(std::string(id.status().message()));
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(id.status().message()));
  }
  return grpc::Status::OK;  // left in the metadata for Caller()
}

}  // namespace airlock
