#include "src/image/image_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <memory>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/common/sha256.h"
#include "src/common/subprocess.h"
#include "src/common/unique_fd.h"
#include "src/image/oci_archive.h"
#include "src/image/registry_client.h"
#include "src/image/tar_to_ext4.h"

namespace airlock {
namespace {

// ".tmp-PID-N": names work in progress, unique among the threads of all processes (airlockd
// pulls for concurrent sessions); Prune removes those whose process is gone.
std::string TmpSuffix() {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(".tmp-", getpid(), "-", counter.fetch_add(1));
}

// Bump when the converter's output for the same input changes.
constexpr char kConverterVersion[] = "ext4-v1";
// Bump when DebianRootfs's mmdebstrap recipe changes.
constexpr char kDebianRecipe[] = "mmdebstrap-minbase-v1";
constexpr size_t kMaxMetadata = 1 << 20;

}  // namespace

absl::Status ImageStore::ValidateName(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 200 && name[0] != '.' && name[0] != '/' &&
            name[0] != '-' && name.find("..") == std::string::npos;
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                c == '-' || c == '/' || c == ':' || c == '@');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("invalid image name \"", name,
                   "\": use lowercase letters, digits and . _ - / : @ (for example team/tool:1)"));
}

namespace {

std::string EscapeName(const std::string& name) {
  return absl::StrReplaceAll(name, {{"%", "%25"}, {"/", "%2F"}, {":", "%3A"}});
}

}  // namespace

std::string ImageStore::TenantRefs() const {
  return absl::StrCat(root_, "/tenant-refs/", EscapeName(tenant_));
}

std::string ImageStore::RefPath(const std::string& name) const {
  return absl::StrCat(tenant_.empty() ? root_ + "/refs" : TenantRefs(), "/", EscapeName(name));
}

std::vector<std::string> ImageStore::NamesIn(const std::string& dir) {
  std::vector<std::string> names;
  for (const std::string& file : ListDirectory(dir)) {
    if (file[0] == '.' || file.find(".tmp.") != std::string::npos) continue;
    names.push_back(absl::StrReplaceAll(file, {{"%2F", "/"}, {"%3A", ":"}, {"%25", "%"}}));
  }
  return names;
}

std::set<std::string> ImageStore::AllTaggedDigests() const {
  std::set<std::string> digests;
  std::vector<std::string> dirs = {root_ + "/refs"};
  for (const std::string& tenant : ListDirectory(root_ + "/tenant-refs")) {
    if (tenant[0] != '.') dirs.push_back(absl::StrCat(root_, "/tenant-refs/", tenant));
  }
  for (const std::string& dir : dirs) {
    for (const std::string& name : NamesIn(dir)) {
      absl::StatusOr<ImageInfo> info = ResolveRef(absl::StrCat(dir, "/", EscapeName(name)), name);
      if (info.ok()) digests.insert(info->digest);
    }
  }
  return digests;
}

