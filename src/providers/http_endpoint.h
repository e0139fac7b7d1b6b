// What the providers that speak HTTP with libcurl share: the rule for an endpoint (https, or
// plain http only to a server on this host) and the backoff between tries.
#ifndef AIRLOCK_PROVIDERS_HTTP_ENDPOINT_H_
#define AIRLOCK_PROVIDERS_HTTP_ENDPOINT_H_

#include <curl/curl.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace airlock::providers {

// Checks *endpoint is "https://host[:port]" or "http://<loopback>[:port]" with nothing after it
// (trailing '/' are removed from *endpoint). Returns the authority, lowercased (host[:port], the
// Host header's value). InvalidArgument saying what to write otherwise; `service` names the
// endpoint in the message ("S3", "etcd"), `carries` what plain http would expose ("blobs").
[[nodiscard]] absl::StatusOr<std::string> CheckHttpEndpoint(absl::string_view service,
                                                            absl::string_view carries,
                                                            std::string* endpoint);

// curl_global_init, once per process, before the first handle (it is not thread-safe in every
// libcurl).
void InitCurlOnce();

// Whether a transfer that failed with rc would fail again however often it is tried: a
// certificate that does not verify or cannot be loaded, a URL libcurl refuses.
bool CurlErrorIsFinal(CURLcode rc);

// Sleeps before try attempt + 1: retry_delay doubled per try, plus up to half as long again at
// random, so that many hosts do not retry in step.
void SleepBeforeRetry(absl::Duration retry_delay, int attempt);

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_HTTP_ENDPOINT_H_
