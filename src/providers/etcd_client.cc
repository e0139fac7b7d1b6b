#include "src/providers/etcd_client.h"

#include <curl/curl.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "src/providers/http_endpoint.h"

namespace airlock::providers {
namespace {

using nlohmann::json;

constexpr int64_t kMaxTtl = 24 * 60 * 60;
constexpr size_t kPage = 500;  // entries GetPrefix asks for at once

std::string Base64(absl::string_view bytes) { return absl::Base64Escape(bytes); }

// Proto3's JSON form of an int64.
std::string Int64(int64_t n) { return absl::StrCat(n); }

absl::Status CheckKey(absl::string_view key) {
  if (key.empty() || key.size() > kMaxEtcdKey) {
    return absl::InvalidArgumentError(absl::StrCat("an etcd key must be 1 to ", kMaxEtcdKey,
                                                   " bytes long (got ", key.size(), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckKeyValue(absl::string_view key, absl::string_view value) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  if (value.size() > kMaxEtcdValue) {
    return absl::InvalidArgumentError(absl::StrCat("an etcd value must be at most ", kMaxEtcdValue,
                                                   " bytes (got ", value.size(), ")"));
  }
  return absl::OkStatus();
}

// The first key after every key that starts with prefix; "\0" (the end of the keyspace) when
// there is none.
std::string RangeEndOf(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return std::string(1, '\0');
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

json PutRequest(absl::string_view key, absl::string_view value, int64_t lease) {
  json put = {{"key", Base64(key)}, {"value", Base64(value)}};
  if (lease != 0) put["lease"] = Int64(lease);
  return put;
}

// A transaction of one comparison on key and one operation when it holds.
std::string TxnRequest(absl::string_view key, json compare, json operation) {
  compare["key"] = Base64(key);
  compare["result"] = "EQUAL";
  return json{{"compare", json::array({std::move(compare)})},
              {"success", json::array({std::move(operation)})}}
      .dump();
}

}  // namespace

struct EtcdClient::Response {
  std::string endpoint;
  std::string transport_error;   // set when no whole answer came (connection, timeout, cut off)
  bool transport_final = false;  // and trying again would not help
  long status = 0;
  std::string body;             // at most kMaxEtcdResponseBody bytes
  bool body_too_large = false;  // and so the transfer was ended
  int attempts = 1;
};

namespace {

size_t OnBody(char* data, size_t size, size_t count, void* opaque) {
  auto* response = static_cast<EtcdClient::Response*>(opaque);
  size_t bytes = size * count;
  if (response->body.size() + bytes > kMaxEtcdResponseBody) {
    response->body_too_large = true;
    return 0;
  }
  response->body.append(data, bytes);
  return bytes;
}

bool Retryable(const EtcdClient::Response& r) {
  if (r.body_too_large || r.transport_final) return false;
  return !r.transport_error.empty() || r.status >= 500;
}

absl::Status CheckReadable(const std::string& file, absl::string_view what) {
  if (!file.empty() && access(file.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the etcd ", what, " file ", file,
                                                   " cannot be read: give a readable PEM file"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(EtcdConfig config) {
  if (config.endpoints.empty()) {
    return absl::InvalidArgumentError(
        "no etcd endpoint: give etcd's client URL, such as https://etcd-1:2379 (or "
        "http://127.0.0.1:2379 for an etcd on this host)");
  }
  for (std::string& endpoint : config.endpoints) {
    absl::StatusOr<std::string> host =
        CheckHttpEndpoint("etcd", "the control plane's state", &endpoint);
    if (!host.ok()) return host.status();
  }
  for (absl::Status s :
       {CheckReadable(config.ca_file, "CA"), CheckReadable(config.cert_file, "client certificate"),
        CheckReadable(config.key_file, "client key")}) {
    if (!s.ok()) return s;
  }
  if (config.cert_file.empty() != config.key_file.empty()) {
    return absl::InvalidArgumentError(
        "an etcd client certificate needs its key, and a key its certificate: give both");
  }
  if (config.attempts < 1 || config.attempts > 10 || config.retry_delay < absl::ZeroDuration() ||
      config.request_timeout < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError(
        "etcd attempts must be from 1 to 10, the retry delay not negative and the request "
        "timeout at least 100 ms");
  }
  InitCurlOnce();
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(config)));
}

std::string EtcdClient::Endpoints() const { return absl::StrJoin(config_.endpoints, ", "); }

EtcdClient::Response EtcdClient::Once(const std::string& endpoint, absl::string_view path,
                                      const std::string& body) const {
  Response response;
  response.endpoint = endpoint;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(
      curl_slist_append(nullptr, "content-type: application/json"), curl_slist_free_all);
  if (!curl || !headers) {
    response.transport_error = "curl_easy_init failed";
    return response;
  }
  std::string url = absl::StrCat(endpoint, path);
  char error[CURL_ERROR_SIZE] = "";
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  long timeout_ms = static_cast<long>(absl::ToInt64Milliseconds(config_.request_timeout));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &response);
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  if (!config_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, config_.ca_file.c_str());
  if (!config_.cert_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, config_.cert_file.c_str());
    curl_easy_setopt(c, CURLOPT_SSLKEY, config_.key_file.c_str());
  }
  CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  if (rc != CURLE_OK && !response.body_too_large) {
    response.transport_error = error[0] ? error : curl_easy_strerror(rc);
    response.transport_final = CurlErrorIsFinal(rc);
  }
  return response;
}

EtcdClient::Response EtcdClient::Perform(absl::string_view path, const std::string& body) const {
  const size_t n = config_.endpoints.size();
  Response response;
  int tries = 0;
  for (int round = 1;; ++round) {
    size_t first = preferred_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < n; ++i) {
      size_t index = (first + i) % n;
      response = Once(config_.endpoints[index], path, body);
      response.attempts = ++tries;
      if (!Retryable(response)) {
        preferred_.store(index, std::memory_order_relaxed);
        return response;
      }
    }
    if (round >= config_.attempts) return response;
    SleepBeforeRetry(config_.retry_delay, round);
  }
}

absl::Status EtcdClient::ErrorOf(const Response& r, absl::string_view what) const {
  std::string tries = r.attempts > 1 ? absl::StrCat(" after ", r.attempts, " tries") : "";
  std::string failed = absl::StrCat(what, " failed", tries);
  if (r.transport_final) {
    return absl::FailedPreconditionError(absl::StrCat(
        failed, ": TLS with etcd at ", r.endpoint, " failed (", r.transport_error,
        "); check the CA file, the client certificate and key, and the endpoint's host name"));
  }
  if (!r.transport_error.empty()) {
    return absl::UnavailableError(absl::StrCat(
        failed, ": cannot reach etcd at ", Endpoints(), " (", r.transport_error,
        "); is etcd running there? Start it (for one host: etcd --listen-client-urls "
        "http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379) or give the "
        "endpoint it serves clients on"));
  }
  if (r.body_too_large) {
    return absl::FailedPreconditionError(
        absl::StrCat(failed, ": ", r.endpoint, " answered with more than ", kMaxEtcdResponseBody,
                     " bytes; is it etcd's client URL?"));
  }
  std::optional<EtcdError> error = ParseEtcdError(r.body);
  if (!error) {
    return absl::FailedPreconditionError(
        absl::StrCat(failed, ": ", r.endpoint, " answered HTTP ", r.status,
                     " without etcd's error; is it the client URL of etcd 3.4 or later?"));
  }
  std::string detail = absl::StrCat(failed, " (etcd at ", r.endpoint, ": ", error->message, ")");
  switch (static_cast<absl::StatusCode>(error->code)) {
    case absl::StatusCode::kNotFound:
      return absl::NotFoundError(detail);
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return absl::InvalidArgumentError(detail);
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return absl::PermissionDeniedError(absl::StrCat(
          detail, ": etcd refused this client; check its certificate and etcd's access rules"));
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
      return absl::UnavailableError(
          absl::StrCat(detail,
                       ": etcd is failing, overloaded or without a leader; try again later, and "
                       "check that a majority of its members are up"));
    default:
      return absl::FailedPreconditionError(detail);
  }
}

absl::StatusOr<std::string> EtcdClient::Call(absl::string_view path, const std::string& body,
                                             absl::string_view what) const {
  Response response = Perform(path, body);
  if (response.transport_error.empty() && !response.body_too_large && response.status == 200) {
    return std::move(response.body);
  }
  return ErrorOf(response, what);
}

absl::StatusOr<std::optional<EtcdKeyValue>> EtcdClient::Get(absl::string_view key) const {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  absl::StatusOr<std::string> body =
      Call("/v3/kv/range", json{{"key", Base64(key)}}.dump(), "reading an etcd key");
  if (!body.ok()) return body.status();
  absl::StatusOr<EtcdRangeAnswer> answer = ParseEtcdRange(*body);
  if (!answer.ok()) return answer.status();
  if (answer->kvs.empty()) return std::nullopt;
  if (answer->kvs.size() != 1 || answer->kvs[0].key != key) {
    return absl::FailedPreconditionError(
        "etcd answered a read of one key with another key's entry");
  }
  return std::move(answer->kvs[0]);
}

absl::StatusOr<std::vector<EtcdKeyValue>> EtcdClient::GetPrefix(absl::string_view prefix,
                                                                size_t limit) const {
  if (absl::Status s = CheckKey(prefix); !s.ok()) return s;
  if (limit < 1 || limit > kMaxEtcdEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat("an etcd prefix read may ask for 1 to ", kMaxEtcdEntries, " entries"));
  }
  const std::string end = RangeEndOf(prefix);
  std::vector<EtcdKeyValue> entries;
  std::string from(prefix);
  int64_t revision = 0;  // every page is read at the first one's revision
  for (;;) {
    size_t page = std::min(kPage, limit - entries.size());
    json request = {{"key", Base64(from)}, {"range_end", Base64(end)}, {"limit", Int64(page)}};
    if (revision > 0) request["revision"] = Int64(revision);
    absl::StatusOr<std::string> body =
        Call("/v3/kv/range", request.dump(), "reading etcd keys by prefix");
    if (!body.ok()) return body.status();
    absl::StatusOr<EtcdRangeAnswer> answer = ParseEtcdRange(*body);
    if (!answer.ok()) return answer.status();
    if (answer->kvs.size() > page) {
      return absl::FailedPreconditionError("etcd answered with more entries than asked for");
    }
    if (revision == 0) revision = answer->revision;
    for (EtcdKeyValue& kv : answer->kvs) {
      // In the range and after what came before: anything else is not etcd's answer.
      if (kv.key < from || !absl::StartsWith(kv.key, prefix) ||
          (!entries.empty() && kv.key <= entries.back().key)) {
        return absl::FailedPreconditionError(
            "etcd answered a prefix read with keys out of the range or out of order");
      }
      entries.push_back(std::move(kv));
    }
    if (!answer->more || answer->kvs.empty() || entries.size() >= limit) return entries;
    from = entries.back().key + '\0';
    if (from.size() > kMaxEtcdKey) return entries;
  }
}

absl::Status EtcdClient::Put(absl::string_view key, absl::string_view value, int64_t lease) const {
  if (absl::Status s = CheckKeyValue(key, value); !s.ok()) return s;
  absl::StatusOr<std::string> body =
      Call("/v3/kv/put", PutRequest(key, value, lease).dump(), "writing an etcd key");
  if (!body.ok()) return body.status();
  return ParseEtcdHeaderRevision(*body).status();
}

absl::Status EtcdClient::Delete(absl::string_view key) const {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  absl::StatusOr<std::string> body =
      Call("/v3/kv/deleterange", json{{"key", Base64(key)}}.dump(), "deleting an etcd key");
  if (!body.ok()) return body.status();
  return ParseEtcdDeleteRange(*body).status();
}

absl::StatusOr<bool> EtcdClient::Txn(const std::string& request, absl::string_view what) const {
  absl::StatusOr<std::string> body = Call("/v3/kv/txn", request, what);
  if (!body.ok()) return body.status();
  return ParseEtcdTxn(*body);
}

absl::StatusOr<bool> EtcdClient::CreateIfAbsent(absl::string_view key, absl::string_view value,
                                                int64_t lease) const {
  if (absl::Status s = CheckKeyValue(key, value); !s.ok()) return s;
  return Txn(TxnRequest(key, {{"target", "CREATE"}, {"create_revision", "0"}},
                        {{"request_put", PutRequest(key, value, lease)}}),
             "creating an etcd key");
}

absl::StatusOr<bool> EtcdClient::CompareAndSwap(absl::string_view key,
                                                int64_t expected_mod_revision,
                                                absl::string_view value, int64_t lease) const {
  if (absl::Status s = CheckKeyValue(key, value); !s.ok()) return s;
  if (expected_mod_revision <= 0) {
    return absl::InvalidArgumentError(
        "compare-and-swap needs the mod_revision of an existing key (use CreateIfAbsent for a "
        "new one)");
  }
  return Txn(TxnRequest(key, {{"target", "MOD"}, {"mod_revision", Int64(expected_mod_revision)}},
                        {{"request_put", PutRequest(key, value, lease)}}),
             "swapping an etcd key");
}

absl::StatusOr<bool> EtcdClient::PutWhile(absl::string_view guard_key,
                                          absl::string_view guard_value, absl::string_view key,
                                          absl::string_view value) const {
  if (absl::Status s = CheckKeyValue(guard_key, guard_value); !s.ok()) return s;
  if (absl::Status s = CheckKeyValue(key, value); !s.ok()) return s;
  return Txn(TxnRequest(guard_key, {{"target", "VALUE"}, {"value", Base64(guard_value)}},
                        {{"request_put", PutRequest(key, value, 0)}}),
             "setting an etcd key");
}

absl::StatusOr<bool> EtcdClient::DeleteIf(absl::string_view key,
                                          int64_t expected_mod_revision) const {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  if (expected_mod_revision <= 0) {
    return absl::InvalidArgumentError("a conditional delete needs the mod_revision of a key");
  }
  return Txn(TxnRequest(key, {{"target", "MOD"}, {"mod_revision", Int64(expected_mod_revision)}},
                        {{"request_delete_range", {{"key", Base64(key)}}}}),
             "deleting an etcd key");
}

absl::StatusOr<EtcdLease> EtcdClient::GrantLease(int64_t ttl_seconds) const {
  if (ttl_seconds < 1 || ttl_seconds > kMaxTtl) {
    return absl::InvalidArgumentError(
        absl::StrCat("an etcd lease's TTL must be from 1 to ", kMaxTtl, " seconds"));
  }
  absl::StatusOr<std::string> body =
      Call("/v3/lease/grant", json{{"TTL", Int64(ttl_seconds)}}.dump(), "granting an etcd lease");
  if (!body.ok()) return body.status();
  absl::StatusOr<EtcdLeaseAnswer> answer = ParseEtcdLeaseGrant(*body);
  if (!answer.ok()) return answer.status();
  return EtcdLease{answer->id, answer->ttl};
}

absl::StatusOr<int64_t> EtcdClient::KeepAlive(int64_t lease) const {
  std::string what = absl::StrCat("keeping etcd lease ", lease, " alive");
  absl::StatusOr<std::string> body =
      Call("/v3/lease/keepalive", json{{"ID", Int64(lease)}}.dump(), what);
  if (!body.ok()) return body.status();
  if (std::optional<EtcdError> error = ParseEtcdError(*body)) {
    // An error on the stream comes with status 200.
    Response response{.status = 200, .body = std::move(*body)};
    return ErrorOf(response, what);
  }
  absl::StatusOr<EtcdLeaseAnswer> answer = ParseEtcdKeepAlive(*body);
  if (!answer.ok()) return answer.status();
  if (answer->id != lease) {
    return absl::FailedPreconditionError(
        absl::StrCat("etcd answered ", what, " about another lease"));
  }
  if (answer->ttl <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd lease ", lease, " has expired or was revoked"));
  }
  return answer->ttl;
}

absl::Status EtcdClient::RevokeLease(int64_t lease) const {
  absl::StatusOr<std::string> body = Call("/v3/lease/revoke", json{{"ID", Int64(lease)}}.dump(),
                                          absl::StrCat("revoking etcd lease ", lease));
  if (absl::IsNotFound(body.status())) return absl::OkStatus();
  if (!body.ok()) return body.status();
  return ParseEtcdHeaderRevision(*body).status();
}

}  // namespace airlock::providers
