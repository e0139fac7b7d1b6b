#include "src/providers/s3_blob_store.h"

#include <curl/curl.h>
#include <stdlib.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/common/file_util.h"
#include "src/providers/blob_digest.h"
#include "src/providers/blob_io.h"
#include "src/providers/http_endpoint.h"
#include "src/providers/s3_xml.h"

namespace airlock::providers {
namespace {

constexpr uint64_t kMinPart = uint64_t{5} << 20;  // S3's minimum (the last part excepted)
constexpr uint64_t kMaxHeld = uint64_t{1} << 30;  // what a part or a small blob may hold
constexpr uint64_t kMaxParts = 10000;             // S3's maximum
constexpr size_t kMaxListed = 10'000'000;         // digests List returns at most
constexpr size_t kMaxEtag = 256;

// Credentials from the environment; InvalidArgument saying which variables when absent.
absl::StatusOr<AwsCredentials> CredentialsFromEnvironment() {
  const char* id = getenv("AWS_ACCESS_KEY_ID");
  const char* secret = getenv("AWS_SECRET_ACCESS_KEY");
  const char* token = getenv("AWS_SESSION_TOKEN");
  if (id == nullptr || secret == nullptr || *id == '\0' || *secret == '\0') {
    return absl::InvalidArgumentError(
        "an s3:// blob store needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
        "(and AWS_SESSION_TOKEN for temporary ones)");
  }
  return AwsCredentials{id, secret, token ? token : ""};
}

bool PrintableWord(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

std::string XmlEscape(absl::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

bool Success(long status) { return status >= 200 && status < 300; }

}  // namespace

struct S3BlobStore::Request {
  std::string method;  // GET HEAD PUT POST DELETE
  std::string key;     // the object's key; "" for the bucket itself
  HttpFields query;
  HttpFields headers;  // besides those every request has; all signed
  absl::string_view body;
  std::string body_sha256;  // of body, if the caller has it already
  // Bytes of an answer with status sink_status go to sink rather than to Response::body.
  std::function<absl::Status(absl::string_view)> sink;
  long sink_status = 200;
};

struct S3BlobStore::Response {
  std::string transport_error;   // set when no whole answer came (connection, timeout, cut off)
  bool transport_final = false;  // and trying again would not help
  long status = 0;
  std::string body;             // at most kMaxS3ResponseBody bytes
  bool body_too_large = false;  // and so the transfer was ended
  absl::Status sink_error;      // the sink's failure, which ended the transfer
  std::string etag;
  int64_t content_length = -1;
  int attempts = 1;
};

namespace {

struct Transfer {
  CURL* curl;
  const S3BlobStore::Request* request;
  S3BlobStore::Response* response;
};

size_t OnBody(char* data, size_t size, size_t count, void* opaque) {
  auto* t = static_cast<Transfer*>(opaque);
  size_t bytes = size * count;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (t->request->sink && status == t->request->sink_status) {
    absl::Status sunk = t->request->sink(absl::string_view(data, bytes));
    if (!sunk.ok()) {
      t->response->sink_error = sunk;
      return 0;
    }
    return bytes;
  }
  if (t->response->body.size() + bytes > kMaxS3ResponseBody) {
    t->response->body_too_large = true;
    return 0;
  }
  t->response->body.append(data, bytes);
  return bytes;
}

size_t OnHeader(char* data, size_t size, size_t count, void* opaque) {
  auto* t = static_cast<Transfer*>(opaque);
  absl::string_view line(data, size * count);
  if (line.size() > 5 && absl::EqualsIgnoreCase(line.substr(0, 5), "etag:")) {
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(5));
    if (value.size() <= kMaxEtag && PrintableWord(value)) t->response->etag = std::string(value);
  }
  return size * count;
}

}  // namespace

absl::StatusOr<S3Config> S3ConfigFromOptions(const BlobStoreOptions& options,
                                             const BlobStoreLocation& location) {
  S3Config config;
  config.bucket = location.bucket;
  config.prefix = location.prefix;
  config.region = options.region.empty() ? "us-east-1" : options.region;
  bool region_ok = config.region.size() <= 32;
  for (char c : config.region) {
    region_ok = region_ok && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-');
  }
  if (!region_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "S3 region \"", config.region.substr(0, 40),
        "\" is not valid: write a region name such as us-east-1 (lowercase letters, digits, '-')"));
  }
  config.endpoint = options.endpoint.empty()
                        ? absl::StrCat("https://s3.", config.region, ".amazonaws.com")
                        : options.endpoint;
  if (absl::StatusOr<std::string> host = CheckHttpEndpoint("S3", "blobs", &config.endpoint);
      !host.ok()) {
    return host.status();
  }
  if (options.credentials) {
    config.credentials = *options.credentials;
  } else {
    absl::StatusOr<AwsCredentials> from_env = CredentialsFromEnvironment();
    if (!from_env.ok()) return from_env.status();
    config.credentials = *from_env;
  }
  const AwsCredentials& c = config.credentials;
  if (!PrintableWord(c.access_key_id) || !PrintableWord(c.secret_access_key) ||
      (!c.session_token.empty() && !PrintableWord(c.session_token))) {
    return absl::InvalidArgumentError(
        "S3 credentials must be printable ASCII without spaces: check AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN");
  }
  config.multipart_threshold = options.multipart_threshold;
  config.part_size = options.part_size;
  for (uint64_t value : {config.multipart_threshold, config.part_size}) {
    if (value < kMinPart || value > kMaxHeld) {
      return absl::InvalidArgumentError(
          "the S3 multipart threshold and part size must each be from 5 MiB (S3's smallest "
          "part) to 1 GiB (each is held in memory)");
    }
  }
  if (options.attempts < 1 || options.attempts > 10 || options.retry_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "S3 attempts must be from 1 to 10, and the retry delay not negative");
  }
  if (options.stall_timeout < absl::Seconds(1) || options.stall_timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        "the blob store's stall timeout must be from 1 second to an hour");
  }
  config.attempts = options.attempts;
  config.retry_delay = options.retry_delay;
  config.stall_timeout = options.stall_timeout;
  return config;
}

