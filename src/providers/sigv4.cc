#include "src/providers/sigv4.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/common/sha256.h"

namespace airlock::providers {
namespace {

// Trimmed, with each run of spaces inside made one space.
std::string CanonicalValue(absl::string_view value) {
  value = absl::StripAsciiWhitespace(value);
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == ' ' && !out.empty() && out.back() == ' ') continue;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string UriEncode(absl::string_view s, bool encode_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
        (c == '/' && !encode_slash)) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string CanonicalQueryString(const HttpFields& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query) {
    encoded.emplace_back(UriEncode(name, true), UriEncode(value, true));
  }
  std::sort(encoded.begin(), encoded.end());
  std::vector<std::string> pairs;
  pairs.reserve(encoded.size());
  for (const auto& [name, value] : encoded) pairs.push_back(absl::StrCat(name, "=", value));
  return absl::StrJoin(pairs, "&");
}

std::string CanonicalHeaders(const HttpFields& headers, std::string* signed_headers) {
  std::map<std::string, std::string> by_name;
  for (const auto& [name, value] : headers) {
    std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
    std::string& joined = by_name[lower];
    absl::StrAppend(&joined, joined.empty() ? "" : ",", CanonicalValue(value));
  }
  std::string out;
  std::vector<absl::string_view> names;
  for (const auto& [name, value] : by_name) {
    absl::StrAppend(&out, name, ":", value, "\n");
    names.push_back(name);
  }
  *signed_headers = absl::StrJoin(names, ";");
  return out;
}

std::string CanonicalRequest(const SigV4Request& request) {
  std::string signed_headers;
  std::string headers = CanonicalHeaders(request.headers, &signed_headers);
  return absl::StrCat(request.method, "\n", request.canonical_uri, "\n",
                      CanonicalQueryString(request.query), "\n", headers, "\n", signed_headers,
                      "\n", request.payload_sha256);
}

std::string AmzDate(absl::Time time) {
  return absl::FormatTime("%Y%m%dT%H%M%SZ", time, absl::UTCTimeZone());
}

std::string SigV4Authorization(const SigV4Request& request, absl::Time time,
                               const AwsCredentials& credentials, absl::string_view region,
                               absl::string_view service) {
  std::string date = absl::FormatTime("%Y%m%d", time, absl::UTCTimeZone());
  std::string scope = absl::StrCat(date, "/", region, "/", service, "/aws4_request");
  std::string string_to_sign = absl::StrCat("AWS4-HMAC-SHA256\n", AmzDate(time), "\n", scope, "\n",
                                            Sha256Hex(CanonicalRequest(request)));
  std::string key = HmacSha256(absl::StrCat("AWS4", credentials.secret_access_key), date);
  key = HmacSha256(key, region);
  key = HmacSha256(key, service);
  key = HmacSha256(key, "aws4_request");
  std::string signed_headers;
  CanonicalHeaders(request.headers, &signed_headers);
  return absl::StrCat("AWS4-HMAC-SHA256 Credential=", credentials.access_key_id, "/", scope,
                      ",SignedHeaders=", signed_headers,
                      ",Signature=", HmacSha256Hex(key, string_to_sign));
}

}  // namespace airlock::providers
