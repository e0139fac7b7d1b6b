// AWS Signature Version 4 for the Authorization header, as S3 (and every S3-compatible store)
// checks it: a pure function of the request, the time and the credentials, so it is tested
// against AWS's documented examples. No I/O; thread-safe.
#ifndef AIRLOCK_PROVIDERS_SIGV4_H_
#define AIRLOCK_PROVIDERS_SIGV4_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace airlock::providers {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty: long-term keys (sent as x-amz-security-token otherwise)
};

using HttpFields = std::vector<std::pair<std::string, std::string>>;

struct SigV4Request {
  std::string method;         // "GET", "PUT"...
  std::string canonical_uri;  // the path exactly as sent, already encoded (UriEncode of each
                              // segment: "/bucket/a%20b/c")
  HttpFields query;           // names and values before encoding, in any order
  // Every header to sign, names in any case. Must hold host, x-amz-date (AmzDate of the time
  // given to SigV4Authorization) and x-amz-content-sha256; they are signed as given.
  HttpFields headers;
  std::string payload_sha256;  // lowercase hex of the body (of "" when there is none)
};

// RFC 3986 encoding as SigV4 wants it: A-Z a-z 0-9 - . _ ~ kept, everything else %XX
// (uppercase), '/' kept unless encode_slash.
std::string UriEncode(absl::string_view s, bool encode_slash);

// name=value pairs encoded (UriEncode, '/' encoded too), sorted by name then value, joined by '&'.
std::string CanonicalQueryString(const HttpFields& query);

// "name:value\n" per header (names lowercased, values trimmed, inner runs of spaces made one,
// repeated names joined with ','), sorted by name; *signed_headers gets "name;name...".
std::string CanonicalHeaders(const HttpFields& headers, std::string* signed_headers);

// The canonical request: method, URI, query, headers, signed header names, payload hash.
std::string CanonicalRequest(const SigV4Request& request);

// "20130524T000000Z": the x-amz-date of a time (UTC).
std::string AmzDate(absl::Time time);

// The value of the Authorization header:
// "AWS4-HMAC-SHA256
// Credential=KEY/DATE/REGION/SERVICE/aws4_request,SignedHeaders=...,Signature=..."
std::string SigV4Authorization(const SigV4Request& request, absl::Time time,
                               const AwsCredentials& credentials, absl::string_view region,
                               absl::string_view service);

}  // namespace airlock::providers

#endif  // AIRLOCK_PROVIDERS_SIGV4_H_