absl::StatusOr<std::unique_ptr<S3BlobStore>> S3BlobStore::Create(S3Config config) {
  absl::StatusOr<std::string> host = CheckHttpEndpoint("S3", "blobs", &config.endpoint);
  if (!host.ok()) return host.status();
  if (config.part_size < kMinPart || config.part_size > kMaxHeld ||
      config.multipart_threshold < kMinPart || config.multipart_threshold > kMaxHeld ||
      config.attempts < 1) {
    return absl::InvalidArgumentError(
        "S3 sizes or attempts out of range (see S3ConfigFromOptions)");
  }
  InitCurlOnce();
  return std::unique_ptr<S3BlobStore>(new S3BlobStore(std::move(config), std::move(*host)));
}

std::string S3BlobStore::KeyOf(const std::string& hex) const {
  return absl::StrCat(config_.prefix, config_.prefix.empty() ? "" : "/", "sha256/", hex);
}

S3BlobStore::Response S3BlobStore::Once(const Request& request) const {
  Response response;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) {
    response.transport_error = "curl_easy_init failed";
    return response;
  }
  std::string path = absl::StrCat("/", config_.bucket);
  if (!request.key.empty()) absl::StrAppend(&path, "/", UriEncode(request.key, false));
  std::string query = CanonicalQueryString(request.query);
  std::string url = absl::StrCat(config_.endpoint, path, query.empty() ? "" : "?", query);

  absl::Time now = absl::Now();
  SigV4Request signed_request;
  signed_request.method = request.method;
  signed_request.canonical_uri = path;
  signed_request.query = request.query;
  signed_request.payload_sha256 =
      request.body_sha256.empty() ? Sha256Hex(request.body) : request.body_sha256;
  signed_request.headers = {{"host", host_},
                            {"x-amz-date", AmzDate(now)},
                            {"x-amz-content-sha256", signed_request.payload_sha256}};
  if (!config_.credentials.session_token.empty()) {
    signed_request.headers.emplace_back("x-amz-security-token", config_.credentials.session_token);
  }
  bool sends_body = request.method == "PUT" || request.method == "POST";
  bool typed = false;
  for (const auto& header : request.headers) {
    signed_request.headers.push_back(header);
    typed = typed || absl::EqualsIgnoreCase(header.first, "content-type");
  }
  // Without it libcurl would name the body a form.
  if (sends_body && !typed) {
    signed_request.headers.emplace_back("content-type", "application/octet-stream");
  }
  std::string authorization =
      SigV4Authorization(signed_request, now, config_.credentials, config_.region, "s3");

  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(nullptr, curl_slist_free_all);
  auto add = [&](const std::string& line) {
    headers.reset(curl_slist_append(headers.release(), line.c_str()));
  };
  for (const auto& [name, value] : signed_request.headers) add(absl::StrCat(name, ": ", value));
  add(absl::StrCat("authorization: ", authorization));
  add("expect:");  // no 100-continue round trip

  Transfer transfer{curl.get(), &request, &response};
  char error[CURL_ERROR_SIZE] = "";
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  // A transfer that moves nothing for the stall timeout is dead (and retried); large ones may
  // take long.
  long stall_seconds = static_cast<long>(absl::ToInt64Seconds(config_.stall_timeout));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, std::min(stall_seconds, 10L));
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, stall_seconds);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &transfer);
  if (request.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (sends_body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.empty() ? "" : request.body.data());
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  } else if (request.method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  if (rc != CURLE_OK && response.sink_error.ok() && !response.body_too_large) {
    response.transport_error = error[0] ? error : curl_easy_strerror(rc);
    response.transport_final = CurlErrorIsFinal(rc);
    return response;
  }
  curl_off_t length = -1;
  if (curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK) {
    response.content_length = length;
  }
  // CompleteMultipartUpload may answer 200 and then an <Error> (it fails after the headers
  // went out): that is a server error.
  if (response.status == 200 && request.method == "POST" && ParseS3Error(response.body)) {
    response.status = 500;
  }
  return response;
}