absl::StatusOr<ImageInfo> ImageStore::LoadBlob(const std::string& key,
                                               const std::string& name) const {
  std::string dir = absl::StrCat(root_, "/blobs/", key);
  absl::StatusOr<std::string> text = ReadFileToString(dir + "/image.json", kMaxMetadata);
  if (!text.ok()) {
    return absl::DataLossError(
        absl::StrCat("image ", name, " is damaged (", text.status().message(),
                     "); remove it with `airlock image rm ", name, "` and import it again"));
  }
  nlohmann::json meta = nlohmann::json::parse(*text, nullptr, false);
  if (!meta.is_object()) return absl::DataLossError(absl::StrCat(dir, "/image.json is corrupt"));
  ImageInfo info;
  info.name = name;
  info.digest = absl::StrCat("sha256:", key);
  info.rootfs_path = dir + "/rootfs.ext4";
  if (meta.contains("created") && meta["created"].is_number_integer()) {
    info.created = meta["created"].get<int64_t>();
  }
  if (meta.contains("source") && meta["source"].is_string()) {
    info.source = meta["source"].get<std::string>();
  }
  if (meta.contains("recorded") && meta["recorded"].is_object()) info.recorded = meta["recorded"];
  if (auto config = meta.find("config"); config != meta.end() && config->is_object()) {
    auto strings = [&](const char* key, std::vector<std::string>* out) {
      auto it = config->find(key);
      if (it == config->end() || !it->is_array()) return;
      for (const nlohmann::json& v : *it) {
        if (v.is_string()) out->push_back(v.get<std::string>());
      }
    };
    strings("env", &info.run.env);
    strings("entrypoint", &info.run.entrypoint);
    strings("cmd", &info.run.cmd);
    if (auto w = config->find("working_dir"); w != config->end() && w->is_string()) {
      info.run.working_dir = w->get<std::string>();
    }
    if (auto u = config->find("user"); u != config->end() && u->is_string()) {
      info.run.user = u->get<std::string>();
    }
  }
  struct stat st;
  if (stat(info.rootfs_path.c_str(), &st) != 0) return ErrnoStatus("stat", info.rootfs_path);
  info.size_bytes = static_cast<uint64_t>(st.st_size);
  return info;
}

absl::StatusOr<ImageInfo> ImageStore::Resolve(const std::string& name) const {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  absl::StatusOr<ImageInfo> own = ResolveRef(RefPath(name), name);
  if (tenant_.empty() || !absl::IsNotFound(own.status())) return own;
  // A tenant sees the operator's tags under its own.
  return ImageStore(root_).Resolve(name);
}

absl::StatusOr<ImageInfo> ImageStore::ResolveRef(const std::string& ref_path,
                                                 const std::string& name) const {
  absl::StatusOr<std::string> text = ReadFileToString(ref_path, kMaxMetadata);
  if (!text.ok()) {
    return absl::NotFoundError(
        absl::StrCat("image ", name,
                     " is not in the store; `airlock image ls` lists what is, and "
                     "scripts/setup.sh builds the default image"));
  }
  nlohmann::json ref = nlohmann::json::parse(*text, nullptr, false);
  std::string key = ref.is_object() && ref.contains("digest") && ref["digest"].is_string()
                        ? ref["digest"].get<std::string>()
                        : "";
  if (key.size() != 64 || key.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return absl::DataLossError(absl::StrCat("the tag file of image ", name, " is corrupt"));
  }
  return LoadBlob(key, name);
}

absl::StatusOr<ImageInfo> ImageStore::ResolveOrPull(const std::string& name,
                                                    const RegistryClient::Progress& progress,
                                                    RegistryAccess access) {
  absl::StatusOr<ImageInfo> info = Resolve(name);
  if (info.status().code() != absl::StatusCode::kNotFound || name == kDefaultImage ||
      !ParseImageReference(name).ok()) {
    return info;
  }
  absl::StatusOr<ImageInfo> pulled = Pull(name, progress, access);
  if (pulled.ok()) return pulled;
  return absl::Status(pulled.status().code(),
                      absl::StrCat("image ", name,
                                   " is not in the store (`airlock image ls` lists what is) and "
                                   "pulling it failed: ",
                                   pulled.status().message()));
}

namespace {

// The blob key of an image digest ("sha256:<64 lowercase hex>"); empty if it is none.
std::string DigestKey(const std::string& digest) {
  std::string key = absl::StartsWith(digest, "sha256:") ? digest.substr(7) : "";
  bool ok = key.size() == 64 && key.find_first_not_of("0123456789abcdef") == std::string::npos;
  return ok ? key : "";
}

}  // namespace

absl::StatusOr<ImageInfo> ImageStore::ResolveDigest(const std::string& name,
                                                    const std::string& digest) const {
  std::string key = DigestKey(digest);
  struct stat st;
  if (key.empty() || stat(absl::StrCat(root_, "/blobs/", key).c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat("image ", name, " (", digest, ") is no longer in the image store"));
  }
  return LoadBlob(key, name);
}

