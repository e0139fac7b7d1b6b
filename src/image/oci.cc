#include "src/image/oci.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

using json = nlohmann::json;

absl::Status Bad(const std::string& what, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("bad ", what, ": ", why));
}

absl::StatusOr<json> ParseObject(const std::string& text, const std::string& what) {
  if (text.size() > kMaxOciJsonBytes) return Bad(what, "too large");
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return Bad(what, "not a JSON object");
  return j;
}

const json* Member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string Text(const json& j, const char* key) {
  const json* v = Member(j, key);
  return v && v->is_string() ? v->get<std::string>() : "";
}

// A list of strings (null and absent are empty); false if it is something else.
bool Strings(const json& j, const char* key, std::vector<std::string>* out) {
  const json* v = Member(j, key);
  if (v == nullptr || v->is_null()) return true;
  if (!v->is_array() || v->size() > 4096) return false;
  for (const json& s : *v) {
    if (!s.is_string()) return false;
    out->push_back(s.get<std::string>());
  }
  return true;
}

absl::StatusOr<OciDescriptor> Descriptor(const json& j, const std::string& what) {
  if (!j.is_object()) return Bad(what, "a descriptor is not an object");
  OciDescriptor d;
  d.media_type = Text(j, "mediaType");
  d.digest = Text(j, "digest");
  if (!IsSha256Digest(d.digest)) return Bad(what, "a digest is not sha256:<64 hex digits>");
  const json* size = Member(j, "size");
  if (size == nullptr || !size->is_number_integer() || size->get<int64_t>() < 0) {
    return Bad(what, "a descriptor has no valid size");
  }
  d.size = size->get<uint64_t>();
  if (const json* platform = Member(j, "platform")) {
    d.os = Text(*platform, "os");
    d.architecture = Text(*platform, "architecture");
  }
  if (const json* annotations = Member(j, "annotations")) {
    d.ref_name = Text(*annotations, "org.opencontainers.image.ref.name");
  }
  return d;
}

}  // namespace

bool IsSha256Digest(const std::string& digest) {
  return digest.size() == 71 && digest.compare(0, 7, "sha256:") == 0 &&
         digest.find_first_not_of("0123456789abcdef", 7) == std::string::npos;
}

bool IsIndexMediaType(const std::string& media_type) {
  return media_type == "application/vnd.oci.image.index.v1+json" ||
         media_type == "application/vnd.docker.distribution.manifest.list.v2+json";
}

absl::StatusOr<std::vector<OciDescriptor>> ParseOciIndex(const std::string& text) {
  absl::StatusOr<json> j = ParseObject(text, "image index");
  if (!j.ok()) return j.status();
  const json* manifests = Member(*j, "manifests");
  if (manifests == nullptr || !manifests->is_array() || manifests->size() > 1024) {
    return Bad("image index", "no manifests list");
  }
  std::vector<OciDescriptor> out;
  for (const json& m : *manifests) {
    absl::StatusOr<OciDescriptor> d = Descriptor(m, "image index");
    if (!d.ok()) return d.status();
    out.push_back(*d);
  }
  return out;
}

absl::StatusOr<OciManifest> ParseOciManifest(const std::string& text) {
  absl::StatusOr<json> j = ParseObject(text, "image manifest");
  if (!j.ok()) return j.status();
  const json* config = Member(*j, "config");
  const json* layers = Member(*j, "layers");
  if (config == nullptr || layers == nullptr || !layers->is_array()) {
    return Bad("image manifest", "it needs a config and a list of layers");
  }
  if (layers->size() > kMaxOciLayers) {
    return Bad("image manifest", absl::StrCat("more than ", kMaxOciLayers, " layers"));
  }
  OciManifest m;
  absl::StatusOr<OciDescriptor> c = Descriptor(*config, "image manifest");
  if (!c.ok()) return c.status();
  m.config = *c;
  for (const json& layer : *layers) {
    absl::StatusOr<OciDescriptor> d = Descriptor(layer, "image manifest");
    if (!d.ok()) return d.status();
    m.layers.push_back(*d);
  }
  return m;
}

absl::StatusOr<OciImageConfig> ParseOciImageConfig(const std::string& text) {
  absl::StatusOr<json> j = ParseObject(text, "image config");
  if (!j.ok()) return j.status();
  OciImageConfig c;
  c.os = Text(*j, "os");
  c.architecture = Text(*j, "architecture");
  if (const json* config = Member(*j, "config"); config && !config->is_null()) {
    if (!config->is_object()) return Bad("image config", "config is not an object");
    if (!Strings(*config, "Env", &c.run.env) ||
        !Strings(*config, "Entrypoint", &c.run.entrypoint) ||
        !Strings(*config, "Cmd", &c.run.cmd)) {
      return Bad("image config", "Env, Entrypoint and Cmd must be lists of strings");
    }
    c.run.working_dir = Text(*config, "WorkingDir");
    c.run.user = Text(*config, "User");
  }
  if (const json* rootfs = Member(*j, "rootfs"); rootfs && !rootfs->is_null()) {
    if (!rootfs->is_object() || !Strings(*rootfs, "diff_ids", &c.diff_ids) ||
        c.diff_ids.size() > kMaxOciLayers ||
        !std::all_of(c.diff_ids.begin(), c.diff_ids.end(), IsSha256Digest)) {
      return Bad("image config", "rootfs.diff_ids must be a list of sha256 digests");
    }
  }
  for (const std::string& e : c.run.env) {
    if (e.find('=') == std::string::npos || e[0] == '=') {
      return Bad("image config",
                 absl::StrCat("Env entry \"", e.substr(0, 64), "\" is not KEY=VALUE"));
    }
  }
  return c;
}

absl::StatusOr<std::vector<DockerSaveImage>> ParseDockerSaveManifest(const std::string& text) {
  if (text.size() > kMaxOciJsonBytes) return Bad("manifest.json", "too large");
  json j = json::parse(text, nullptr, false);
  if (!j.is_array() || j.empty() || j.size() > 1024) {
    return Bad("manifest.json", "not a list of images");
  }
  std::vector<DockerSaveImage> out;
  for (const json& entry : j) {
    DockerSaveImage image;
    image.config = Text(entry, "Config");
    if (image.config.empty() || !Strings(entry, "RepoTags", &image.repo_tags) ||
        !Strings(entry, "Layers", &image.layers) || image.layers.size() > kMaxOciLayers) {
      return Bad("manifest.json", "an image needs Config, Layers (at most 256) and RepoTags");
    }
    out.push_back(std::move(image));
  }
  return out;
}

absl::StatusOr<OciDescriptor> PickLinuxAmd64(const std::vector<OciDescriptor>& manifests) {
  std::vector<std::string> seen;
  for (const OciDescriptor& d : manifests) {
    if (d.os == "linux" && d.architecture == "amd64") return d;
    if (!d.os.empty()) seen.push_back(d.os + "/" + d.architecture);
  }
  if (manifests.size() == 1 && manifests[0].os.empty()) return manifests[0];
  return absl::NotFoundError(absl::StrCat("the image has no linux/amd64 variant",
                                          seen.empty() ? "" : " (it has ",
                                          absl::StrJoin(seen, ", "), seen.empty() ? "" : ")"));
}

}  // namespace airlock