namespace {

// A whole answer with a 2xx status.
bool Completed(const S3BlobStore::Response& r) {
  return r.transport_error.empty() && r.sink_error.ok() && !r.body_too_large && Success(r.status);
}

bool Retryable(const S3BlobStore::Response& r) {
  if (!r.sink_error.ok() || r.body_too_large || r.transport_final) return false;
  return !r.transport_error.empty() || r.status >= 500 || r.status == 429;
}

}  // namespace

void S3BlobStore::Backoff(int attempt) const { SleepBeforeRetry(config_.retry_delay, attempt); }

S3BlobStore::Response S3BlobStore::Perform(const Request& request) const {
  for (int attempt = 1;; ++attempt) {
    Response response = Once(request);
    response.attempts = attempt;
    if (attempt >= config_.attempts || !Retryable(response)) return response;
    Backoff(attempt);
  }
}

absl::Status S3BlobStore::ErrorOf(const Response& r, absl::string_view what) const {
  std::string store = absl::StrCat("s3://", config_.bucket, config_.prefix.empty() ? "" : "/",
                                   config_.prefix, " at ", config_.endpoint);
  if (!r.sink_error.ok()) return r.sink_error;
  std::string tries = r.attempts > 1 ? absl::StrCat(" after ", r.attempts, " tries") : "";
  if (!r.transport_error.empty()) {
    return absl::UnavailableError(absl::StrCat(what, " failed", tries, ": cannot reach ", store,
                                               " (", r.transport_error,
                                               "); check the endpoint and that it is up"));
  }
  if (r.body_too_large) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", store, " answered with more than ", kMaxS3ResponseBody,
                     " bytes where a short XML document belongs; is the endpoint an S3 server?"));
  }
  std::optional<S3ErrorBody> error = ParseS3Error(r.body);
  std::string code = error ? error->code : "";
  std::string detail = absl::StrCat("HTTP ", r.status);
  if (error) absl::StrAppend(&detail, " ", error->code, ": ", error->message);
  std::string failed = absl::StrCat(what, " failed", tries, " (", detail, ")");
  if (code == "AccessDenied" || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
      code == "ExpiredToken" || code == "InvalidToken" || code == "TokenRefreshRequired" ||
      (code.empty() && (r.status == 401 || r.status == 403))) {
    return absl::PermissionDeniedError(absl::StrCat(
        failed, ": ", store,
        " refused the credentials; check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and "
        "AWS_SESSION_TOKEN, and that they may read, write, list and delete in the bucket"));
  }
  if (code == "NoSuchBucket") {
    return absl::FailedPreconditionError(
        absl::StrCat(failed, ": create the bucket ", config_.bucket, " at ", config_.endpoint,
                     ", or name an existing one in the s3:// URL"));
  }
  if (code == "RequestTimeTooSkewed") {
    return absl::FailedPreconditionError(
        absl::StrCat(failed, ": this host's clock is off; set it right (NTP)"));
  }
  if (code == "AuthorizationHeaderMalformed" || code == "PermanentRedirect" ||
      code == "IllegalLocationConstraintException" || r.status == 301 || r.status == 307) {
    return absl::FailedPreconditionError(absl::StrCat(
        failed,
        ": the bucket is in another region or behind another endpoint; give its region "
        "(now ",
        config_.region, ") and endpoint"));
  }
  if (r.status >= 500 || r.status == 429) {
    return absl::UnavailableError(
        absl::StrCat(failed, ": ", store, " is failing or overloaded; try again later"));
  }
  return absl::FailedPreconditionError(absl::StrCat(failed, " at ", store));
}