namespace {

// The store is root's; the airlock group (who may use airlockd) may read it, nobody else.
void ShareWithAirlockGroup(const std::string& path) {
  static const gid_t gid = [] {
    group* g = getgrnam("airlock");
    return g != nullptr ? g->gr_gid : static_cast<gid_t>(-1);
  }();
  // Only root can give a file to a group it is not in; a store of someone else's is theirs.
  if (gid != static_cast<gid_t>(-1) && geteuid() == 0) {
    (void)!chown(path.c_str(), static_cast<uid_t>(-1), gid);
  }
}

}  // namespace

absl::Status ImageStore::MakeStoreDirectories() {
  for (const std::string& dir : {root_, root_ + "/blobs", root_ + "/refs"}) {
    if (absl::Status s = MakeDirectories(dir, kStoreDirMode); !s.ok()) return s;
    // A store made before it was closed to others is closed now (what is inside was 0644).
    if (geteuid() == 0 && chmod(dir.c_str(), kStoreDirMode) != 0) return ErrnoStatus("chmod", dir);
    ShareWithAirlockGroup(dir);
  }
  return absl::OkStatus();
}

absl::Status ImageStore::EnsureBlob(const std::string& key,
                                    const std::function<absl::Status(const std::string&)>& convert,
                                    nlohmann::json meta,
                                    const std::map<std::string, std::string>& files) {
  if (absl::Status s = MakeStoreDirectories(); !s.ok()) return s;
  std::string blob = absl::StrCat(root_, "/blobs/", key);
  struct stat st;
  if (stat((blob + "/image.json").c_str(), &st) == 0) return absl::OkStatus();
  std::string tmp = absl::StrCat(blob, TmpSuffix());
  if (absl::Status s = RemoveTree(tmp); !s.ok()) return s;
  if (mkdir(tmp.c_str(), kStoreDirMode) != 0) return ErrnoStatus("mkdir", tmp);
  ShareWithAirlockGroup(tmp);
  absl::Status status = convert(tmp + "/rootfs.ext4");
  if (status.ok() && chmod((tmp + "/rootfs.ext4").c_str(), kStoreFileMode) != 0) {
    status = ErrnoStatus("chmod", tmp + "/rootfs.ext4");
  }
  if (status.ok()) ShareWithAirlockGroup(tmp + "/rootfs.ext4");
  if (status.ok()) {
    if (!meta.contains("created")) meta["created"] = static_cast<int64_t>(time(nullptr));
    meta["converter"] = kConverterVersion;
    status = WriteFileAtomically(tmp + "/image.json", meta.dump(), kStoreFileMode);
    ShareWithAirlockGroup(tmp + "/image.json");
  }
  for (const auto& [file, content] : files) {
    if (status.ok() && !content.empty()) {
      status = WriteFileAtomically(tmp + "/" + file, content, kStoreFileMode);
      ShareWithAirlockGroup(tmp + "/" + file);
    }
  }
  if (status.ok()) status = CommitFile(tmp + "/rootfs.ext4", tmp + "/rootfs.ext4");
  if (status.ok() && rename(tmp.c_str(), blob.c_str()) != 0) {
    // Another import of the same bytes won the race: its blob is identical.
    if (errno != EEXIST && errno != ENOTEMPTY) status = ErrnoStatus("rename", tmp);
  }
  RemoveTree(tmp).IgnoreError();  // what is left of a lost race or a failure
  if (!status.ok()) return status;
  return SyncDirectory(root_ + "/blobs");
}

absl::Status ImageStore::InstallBlob(
    const std::string& digest, const std::string& meta,
    const std::function<absl::Status(const std::string&)>& write_rootfs) {
  std::string key = DigestKey(digest);
  if (key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", digest, "\" is not an image digest"));
  }
  nlohmann::json parsed = nlohmann::json::parse(meta, nullptr, false);
  if (!parsed.is_object()) {
    return absl::DataLossError(absl::StrCat("the metadata of image ", digest, " is not JSON"));
  }
  return EnsureBlob(key, write_rootfs, std::move(parsed), {});
}

