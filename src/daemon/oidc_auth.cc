#include "src/daemon/oidc_auth.h"

#include <curl/curl.h>
#include <time.h>

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/file_util.h"

namespace airlock {
namespace {

constexpr int64_t kRereadSeconds = 30;
constexpr int kMaxRefusalRecordsPerMinute = 30;

size_t Collect(char* data, size_t size, size_t n, void* out) {
  std::string* body = static_cast<std::string*>(out);
  if (body->size() + size * n > kMaxJwksBytes) return 0;  // ends the transfer: too large
  body->append(data, size * n);
  return size * n;
}

// The provider's jwks_uri over HTTPS: verified against the host's CA store (or `ca_file`), no
// redirects, at most kMaxJwksBytes, within 10 s.
absl::StatusOr<std::string> FetchKeys(const std::string& url, const std::string& ca_file) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return absl::InternalError("curl_easy_init failed");
  std::string body;
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  if (!ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, ca_file.c_str());
  CURLcode result = curl_easy_perform(c);
  if (result == CURLE_WRITE_ERROR) {
    return absl::InvalidArgumentError(
        absl::StrCat(url, ": the key set is over ", kMaxJwksBytes, " bytes"));
  }
  if (result != CURLE_OK) {
    return absl::UnavailableError(
        absl::StrCat("fetching the provider's keys from ", url, ": ", curl_easy_strerror(result)));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) {
    return absl::UnavailableError(
        absl::StrCat("fetching the provider's keys from ", url, ": HTTP ", status));
  }
  return body;
}

// The key set from its file, or from its https:// URL.
absl::StatusOr<std::shared_ptr<const Jwks>> ReadKeys(const std::string& source,
                                                     const std::string& ca_file) {
  if (absl::StartsWith(source, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--oidc-jwks ", source, ": the provider's keys must come over https:// (or from a file)"));
  }
  absl::StatusOr<std::string> text = absl::StartsWith(source, "https://")
                                         ? FetchKeys(source, ca_file)
                                         : ReadFileToString(source, kMaxJwksBytes);
  if (!text.ok()) return text.status();
  absl::StatusOr<Jwks> keys = Jwks::Parse(*text);
  if (!keys.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", keys.status().message()));
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
  absl::StatusOr<std::shared_ptr<const Jwks>> keys = ReadKeys(options.jwks, options.jwks_ca);
  if (!keys.ok()) return keys.status();
  std::shared_ptr<OidcAuthenticator> out(new OidcAuthenticator(std::move(options)));
  {
    absl::MutexLock lock(&out->mu_);
    out->keys_ = *keys;
  }
  return out;
}

std::shared_ptr<const Jwks> OidcAuthenticator::Keys(bool reread) {
  {
    absl::MutexLock lock(&mu_);
    int64_t now = time(nullptr);
    if (!reread || now - reread_unix_ < kRereadSeconds) return keys_;
    reread_unix_ = now;
  }
  // Read outside the lock: other calls go on with the keys there are while a fetch waits.
  absl::StatusOr<std::shared_ptr<const Jwks>> fresh = ReadKeys(options_.jwks, options_.jwks_ca);
  absl::MutexLock lock(&mu_);
  // A file being rewritten, or a provider that does not answer, keeps the keys there were.
  if (fresh.ok()) keys_ = *fresh;
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
    absl::MutexLock lock(&mu_);
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