absl::Status S3BlobStore::Put(const std::string& digest, int fd, uint64_t size) {
  absl::StatusOr<std::string> hex = BlobDigestHex(digest);
  if (!hex.ok()) return hex.status();
  absl::StatusOr<uint64_t> present = Stat(digest);
  if (present.ok() && *present == size) return absl::OkStatus();
  if (!present.ok() && !absl::IsNotFound(present.status())) return present.status();
  if (size <= config_.multipart_threshold) return PutSingle(digest, *hex, fd, size);
  return PutMultipart(digest, *hex, fd, size);
}

absl::Status S3BlobStore::PutSingle(const std::string& digest, const std::string& hex, int fd,
                                    uint64_t size) {
  // size <= multipart_threshold <= kMaxHeld.
  std::string body(static_cast<size_t>(size), '\0');
  if (absl::Status read = ReadExactly(fd, body.data(), body.size(), 0, size); !read.ok()) {
    return read;
  }
  std::string actual = Sha256Hex(body);
  if (actual != hex) return PutDigestMismatch(digest, actual);
  Request request{.method = "PUT", .key = KeyOf(hex), .body = body, .body_sha256 = hex};
  Response response = Perform(request);
  if (!Completed(response)) {
    return ErrorOf(response, absl::StrCat("storing blob ", digest));
  }
  return absl::OkStatus();
}

absl::Status S3BlobStore::PutMultipart(const std::string& digest, const std::string& hex, int fd,
                                       uint64_t size) {
  uint64_t parts = (size + config_.part_size - 1) / config_.part_size;
  if (parts > kMaxParts) {
    return absl::InvalidArgumentError(
        absl::StrCat("blob ", digest, " (", size, " bytes) needs more than ", kMaxParts,
                     " parts of ", config_.part_size, " bytes, S3's limit: raise the part size"));
  }
  std::string key = KeyOf(hex);
  std::string what = absl::StrCat("storing blob ", digest);
  Response created = Perform({.method = "POST", .key = key, .query = {{"uploads", ""}}});
  if (!Completed(created)) {
    return ErrorOf(created, absl::StrCat(what, " (CreateMultipartUpload)"));
  }
  absl::StatusOr<std::string> upload_id = ParseInitiateMultipartUpload(created.body);
  if (!upload_id.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": ", upload_id.status().message()));
  }
  absl::Status status = [&]() -> absl::Status {
    Sha256 whole;
    std::string completion = "<CompleteMultipartUpload>";
    std::string part(static_cast<size_t>(std::min(size, config_.part_size)), '\0');
    uint64_t done = 0;
    for (uint64_t number = 1; number <= parts; ++number) {
      size_t n = static_cast<size_t>(std::min(size - done, config_.part_size));
      if (absl::Status read = ReadExactly(fd, part.data(), n, done, size); !read.ok()) return read;
      absl::string_view bytes(part.data(), n);
      whole.Update(bytes);
      done += n;
      Response sent =
          Perform({.method = "PUT",
                   .key = key,
                   .query = {{"partNumber", absl::StrCat(number)}, {"uploadId", *upload_id}},
                   .body = bytes});
      if (!Completed(sent)) {
        return ErrorOf(sent, absl::StrCat(what, " (part ", number, " of ", parts, ")"));
      }
      if (sent.etag.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat(what, ": the server answered part ", number, " without an ETag"));
      }
      absl::StrAppend(&completion, "<Part><PartNumber>", number, "</PartNumber><ETag>",
                      XmlEscape(sent.etag), "</ETag></Part>");
    }
    std::string actual = whole.FinishHex();
    if (actual != hex) return PutDigestMismatch(digest, actual);
    completion += "</CompleteMultipartUpload>";
    Response completed = Perform({.method = "POST",
                                  .key = key,
                                  .query = {{"uploadId", *upload_id}},
                                  .headers = {{"content-type", "application/xml"}},
                                  .body = completion});
    if (!Completed(completed)) {
      return ErrorOf(completed, absl::StrCat(what, " (CompleteMultipartUpload)"));
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) {
    // Best effort, once: the parts of an upload nobody completes are not an object, and a
    // bucket's lifecycle rule (AbortIncompleteMultipartUpload) removes any that remain.
    Once({.method = "DELETE", .key = key, .query = {{"uploadId", *upload_id}}});
  }
  return status;
}