absl::StatusOr<ImageInfo> ImageStore::Tag(const std::string& key, const std::string& name) {
  nlohmann::json ref = {{"digest", key}};
  if (!tenant_.empty()) {
    for (const std::string& dir : {root_ + "/tenant-refs", TenantRefs()}) {
      if (absl::Status s = MakeDirectories(dir, kStoreDirMode); !s.ok()) return s;
      ShareWithAirlockGroup(dir);
    }
  }
  if (absl::Status s = WriteFileAtomically(RefPath(name), ref.dump(), kStoreFileMode); !s.ok()) {
    return s;
  }
  ShareWithAirlockGroup(RefPath(name));
  return LoadBlob(key, name);
}

absl::StatusOr<ImageInfo> ImageStore::ImportRootfsTar(const std::string& tar_path,
                                                      const std::string& name,
                                                      const std::vector<std::string>& env) {
  return ImportRootfsLayers({tar_path}, name, env);
}

absl::StatusOr<ImageInfo> ImageStore::ImportRootfsLayers(const std::vector<std::string>& tars,
                                                         const std::string& name,
                                                         const std::vector<std::string>& env) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (tars.empty()) return absl::InvalidArgumentError("an image needs a root filesystem tar");
  for (const std::string& e : env) {
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0 || e.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", e, "\" is not KEY=VALUE (an image's environment variable)"));
    }
  }
  std::vector<std::string> digests;
  for (const std::string& tar : tars) {
    absl::StatusOr<std::string> digest = Sha256FileHex(tar);
    if (!digest.ok()) return digest.status();
    digests.push_back(*digest);
  }
  // One tar without an environment keys as it always did, so existing images keep theirs.
  std::string key =
      Sha256Hex(absl::StrCat(kConverterVersion, "\n", absl::StrJoin(digests, "\n"),
                             env.empty() ? "" : absl::StrCat("\nenv\n", absl::StrJoin(env, "\n"))));
  nlohmann::json meta = {
      {"source", absl::StrCat(tars.size() == 1 ? "rootfs tar sha256:" : "rootfs tars sha256:",
                              absl::StrJoin(digests, " sha256:"))}};
  if (!env.empty()) {
    OciRunConfig run;
    run.env = env;
    meta["config"] = RunConfigJson(run);
  }
  // Later tars are laid over earlier ones, without whiteouts: a file named ".wh.X" is a file.
  absl::Status built = EnsureBlob(
      key,
      [&](const std::string& out) {
        return tars.size() == 1 ? ConvertRootfsTar(tars[0], out)
                                : ConvertLayers(tars, out, /*whiteouts=*/false);
      },
      meta);
  if (!built.ok()) return built;
  return Tag(key, name);
}

absl::StatusOr<ImageInfo> ImageStore::ImportBuild(const std::string& base,
                                                  const std::vector<std::string>& layers,
                                                  const std::string& key, const OciRunConfig& run,
                                                  const nlohmann::json& recorded,
                                                  const std::string& source,
                                                  const std::string& name) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (key.size() != 64 || key.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return absl::InvalidArgumentError("an image build's key is 64 hex digits");
  }
  nlohmann::json meta = {{"source", source}, {"config", RunConfigJson(run)}};
  if (recorded.is_object() && !recorded.empty()) meta["recorded"] = recorded;
  absl::Status built = EnsureBlob(
      key, [&](const std::string& out) { return ConvertLayersOver(base, layers, out); }, meta);
  if (!built.ok()) return built;
  return Tag(key, name);
}

