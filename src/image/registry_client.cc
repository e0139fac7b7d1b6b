#include "src/image/registry_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/sha256.h"
#include "src/common/unique_fd.h"
#include "src/image/image_store.h"

namespace airlock {
namespace {

constexpr char kDockerHub[] = "registry-1.docker.io";
constexpr int kAttempts = 4;

// Seconds without a byte before a request is abandoned (and retried): 30, or
// $AIRLOCK_REGISTRY_TIMEOUT.
long StallSeconds() {
  const char* text = getenv("AIRLOCK_REGISTRY_TIMEOUT");
  long seconds = text ? strtol(text, nullptr, 10) : 0;
  return seconds > 0 && seconds <= 3600 ? seconds : 30;
}
constexpr const char* kManifestTypes[] = {
    "application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json"};

bool ValidComponent(const std::string& s) {
  if (s.empty() || s.size() > 255) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

// "user:password" for a registry, from the environment (for the registry it names) or the
// credentials file; empty if none.
std::string Credentials(const std::string& registry) {
  const char* user = getenv("AIRLOCK_REGISTRY_USER");
  const char* password = getenv("AIRLOCK_REGISTRY_PASSWORD");
  const char* host = getenv("AIRLOCK_REGISTRY_HOST");
  if (user && password && host && registry == host) return absl::StrCat(user, ":", password);
  const char* file = getenv("AIRLOCK_REGISTRY_AUTH_FILE");
  const char* home = getenv("HOME");
  std::string path =
      file ? file : absl::StrCat(home ? home : "/root", "/.config/airlock/auth.json");
  absl::StatusOr<std::string> text = ReadFileToString(path, 1 << 20);
  if (!text.ok()) return "";
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  auto it = j.is_object() ? j.find(registry) : j.end();
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// key="value" pairs of a WWW-Authenticate challenge after its scheme.
std::map<std::string, std::string> ChallengeParams(const std::string& challenge) {
  std::map<std::string, std::string> out;
  size_t at = challenge.find(' ');
  while (at != std::string::npos && at < challenge.size()) {
    size_t eq = challenge.find('=', at);
    if (eq == std::string::npos) break;
    std::string key(absl::StripAsciiWhitespace(challenge.substr(at + 1, eq - at - 1)));
    if (!key.empty() && key[0] == ',') key.erase(0, 1);
    std::string value;
    size_t end;
    if (eq + 1 < challenge.size() && challenge[eq + 1] == '"') {
      end = challenge.find('"', eq + 2);
      if (end == std::string::npos) break;
      value = challenge.substr(eq + 2, end - eq - 2);
      ++end;
    } else {
      end = challenge.find(',', eq);
      value = challenge.substr(eq + 1, end == std::string::npos ? end : end - eq - 1);
    }
    out[absl::AsciiStrToLower(absl::StripAsciiWhitespace(key))] = value;
    at = end == std::string::npos ? end : challenge.find(',', end);
  }
  return out;
}

struct Transfer {
  bool internal_addresses = true;
  std::string refused_address;  // an internal address the connection was about to reach
  std::string* body = nullptr;
  size_t body_cap = 0;
  int fd = -1;
  Sha256* sha = nullptr;
  uint64_t bytes = 0;
  uint64_t limit = 0;
  bool overflow = false;
  std::function<void(uint64_t)> on_bytes;
  std::map<std::string, std::string> headers;  // lowercase names
};

size_t OnData(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  t->bytes += len;
  // A blob is never more than its descriptor says (a size of 0 means nothing may come).
  if (t->fd >= 0 && t->bytes > t->limit) {
    t->overflow = true;
    return 0;
  }
  if (t->fd >= 0) {
    for (size_t done = 0; done < len;) {
      ssize_t w = write(t->fd, data + done, len - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return 0;
      done += static_cast<size_t>(w);
    }
    t->sha->Update(absl::string_view(data, len));
    if (t->on_bytes) t->on_bytes(len);
  } else if (t->body) {
    if (t->body->size() + len > t->body_cap) {
      t->overflow = true;
      return 0;
    }
    t->body->append(data, len);
  }
  return len;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  size_t colon = line.find(':');
  if (colon != std::string::npos && t->headers.size() < 100) {
    t->headers[absl::AsciiStrToLower(line.substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return size * n;
}

std::string BaseUrl(const ImageReference& ref) {
  return absl::StrCat(ref.insecure ? "http://" : "https://", ref.registry, "/v2/", ref.repository);
}

std::string Sha256Of(const std::string& bytes) { return "sha256:" + Sha256Hex(bytes); }

}  // namespace

std::string ImageReference::Name() const {
  std::string host = registry == kDockerHub ? "docker.io" : registry;
  return absl::StrCat(host, "/", repository, digest.empty() ? ":" + tag : "@" + digest);
}

absl::StatusOr<ImageReference> ParseImageReference(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text.substr(0, 200), "\" is not an image reference (", why,
                     "); write it like python:3.11-slim, ghcr.io/org/tool:1 or "
                     "localhost:5000/team/app@sha256:..."));
  };
  if (text.empty() || text.size() > 512) return bad("empty or too long");
  ImageReference ref;
  std::string rest = text;
  if (size_t at = rest.find('@'); at != std::string::npos) {
    ref.digest = rest.substr(at + 1);
    rest = rest.substr(0, at);
    if (!IsSha256Digest(ref.digest)) return bad("the digest is not sha256:<64 hex digits>");
  }
  std::vector<std::string> parts = absl::StrSplit(rest, '/');
  std::string first = parts[0];
  if (parts.size() > 1 && (first.find('.') != std::string::npos ||
                           first.find(':') != std::string::npos || first == "localhost")) {
    ref.registry = first;
    parts.erase(parts.begin());
  } else {
    const char* mirror = getenv("AIRLOCK_REGISTRY_MIRROR");
    ref.registry = mirror && *mirror ? mirror : kDockerHub;
    if (parts.size() == 1) parts.insert(parts.begin(), "library");
  }
  std::string& last = parts.back();
  if (size_t colon = last.find(':'); colon != std::string::npos) {
    ref.tag = last.substr(colon + 1);
    last = last.substr(0, colon);
    if (ref.tag.empty() || ref.tag.size() > 128) return bad("empty tag");
    for (char c : ref.tag) {
      if (!(absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '-')) return bad("bad tag");
    }
  } else if (ref.digest.empty()) {
    ref.tag = "latest";
  }
  for (const std::string& p : parts) {
    if (!ValidComponent(p)) return bad("repository names are lowercase a-z, 0-9, . _ -");
  }
  ref.repository = absl::StrJoin(parts, "/");
  std::string host = ref.registry.substr(0, ref.registry.find(':'));
  ref.insecure = host == "localhost" || host == "127.0.0.1";
  if (const char* insecure = getenv("AIRLOCK_INSECURE_REGISTRIES")) {
    for (absl::string_view r : absl::StrSplit(insecure, ',')) {
      if (r == ref.registry) ref.insecure = true;
    }
  }
  return ref;
}

namespace {

// Before each request (the first and every redirect's), with the address curl connected to.
int CheckAddress(void* data, char* primary_ip, char*, int, int) {
  auto* t = static_cast<Transfer*>(data);
  if (t->internal_addresses || !IsInternalRegistryAddress(primary_ip)) {
    return CURL_PREREQFUNC_OK;
  }
  t->refused_address = primary_ip;
  return CURL_PREREQFUNC_ABORT;
}

}  // namespace

bool IsInternalRegistryAddress(const std::string& address) {
  unsigned char v6[16];
  in_addr v4;
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    uint32_t a = ntohl(v4.s_addr);
    auto in = [a](uint32_t base, int bits) { return (a >> (32 - bits)) == (base >> (32 - bits)); };
    return in(0x00000000, 8) || in(0x0a000000, 8) || in(0x64400000, 10) || in(0x7f000000, 8) ||
           in(0xa9fe0000, 16) || in(0xac100000, 12) || in(0xc0a80000, 16) || in(0xc0000000, 24) ||
           in(0xe0000000, 3);
  }
  if (inet_pton(AF_INET6, address.c_str(), v6) != 1) return true;  // not an address: refuse
  static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (memcmp(v6, kMapped, 12) == 0) {
    char text[INET_ADDRSTRLEN];
    return inet_ntop(AF_INET, v6 + 12, text, sizeof text) == nullptr ||
           IsInternalRegistryAddress(text);
  }
  bool zero_prefix = std::all_of(v6, v6 + 15, [](unsigned char b) { return b == 0; });
  return (zero_prefix && (v6[15] == 0 || v6[15] == 1)) ||  // :: and ::1
         (v6[0] & 0xfe) == 0xfc ||                         // fc00::/7 unique local
         (v6[0] == 0xfe && (v6[1] & 0xc0) == 0x80) ||      // fe80::/10 link-local
         v6[0] == 0xff;                                    // multicast
}

absl::StatusOr<RegistryClient::Response> RegistryClient::Request(
    const ImageReference& ref, const std::string& method, const std::string& url,
    const std::vector<std::string>& headers, const std::string& body, const std::string& out_file,
    uint64_t expected_size) {
  absl::Status last = absl::UnavailableError("no attempt");
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(250 << attempt));
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) return absl::InternalError("curl_easy_init failed");
    Response response;
    Transfer t;
    t.internal_addresses = access_.internal_addresses;
    Sha256 sha;
    UniqueFd fd;
    if (!out_file.empty()) {
      fd = UniqueFd(open(out_file.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600));
      if (!fd.valid()) return ErrnoStatus("create", out_file);
      t.fd = fd.get();
      t.sha = &sha;
      t.limit = expected_size;
      t.on_bytes = [this](uint64_t n) {
        done_ += n;
        if (progress_) progress_(done_, total_);
      };
    } else {
      t.body = &response.body;
      t.body_cap = kMaxOciJsonBytes;
    }
    curl_slist* list = nullptr;
    for (const std::string& h : headers) list = curl_slist_append(list, h.c_str());
    if (!bearer_.empty()) {
      list = curl_slist_append(list, absl::StrCat("Authorization: ", bearer_).c_str());
    }
    std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(list,
                                                                            curl_slist_free_all);
    CURL* c = curl.get();
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, method == "GET" ? 1L : 0L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, std::min(10L, StallSeconds()));
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);  // a registry that hangs is given up on
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, StallSeconds());
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "airlock/0.4");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnData);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c, CURLOPT_PREREQFUNCTION, CheckAddress);
    curl_easy_setopt(c, CURLOPT_PREREQDATA, &t);
    if (method == "HEAD") {
      curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (method != "GET") {
      curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    }
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.code);
    if (t.overflow) {
      return absl::DataLossError(absl::StrCat(ref.registry, " sent more than expected for ", url));
    }
    bool retry = rc != CURLE_OK || response.code >= 500 || response.code == 429;
    if (retry && !out_file.empty()) {
      done_ -= std::min(done_, t.bytes);  // the next attempt starts the file over
      if (progress_) progress_(done_, total_);
    }
    if (!t.refused_address.empty()) {
      return absl::PermissionDeniedError(absl::StrCat(
          "refused to reach ", ref.registry, " at ", t.refused_address,
          ": airlockd does not pull from loopback, private or link-local addresses for other "
          "users unless the operator allows it (AIRLOCK_REGISTRY_ALLOW_INTERNAL=1 for airlockd)"));
    }
    if (rc != CURLE_OK) {
      last = absl::UnavailableError(
          absl::StrCat("cannot reach ", ref.registry, ": ", curl_easy_strerror(rc)));
      if (rc == CURLE_COULDNT_RESOLVE_HOST) return last;  // asking again will not help
      continue;
    }
    if (response.code >= 500 || response.code == 429) {
      last = absl::UnavailableError(
          absl::StrCat(ref.registry, " answered HTTP ", response.code, " for ", url));
      continue;
    }
    response.content_type = t.headers["content-type"];
    response.docker_digest = t.headers["docker-content-digest"];
    response.www_authenticate = t.headers["www-authenticate"];
    response.location = t.headers["location"];
    if (!out_file.empty() && response.code == 200) {
      response.docker_digest = "sha256:" + sha.FinishHex();  // what we actually received
      if (fsync(fd.get()) != 0) return ErrnoStatus("fsync", out_file);
    }
    return response;
  }
  return absl::Status(last.code(), absl::StrCat(last.message(), " (tried ", kAttempts, " times)"));
}

