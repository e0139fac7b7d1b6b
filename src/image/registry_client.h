// A client for OCI distribution (v2) registries, over libcurl: Docker Hub, GHCR, a local
// `docker-registry`, ... Anonymous bearer tokens as Docker Hub hands them out, basic auth from
// $AIRLOCK_REGISTRY_AUTH_FILE (or ~/.config/airlock/auth.json: {"HOST": "USER:PASSWORD"}) or
// $AIRLOCK_REGISTRY_USER/$AIRLOCK_REGISTRY_PASSWORD for the registry $AIRLOCK_REGISTRY_HOST
// names (a login goes only to the registry it is for), retries with backoff on 5xx and
// timeouts. Everything a registry sends is untrusted: manifests are bounded and parsed by
// oci.h, and every blob is checked against its digest and size before it is used.
#ifndef AIRLOCK_IMAGE_REGISTRY_CLIENT_H_
#define AIRLOCK_IMAGE_REGISTRY_CLIENT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/image/oci.h"

namespace airlock {

// "python:3.11-slim" -> registry-1.docker.io, library/python, tag 3.11-slim.
struct ImageReference {
  std::string registry;      // host[:port] to talk to
  std::string repository;    // e.g. library/python
  std::string tag;           // empty if a digest is given
  std::string digest;        // "sha256:..." or empty
  bool insecure = false;     // plain http (localhost, 127.0.0.1, or $AIRLOCK_INSECURE_REGISTRIES)
  std::string Name() const;  // canonical: registry/repository:tag (or @digest)
};

// Parses a reference; $AIRLOCK_REGISTRY_MIRROR, if set, replaces Docker Hub's host.
[[nodiscard]] absl::StatusOr<ImageReference> ParseImageReference(const std::string& text);

struct PulledImage {
  std::string digest;  // the manifest's
  std::string manifest_json;
  std::string config_json;
  OciImageConfig config;
  std::vector<std::string> layers;  // files in the download directory, bottom first
};

// What a pull may use. The operator's own pulls (the CLI as root, root's requests to airlockd)
// may use the host's registry logins and reach registries on internal addresses; a pull airlockd
// makes for another tenant may do neither unless the operator allows it, so that a tenant can
// neither collect the host's passwords by naming a registry of its own nor reach what sits on
// the host's loopback or private networks through airlockd.
struct RegistryAccess {
  bool use_credentials = true;
  // Loopback, private, link-local, shared and unspecified addresses, for the registry, its token
  // realm and every redirect.
  bool internal_addresses = true;
  // What one pull may download in all (its blobs' sizes as the manifest declares them; no blob
  // may exceed its own).
  uint64_t max_bytes = UINT64_MAX;
};

// Whether an address (text, IPv4 or IPv6) is one a tenant's pull must not reach.
bool IsInternalRegistryAddress(const std::string& address);

class RegistryClient {
 public:
  // progress(done_bytes, total_bytes) while blobs download.
  using Progress = std::function<void(uint64_t, uint64_t)>;
  explicit RegistryClient(Progress progress = nullptr, RegistryAccess access = {})
      : progress_(std::move(progress)), access_(access) {}

  // Resolves the reference to the linux/amd64 manifest and downloads its config and layers into
  // dir (verified against their digests), unless already_have(manifest digest) says there is
  // no need (then only the digest is filled in).
  [[nodiscard]] absl::StatusOr<PulledImage> Pull(
      const ImageReference& ref, const std::string& dir,
      const std::function<bool(const std::string&)>& already_have = nullptr);

  // Uploads layer files and a config, and puts a manifest for them at ref. Returns the
  // manifest's digest.
  [[nodiscard]] absl::StatusOr<std::string> Push(const ImageReference& ref,
                                                 const std::vector<std::string>& layer_files,
                                                 const std::string& config_json);

 private:
  struct Response {
    long code = 0;
    std::string body;
    std::string content_type;
    std::string docker_digest;
    std::string www_authenticate;
    std::string location;
  };
  absl::StatusOr<Response> Request(const ImageReference& ref, const std::string& method,
                                   const std::string& url, const std::vector<std::string>& headers,
                                   const std::string& body, const std::string& out_file,
                                   uint64_t expected_size);
  absl::Status Authenticate(const ImageReference& ref, const std::string& challenge,
                            const std::string& scope);
  absl::StatusOr<std::string> FetchBlob(const ImageReference& ref, const OciDescriptor& blob,
                                        const std::string& dir);

  Progress progress_;
  RegistryAccess access_;
  std::string bearer_;  // the token for this registry, once we have one
  uint64_t done_ = 0, total_ = 0;
};

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_REGISTRY_CLIENT_H_