nlohmann::json ImageStore::RunConfigJson(const OciRunConfig& run) {
  return {{"env", run.env},
          {"entrypoint", run.entrypoint},
          {"cmd", run.cmd},
          {"working_dir", run.working_dir},
          {"user", run.user}};
}

namespace {

// A work directory removed with the object; one a crash leaves is removed by Prune (its name
// carries the pid).
struct ScratchDir {
  explicit ScratchDir(std::string p) : path(std::move(p)) {}
  ~ScratchDir() { RemoveTree(path).IgnoreError(); }
  std::string path;
};

}  // namespace

absl::StatusOr<ImageInfo> ImageStore::Pull(const std::string& reference,
                                           const RegistryClient::Progress& progress,
                                           RegistryAccess access) {
  if (absl::Status s = ValidateName(reference); !s.ok()) return s;
  absl::StatusOr<ImageReference> ref = ParseImageReference(reference);
  if (!ref.ok()) return ref.status();
  if (absl::Status s = MakeStoreDirectories(); !s.ok()) return s;
  // Downloads land here, verified; gone afterwards (also after a crash: the next pull of the
  // same image starts over, and no half image is ever tagged).
  ScratchDir scratch(absl::StrCat(root_, "/blobs/pull", TmpSuffix()));
  const std::string& work = scratch.path;
  RegistryClient client(progress, access);
  absl::StatusOr<PulledImage> image = client.Pull(*ref, work, [&](const std::string& digest) {
    struct stat st;
    return stat(absl::StrCat(root_, "/blobs/", digest.substr(7), "/image.json").c_str(), &st) == 0;
  });
  if (!image.ok()) return image.status();
  nlohmann::json meta = {{"source", absl::StrCat("pulled from ", ref->Name(), ", ", image->digest)},
                         {"config", RunConfigJson(image->config.run)}};
  absl::Status built = EnsureBlob(
      image->digest.substr(7),
      [&](const std::string& out) { return ConvertLayers(image->layers, out, true); }, meta,
      {{"manifest.json", image->manifest_json}, {"config.json", image->config_json}});
  if (!built.ok()) return built;
  return Tag(image->digest.substr(7), reference);
}

namespace {

// Lowercase letters, digits and `extra`, starting with a letter or digit, 1 to 100 bytes.
bool PlainWord(const std::string& word, const char* extra) {
  if (word.empty() || word.size() > 100 || !absl::ascii_isalnum(word[0])) return false;
  for (char c : word) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && !strchr(extra, c)) return false;
  }
  return true;
}

}  // namespace

bool IsDebianSuiteName(const std::string& word) { return PlainWord(word, "-"); }

bool IsDebianPackageName(const std::string& word) { return PlainWord(word, "+-."); }