absl::Status RegistryClient::Authenticate(const ImageReference& ref, const std::string& challenge,
                                          const std::string& scope) {
  std::string credentials = access_.use_credentials ? Credentials(ref.registry) : "";
  if (absl::StartsWithIgnoreCase(challenge, "basic")) {
    if (credentials.empty() && !access_.use_credentials) {
      return absl::PermissionDeniedError(absl::StrCat(
          ref.registry,
          " needs a login, and airlockd does not use the host's registry logins for other users' "
          "pulls; ask the operator to pull it (airlock image pull as root)"));
    }
    if (credentials.empty()) {
      return absl::PermissionDeniedError(
          absl::StrCat(ref.registry,
                       " needs a login: set AIRLOCK_REGISTRY_USER and AIRLOCK_REGISTRY_PASSWORD, "
                       "or put {\"",
                       ref.registry,
                       "\": \"USER:PASSWORD\"} in "
                       "~/.config/airlock/auth.json"));
    }
    bearer_ = "Basic " + absl::Base64Escape(credentials);
    return absl::OkStatus();
  }
  if (!absl::StartsWithIgnoreCase(challenge, "bearer")) {
    return absl::PermissionDeniedError(absl::StrCat(
        ref.registry, " asks for an unknown kind of login: ", challenge.substr(0, 100)));
  }
  std::map<std::string, std::string> params = ChallengeParams(challenge);
  std::string realm = params["realm"];
  if (!absl::StartsWith(realm, "https://") && !absl::StartsWith(realm, "http://")) {
    return absl::PermissionDeniedError(absl::StrCat(ref.registry, " gave no token realm"));
  }
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  auto escape = [&](const std::string& s) {
    char* e = curl_easy_escape(curl.get(), s.c_str(), static_cast<int>(s.size()));
    std::string out = e ? e : "";
    curl_free(e);
    return out;
  };
  std::string url =
      absl::StrCat(realm, realm.find('?') == std::string::npos ? "?" : "&",
                   "service=", escape(params["service"]),
                   "&scope=", escape(params.count("scope") ? params["scope"] : scope));
  std::vector<std::string> headers;
  if (!credentials.empty())
    headers.push_back("Authorization: Basic " + absl::Base64Escape(credentials));
  bearer_.clear();
  absl::StatusOr<Response> token = Request(ref, "GET", url, headers, "", "", 0);
  if (!token.ok()) return token.status();
  if (token->code != 200) {
    return absl::PermissionDeniedError(absl::StrCat(ref.registry, " refused a token (HTTP ",
                                                    token->code, ")",
                                                    credentials.empty() ? "; log in?" : ""));
  }
  nlohmann::json j = nlohmann::json::parse(token->body, nullptr, false);
  std::string value;
  for (const char* key : {"token", "access_token"}) {
    auto it = j.is_object() ? j.find(key) : j.end();
    if (it != j.end() && it->is_string() && value.empty()) value = it->get<std::string>();
  }
  if (value.empty() || value.size() > 16384) {
    return absl::PermissionDeniedError(absl::StrCat(ref.registry, " sent no usable token"));
  }
  bearer_ = "Bearer " + value;
  return absl::OkStatus();
}