absl::Status S3BlobStore::Get(const std::string& digest, int out_fd) {
  absl::StatusOr<std::string> hex = BlobDigestHex(digest);
  if (!hex.ok()) return hex.status();
  std::string key = KeyOf(*hex);
  Sha256 sha;
  uint64_t written = 0;
  auto sink = [&](absl::string_view bytes) -> absl::Status {
    if (absl::Status w = WriteAll(out_fd, {bytes.data(), bytes.size()}); !w.ok()) return w;
    sha.Update(bytes);
    written += bytes.size();
    return absl::OkStatus();
  };
  for (int attempt = 1;; ++attempt) {
    // After a cut-off answer, ask for the rest only: what was written stays written.
    Request request{.method = "GET", .key = key, .sink = sink};
    if (written > 0) {
      request.headers = {{"range", absl::StrCat("bytes=", written, "-")}};
      request.sink_status = 206;
    }
    Response response = Once(request);
    response.attempts = attempt;
    if (response.transport_error.empty() && response.sink_error.ok() &&
        response.status == request.sink_status) {
      break;
    }
    if (attempt < config_.attempts && Retryable(response)) {
      Backoff(attempt);
      continue;
    }
    std::optional<S3ErrorBody> error = ParseS3Error(response.body);
    if (response.transport_error.empty() && response.status == 404 &&
        !(error && error->code == "NoSuchBucket")) {
      return absl::NotFoundError(absl::StrCat("blob ", digest, " is not in s3://", config_.bucket,
                                              "/", key, " at ", config_.endpoint));
    }
    return ErrorOf(response, absl::StrCat("reading blob ", digest));
  }
  if (sha.FinishHex() != *hex) {
    return GetDigestMismatch(
        digest, absl::StrCat("s3://", config_.bucket, "/", key, " at ", config_.endpoint));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> S3BlobStore::Stat(const std::string& digest) {
  absl::StatusOr<std::string> hex = BlobDigestHex(digest);
  if (!hex.ok()) return hex.status();
  Response response = Perform({.method = "HEAD", .key = KeyOf(*hex)});
  if (response.transport_error.empty() && response.status == 404) {
    return absl::NotFoundError(absl::StrCat("blob ", digest, " is not in s3://", config_.bucket,
                                            "/", KeyOf(*hex), " at ", config_.endpoint));
  }
  if (!Completed(response)) {
    return ErrorOf(response, absl::StrCat("looking up blob ", digest));
  }
  if (response.content_length < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("looking up blob ", digest, ": the server's answer has no Content-Length"));
  }
  return static_cast<uint64_t>(response.content_length);
}

absl::Status S3BlobStore::Delete(const std::string& digest) {
  absl::StatusOr<std::string> hex = BlobDigestHex(digest);
  if (!hex.ok()) return hex.status();
  Response response = Perform({.method = "DELETE", .key = KeyOf(*hex)});
  if (response.transport_error.empty() && (Success(response.status) || response.status == 404)) {
    return absl::OkStatus();
  }
  return ErrorOf(response, absl::StrCat("deleting blob ", digest));
}

absl::StatusOr<std::vector<std::string>> S3BlobStore::List() {
  std::string prefix = KeyOf("");
  std::vector<std::string> digests;
  std::string token;
  for (;;) {
    Request request{.method = "GET", .query = {{"list-type", "2"}, {"prefix", prefix}}};
    if (!token.empty()) request.query.emplace_back("continuation-token", token);
    Response response = Perform(request);
    if (!Completed(response)) {
      return ErrorOf(response, "listing blobs");
    }
    absl::StatusOr<S3ListPage> page = ParseListObjectsV2(response.body);
    if (!page.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("listing blobs in s3://", config_.bucket, ": ", page.status().message()));
    }
    for (const std::string& key : page->keys) {
      // Only names this store writes; anything else under the prefix is not a blob.
      if (!absl::StartsWith(key, prefix)) continue;
      std::string digest = absl::StrCat("sha256:", key.substr(prefix.size()));
      if (BlobDigestHex(digest).ok()) digests.push_back(std::move(digest));
    }
    if (digests.size() > kMaxListed) {
      return absl::FailedPreconditionError(
          absl::StrCat("listing blobs in s3://", config_.bucket, ": more than ", kMaxListed));
    }
    if (!page->truncated) break;
    if (page->next_token == token) {
      return absl::FailedPreconditionError(absl::StrCat(
          "listing blobs in s3://", config_.bucket, ": the server repeated a continuation token"));
    }
    token = page->next_token;
  }
  std::sort(digests.begin(), digests.end());
  return digests;
}

}  // namespace airlock::providers