absl::StatusOr<std::string> ImageStore::DebianRootfs(const std::string& suite,
                                                     const std::vector<std::string>& packages,
                                                     const std::string& cache_dir) {
  if (!IsDebianSuiteName(suite)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", suite, "\" is not a Debian suite name (like bookworm)"));
  }
  for (const std::string& p : packages) {
    if (!IsDebianPackageName(p)) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", p, "\" is not a Debian package name (like python3)"));
    }
  }
  std::string include = absl::StrJoin(packages, ",");
  std::string tar = absl::StrCat(
      cache_dir, "/rootfs/debian-",
      Sha256Hex(absl::StrCat(kDebianRecipe, "\n", suite, "\n", include)).substr(0, 16), ".tar");
  struct stat st;
  if (stat(tar.c_str(), &st) != 0) {
    if (access("/usr/bin/mmdebstrap", X_OK) != 0) {
      return absl::FailedPreconditionError(
          "building from Debian packages needs mmdebstrap; install it (scripts/setup.sh does)");
    }
    if (absl::Status s = MakeDirectories(cache_dir + "/rootfs", 0755); !s.ok()) return s;
    std::vector<std::string> argv = {"/usr/bin/mmdebstrap",
                                     "--quiet",
                                     "--variant=minbase",
                                     "--format=tar",
                                     "--dpkgopt=path-exclude=/usr/share/man/*",
                                     "--dpkgopt=path-exclude=/usr/share/doc/*",
                                     "--dpkgopt=path-include=/usr/share/doc/*/copyright",
                                     "--dpkgopt=path-exclude=/usr/share/locale/*",
                                     "--dpkgopt=path-exclude=/usr/share/info/*"};
    if (!include.empty()) argv.push_back("--include=" + include);
    std::string tmp = absl::StrCat(tar, TmpSuffix());
    argv.push_back(suite);
    argv.push_back(tmp);
    // The host's own apt sources, so that a site with a local mirror works.
    for (const char* sources :
         {"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"}) {
      if (stat(sources, &st) == 0 && st.st_size > 0) {
        argv.push_back(sources);
        break;
      }
    }
    absl::StatusOr<ProcessResult> r = RunProcess(argv, 64 * 1024);
    if (!r.ok() || r->exit_code != 0) {
      unlink(tmp.c_str());
      std::string out = r.ok() ? r->output : std::string(r.status().message());
      return absl::UnavailableError(absl::StrCat(
          "mmdebstrap failed for ", suite, " + ", include.empty() ? "nothing" : include, ":\n",
          out.substr(out.size() > 4000 ? out.size() - 4000 : 0)));
    }
    if (absl::Status s = CommitFile(tmp, tar); !s.ok()) return s;
  }
  return tar;
}

absl::StatusOr<ImageInfo> ImageStore::ImportArchive(const std::string& archive_path,
                                                    const std::string& name) {
  if (!name.empty()) {
    if (absl::Status s = ValidateName(name); !s.ok()) return s;
  }
  if (absl::Status s = MakeStoreDirectories(); !s.ok()) return s;
  // The archive's members land here as opaque blobs while it is read; gone afterwards.
  ScratchDir scratch(absl::StrCat(root_, "/blobs/import", TmpSuffix()));
  const std::string& work = scratch.path;
  absl::StatusOr<ArchiveImage> image = ReadImageArchive(archive_path, work);
  if (!image.ok()) return image.status();
  std::string tag = name.empty() ? image->name : name;
  if (tag.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(archive_path, " does not name its image; give one with --tag NAME"));
  }
  if (absl::Status s = ValidateName(tag); !s.ok()) return s;
  const OciRunConfig& run = image->config.run;
  nlohmann::json meta = {{"source", absl::StrCat("image archive, ", image->digest)},
                         {"config", RunConfigJson(run)}};
  absl::Status built = EnsureBlob(
      image->digest.substr(7),
      [&](const std::string& out) { return ConvertLayers(image->layers, out, true); }, meta,
      {{"manifest.json", image->manifest_json}, {"config.json", image->config_json}});
  if (!built.ok()) return built;
  return Tag(image->digest.substr(7), tag);
}

absl::StatusOr<ImageInfo> ImageStore::TagDigest(const std::string& name,
                                                const std::string& digest) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  std::string key = digest.substr(digest.find(':') + 1);
  if (!digest.starts_with("sha256:") || key.size() != 64 ||
      key.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("\"", digest, "\" is not an image digest"));
  }
  if (access(absl::StrCat(root_, "/blobs/", key).c_str(), F_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("no image ", digest, " in the store"));
  }
  return Tag(key, name);
}

std::vector<std::string> ImageStore::OwnNames() const {
  return NamesIn(tenant_.empty() ? root_ + "/refs" : TenantRefs());
}

std::vector<std::string> ImageStore::Tenants(const std::string& root) {
  std::vector<std::string> tenants = NamesIn(root + "/tenant-refs");
  tenants.insert(tenants.begin(), "");
  return tenants;
}