absl::StatusOr<std::string> RegistryClient::FetchBlob(const ImageReference& ref,
                                                      const OciDescriptor& blob,
                                                      const std::string& dir) {
  std::string file = absl::StrCat(dir, "/", blob.digest.substr(7));
  absl::StatusOr<Response> r = Request(
      ref, "GET", absl::StrCat(BaseUrl(ref), "/blobs/", blob.digest), {}, "", file, blob.size);
  if (!r.ok()) return r.status();
  if (r->code != 200) {
    return absl::NotFoundError(absl::StrCat(ref.registry, " has no blob ", blob.digest, " of ",
                                            ref.repository, " (HTTP ", r->code, ")"));
  }
  if (r->docker_digest != blob.digest) {
    return absl::DataLossError(absl::StrCat("blob ", blob.digest, " from ", ref.registry,
                                            " does not match its digest (got ", r->docker_digest,
                                            "); nothing was stored"));
  }
  return file;
}

absl::StatusOr<PulledImage> RegistryClient::Pull(
    const ImageReference& ref, const std::string& dir,
    const std::function<bool(const std::string&)>& already_have) {
  if (absl::Status s = MakeDirectories(dir, 0700); !s.ok()) return s;
  std::string accept = absl::StrCat("Accept: ", absl::StrJoin(kManifestTypes, ", "));
  std::string scope = absl::StrCat("repository:", ref.repository, ":pull");
  auto get_manifest = [&](const std::string& reference) -> absl::StatusOr<Response> {
    std::string url = absl::StrCat(BaseUrl(ref), "/manifests/", reference);
    absl::StatusOr<Response> r = Request(ref, "GET", url, {accept}, "", "", 0);
    if (r.ok() && r->code == 401) {
      if (absl::Status s = Authenticate(ref, r->www_authenticate, scope); !s.ok()) return s;
      r = Request(ref, "GET", url, {accept}, "", "", 0);
    }
    if (!r.ok()) return r.status();
    if (r->code == 401 || r->code == 403) {
      return absl::PermissionDeniedError(
          absl::StrCat(ref.registry, " refused access to ", ref.repository, " (HTTP ", r->code,
                       "); does it exist, and do you need to log in?"));
    }
    if (r->code != 200) {
      return absl::NotFoundError(
          absl::StrCat(ref.Name(), " was not found on ", ref.registry, " (HTTP ", r->code, ")"));
    }
    return r;
  };
  absl::StatusOr<Response> top = get_manifest(ref.digest.empty() ? ref.tag : ref.digest);
  if (!top.ok()) return top.status();
  std::string digest = Sha256Of(top->body);
  if (!ref.digest.empty() && digest != ref.digest) {
    return absl::DataLossError(absl::StrCat("the manifest ", ref.registry, " sent for ", ref.digest,
                                            " has digest ", digest));
  }
  std::string media_type = top->content_type.substr(0, top->content_type.find(';'));
  std::string manifest_text = top->body;
  if (IsIndexMediaType(media_type) || absl::StrContains(top->body.substr(0, 512), "manifests")) {
    absl::StatusOr<std::vector<OciDescriptor>> index = ParseOciIndex(top->body);
    if (index.ok()) {
      absl::StatusOr<OciDescriptor> pick = PickLinuxAmd64(*index);
      if (!pick.ok()) return pick.status();
      absl::StatusOr<Response> inner = get_manifest(pick->digest);
      if (!inner.ok()) return inner.status();
      digest = Sha256Of(inner->body);
      if (digest != pick->digest) {
        return absl::DataLossError(absl::StrCat("the manifest ", ref.registry, " sent for ",
                                                pick->digest, " has digest ", digest));
      }
      manifest_text = inner->body;
    } else if (IsIndexMediaType(media_type)) {
      return index.status();
    }
  }
  PulledImage image;
  image.digest = digest;
  if (already_have && already_have(digest)) return image;  // nothing to download
  absl::StatusOr<OciManifest> manifest = ParseOciManifest(manifest_text);
  if (!manifest.ok()) return manifest.status();
  total_ = manifest->config.size;
  for (const OciDescriptor& l : manifest->layers) {
    total_ = l.size > UINT64_MAX - total_ ? UINT64_MAX : total_ + l.size;
  }
  if (total_ > access_.max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the image ", ref.Name(), " is ", total_,
                     " bytes to download, more than this pull may take: ", access_.max_bytes,
                     " bytes (the pull and images quotas)"));
  }
  done_ = 0;
  absl::StatusOr<std::string> config_file = FetchBlob(ref, manifest->config, dir);
  if (!config_file.ok()) return config_file.status();
  absl::StatusOr<std::string> config_text = ReadFileToString(*config_file, kMaxOciJsonBytes);
  if (!config_text.ok()) return config_text.status();
  absl::StatusOr<OciImageConfig> config = ParseOciImageConfig(*config_text);
  if (!config.ok()) return config.status();
  image.config = *config;
  image.config_json = *config_text;
  image.manifest_json = manifest_text;
  for (const OciDescriptor& layer : manifest->layers) {
    absl::StatusOr<std::string> file = FetchBlob(ref, layer, dir);
    if (!file.ok()) return file.status();
    image.layers.push_back(*file);
  }
  return image;
}

