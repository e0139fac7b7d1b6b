#include "src/providers/http_endpoint.h"

#include <sys/random.h>

#include <algorithm>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace airlock::providers {
namespace {

bool Loopback(absl::string_view host) {
  return host == "localhost" || host == "[::1]" || absl::StartsWith(host, "127.");
}

}  // namespace

absl::StatusOr<std::string> CheckHttpEndpoint(absl::string_view service, absl::string_view carries,
                                              std::string* endpoint) {
  while (absl::EndsWith(*endpoint, "/")) endpoint->pop_back();
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        service, " endpoint \"", endpoint->substr(0, 200), "\": ", why,
        "; write https://host[:port] (or http://127.0.0.1:PORT for a server on this host)"));
  };
  absl::string_view authority;
  bool https = absl::StartsWith(*endpoint, "https://");
  if (https) {
    authority = absl::string_view(*endpoint).substr(8);
  } else if (absl::StartsWith(*endpoint, "http://")) {
    authority = absl::string_view(*endpoint).substr(7);
  } else {
    return bad("it must start with https://");
  }
  absl::string_view host = authority;
  absl::string_view port;
  if (absl::StartsWith(authority, "[")) {
    size_t close = authority.find(']');
    if (close == absl::string_view::npos) return bad("an IPv6 address without ']'");
    host = authority.substr(0, close + 1);
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty() && !absl::StartsWith(after, ":")) return bad("it has a path");
    port = after.empty() ? "" : after.substr(1);
    for (char c : host.substr(1, host.size() - 2)) {
      if (!absl::ascii_isxdigit(c) && c != ':' && c != '.') return bad("a bad IPv6 address");
    }
  } else {
    size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    port = colon == absl::string_view::npos ? "" : authority.substr(colon + 1);
    if (colon != absl::string_view::npos && port.empty()) return bad("an empty port");
    for (char c : host) {
      if (!absl::ascii_isalnum(c) && c != '.' && c != '-') {
        return bad("the host may hold only letters, digits, '.' and '-' (no path, user or query)");
      }
    }
  }
  if (host.empty() || host == "[]") return bad("no host");
  if (!port.empty()) {
    int number = 0;
    if (!absl::SimpleAtoi(port, &number) || number < 1 || number > 65535 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return absl::ascii_isdigit(c); })) {
      return bad("the port must be a number from 1 to 65535");
    }
  }
  if (!https && !Loopback(host)) {
    return bad(absl::StrCat("plain http is only for a server on this host (it would carry ",
                            carries, " unencrypted)"));
  }
  return absl::AsciiStrToLower(authority);
}

void InitCurlOnce() {
  static std::once_flag curl_ready;
  std::call_once(curl_ready, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool CurlErrorIsFinal(CURLcode rc) {
  return rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE ||
         rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_URL_MALFORMAT ||
         rc == CURLE_UNSUPPORTED_PROTOCOL;
}

void SleepBeforeRetry(absl::Duration retry_delay, int attempt) {
  absl::Duration delay = retry_delay * (1 << std::min(attempt - 1, 10));
  uint32_t jitter = 0;
  if (getrandom(&jitter, sizeof(jitter), 0) != sizeof(jitter)) jitter = 0;
  absl::SleepFor(delay + delay * (jitter % 1000) / 2000);
}

}  // namespace airlock::providers