uint64_t ImageStore::OwnBytes() const {
  if (tenant_.empty()) return 0;
  std::set<std::string> counted;
  uint64_t bytes = 0;
  for (const std::string& name : OwnNames()) {
    absl::StatusOr<ImageInfo> info = ResolveRef(RefPath(name), name);
    if (info.ok() && counted.insert(info->digest).second) bytes += info->size_bytes;
  }
  return bytes;
}

absl::StatusOr<std::vector<ImageInfo>> ImageStore::List() const {
  std::vector<ImageInfo> out;
  std::set<std::string> names;
  for (const std::string& name : NamesIn(root_ + "/refs")) names.insert(name);
  if (!tenant_.empty()) {
    for (const std::string& name : NamesIn(TenantRefs())) names.insert(name);
  }
  for (const std::string& name : names) {
    absl::StatusOr<ImageInfo> info = Resolve(name);
    if (info.ok()) out.push_back(*info);
  }
  return out;
}

namespace {

// Disk space the regular files directly in a blob directory take.
uint64_t BlobBytes(const std::string& path) {
  uint64_t bytes = 0;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* f = readdir(d)) {
      struct stat st;
      if (fstatat(dirfd(d), f->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
        bytes += static_cast<uint64_t>(st.st_blocks) * 512;
      }
    }
    closedir(d);
  }
  return bytes;
}

}  // namespace

absl::StatusOr<ImageStore::RemoveResult> ImageStore::Remove(const std::string& name,
                                                            const std::vector<std::string>& keep) {
  absl::StatusOr<ImageInfo> info = Resolve(name);
  // A corrupt tag can still be removed (prune then frees what it pointed at).
  if (!info.ok() && info.status().code() != absl::StatusCode::kDataLoss) return info.status();
  if (unlink(RefPath(name).c_str()) != 0) return ErrnoStatus("remove", RefPath(name));
  if (!info.ok()) return RemoveResult{};
  RemoveResult result{.digest = info->digest};
  if (AllTaggedDigests().contains(info->digest)) return result;  // another tag, of anyone
  if (std::find(keep.begin(), keep.end(), info->digest) != keep.end()) return result;
  std::string blob = DirName(info->rootfs_path);
  result.freed_bytes = BlobBytes(blob);
  if (absl::Status s = RemoveTree(blob); !s.ok()) return s;
  result.freed = true;
  return result;
}

absl::StatusOr<ImageStore::PruneResult> ImageStore::Prune(const std::vector<std::string>& keep) {
  std::set<std::string> wanted(keep.begin(), keep.end());
  for (const std::string& digest : AllTaggedDigests()) wanted.insert(digest);
  PruneResult result;
  std::string blobs = root_ + "/blobs";
  DIR* dir = opendir(blobs.c_str());
  if (dir == nullptr) return result;
  std::vector<std::string> names;
  while (dirent* e = readdir(dir)) names.push_back(e->d_name);
  closedir(dir);
  for (const std::string& name : names) {
    std::string path = blobs + "/" + name;
    bool is_blob =
        name.size() == 64 && name.find_first_not_of("0123456789abcdef") == std::string::npos;
    bool remove = is_blob && !wanted.count("sha256:" + name);
    // A blob made in the last ten minutes may belong to an import or pull about to tag it.
    struct stat made;
    if (remove && stat(path.c_str(), &made) == 0 && time(nullptr) - made.st_mtime < 600) {
      remove = false;
    }
    // "<anything>.tmp-<pid>[-...]": work of an import or pull whose process is gone.
    if (size_t tmp = name.find(".tmp-"); !is_blob && tmp != std::string::npos) {
      std::string pid = name.substr(tmp + 5, name.find('-', tmp + 5) - tmp - 5);
      struct stat st;
      remove = !pid.empty() && stat(("/proc/" + pid).c_str(), &st) != 0;
    }
    if (!remove) continue;
    result.freed_bytes += BlobBytes(path);
    if (absl::Status s = RemoveTree(path); !s.ok()) return s;
    if (is_blob) result.removed.push_back("sha256:" + name);
  }
  return result;
}

}  // namespace airlock