absl::StatusOr<std::string> RegistryClient::Push(const ImageReference& ref,
                                                 const std::vector<std::string>& layer_files,
                                                 const std::string& config_json) {
  std::string scope = absl::StrCat("repository:", ref.repository, ":pull,push");
  // Each blob: skipped if the registry has it, else one monolithic upload.
  auto upload = [&](const std::string& bytes) -> absl::StatusOr<std::string> {
    std::string digest = Sha256Of(bytes);
    std::string url = absl::StrCat(BaseUrl(ref), "/blobs/", digest);
    absl::StatusOr<Response> head = Request(ref, "HEAD", url, {}, "", "", 0);
    if (head.ok() && head->code == 401) {
      if (absl::Status s = Authenticate(ref, head->www_authenticate, scope); !s.ok()) return s;
      head = Request(ref, "HEAD", url, {}, "", "", 0);
    }
    if (!head.ok()) return head.status();
    if (head->code == 200) return digest;
    absl::StatusOr<Response> start =
        Request(ref, "POST", absl::StrCat(BaseUrl(ref), "/blobs/uploads/"), {}, "", "", 0);
    if (!start.ok()) return start.status();
    if (start->code != 202 || start->location.empty()) {
      return absl::PermissionDeniedError(absl::StrCat(ref.registry, " did not accept an upload to ",
                                                      ref.repository, " (HTTP ", start->code, ")"));
    }
    std::string location = start->location;
    if (absl::StartsWith(location, "/")) {
      location = absl::StrCat(ref.insecure ? "http://" : "https://", ref.registry, location);
    }
    absl::StrAppend(&location, location.find('?') == std::string::npos ? "?" : "&",
                    "digest=", digest);
    absl::StatusOr<Response> put =
        Request(ref, "PUT", location, {"Content-Type: application/octet-stream"}, bytes, "", 0);
    if (!put.ok()) return put.status();
    if (put->code != 201) {
      return absl::InternalError(
          absl::StrCat(ref.registry, " refused blob ", digest, " (HTTP ", put->code, ")"));
    }
    return digest;
  };
  nlohmann::json layers = nlohmann::json::array();
  for (const std::string& file : layer_files) {
    absl::StatusOr<std::string> bytes = ReadFileToString(file, 4ull << 30);
    if (!bytes.ok()) return bytes.status();
    absl::StatusOr<std::string> digest = upload(*bytes);
    if (!digest.ok()) return digest.status();
    std::string media_type = "application/vnd.oci.image.layer.v1.tar";
    if (absl::StartsWith(*bytes, "\x1f\x8b")) media_type += "+gzip";
    if (absl::StartsWith(*bytes, "\x28\xb5\x2f\xfd")) media_type += "+zstd";
    layers.push_back({{"mediaType", media_type}, {"digest", *digest}, {"size", bytes->size()}});
  }
  absl::StatusOr<std::string> config_digest = upload(config_json);
  if (!config_digest.ok()) return config_digest.status();
  nlohmann::json manifest = {{"schemaVersion", 2},
                             {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                             {"config",
                              {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                               {"digest", *config_digest},
                               {"size", config_json.size()}}},
                             {"layers", layers}};
  std::string text = manifest.dump();
  absl::StatusOr<Response> put =
      Request(ref, "PUT", absl::StrCat(BaseUrl(ref), "/manifests/", ref.tag),
              {"Content-Type: application/vnd.oci.image.manifest.v1+json"}, text, "", 0);
  if (!put.ok()) return put.status();
  if (put->code != 201) {
    return absl::InternalError(absl::StrCat(ref.registry, " refused the manifest for ", ref.Name(),
                                            " (HTTP ", put->code, ")"));
  }
  return Sha256Of(text);
}

}  // namespace airlock
