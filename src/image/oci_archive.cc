#include "src/image/oci_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/sha256.h"
#include "src/common/unique_fd.h"
#include "src/image/image_store.h"
#include "src/image/tar_path.h"
#include "src/image/tar_to_ext4.h"

namespace airlock {
namespace {

constexpr size_t kMaxMembers = 4096;

// The archive's members, copied out by name.
struct Members {
  std::map<std::string, std::string> files;    // member -> file in dir
  std::map<std::string, std::string> digests;  // member -> sha256:hex of its bytes
  std::map<std::string, std::string> links;    // member -> the member it links to

  // Follows links (a few hops at most); empty if there is no such file.
  std::string Resolve(std::string name) const {
    for (int hops = 0; hops < 8; ++hops) {
      if (files.count(name)) return name;
      auto link = links.find(name);
      if (link == links.end()) return "";
      name = link->second;
    }
    return "";
  }
};

absl::StatusOr<Members> CopyMembers(const std::string& path, const std::string& dir) {
  absl::StatusOr<ArchivePtr> a = OpenTar(path);
  if (!a.ok()) return a.status();
  if (absl::Status s = MakeDirectories(dir, 0700); !s.ok()) return s;
  Members m;
  uint64_t total = 0;
  archive_entry* entry;
  int r;
  std::vector<char> buf(1 << 20);
  while ((r = archive_read_next_header(a->get(), &entry)) == ARCHIVE_OK) {
    const char* raw = archive_entry_pathname(entry);
    absl::StatusOr<std::string> name = CleanTarPath(raw ? raw : "");
    if (!name.ok()) return name.status();
    if (m.files.size() + m.links.size() >= kMaxMembers) {
      return absl::InvalidArgumentError(absl::StrCat(path, " has more than ", kMaxMembers,
                                                     " members; it is not an image archive"));
    }
    if (const char* hard = archive_entry_hardlink(entry)) {
      absl::StatusOr<std::string> target = CleanTarPath(hard);
      if (!target.ok()) return target.status();
      m.links[*name] = *target;
      continue;
    }
    if (archive_entry_filetype(entry) == AE_IFLNK) {
      // Relative to the link's directory, and confined to the archive like any name.
      const char* target = archive_entry_symlink(entry);
      std::string base = name->find('/') == std::string::npos ? "" : DirName(*name) + "/";
      absl::StatusOr<std::string> resolved = CleanTarPath(base + (target ? target : ""));
      if (resolved.ok()) m.links[*name] = *resolved;
      continue;
    }
    if (archive_entry_filetype(entry) != AE_IFREG) continue;
    std::string file = absl::StrCat(dir, "/", m.files.size());
    UniqueFd out(open(file.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600));
    if (!out.valid()) return ErrnoStatus("create", file);
    Sha256 sha;
    for (;;) {
      la_ssize_t n = archive_read_data(a->get(), buf.data(), buf.size());
      if (n < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, " is damaged (", archive_error_string(a->get()), "); is it truncated?"));
      }
      if (n == 0) break;
      total += static_cast<uint64_t>(n);
      if (total > kMaxImageBytes) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, " holds more than ", kMaxImageBytes >> 30, " GiB"));
      }
      sha.Update(absl::string_view(buf.data(), static_cast<size_t>(n)));
      for (la_ssize_t done = 0; done < n;) {
        ssize_t w = write(out.get(), buf.data() + done, static_cast<size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return ErrnoStatus("write", file);
        done += w;
      }
    }
    m.files[*name] = file;
    m.digests[*name] = "sha256:" + sha.FinishHex();
  }
  if (r != ARCHIVE_EOF) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is damaged (", archive_error_string(a->get()), "); is it truncated?"));
  }
  return m;
}

// A member's bytes (small JSON only).
absl::StatusOr<std::string> ReadMember(const Members& m, const std::string& name) {
  std::string resolved = m.Resolve(name);
  if (resolved.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the archive has no ", name));
  }
  return ReadFileToString(m.files.at(resolved), kMaxOciJsonBytes);
}

// The file of an OCI blob, checked against its digest (and size, if known).
absl::StatusOr<std::string> Blob(const Members& m, const std::string& digest, int64_t size) {
  std::string name = m.Resolve("blobs/sha256/" + digest.substr(7));
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the archive lacks blob ", digest));
  }
  if (m.digests.at(name) != digest) {
    return absl::DataLossError(absl::StrCat("blob ", digest, " does not match its digest (it is ",
                                            m.digests.at(name), "); the archive is damaged"));
  }
  off_t actual = 0;
  if (size >= 0) {
    UniqueFd fd(open(m.files.at(name).c_str(), O_RDONLY | O_CLOEXEC));
    actual = fd.valid() ? lseek(fd.get(), 0, SEEK_END) : -1;
    if (actual != size) {
      return absl::DataLossError(
          absl::StrCat("blob ", digest, " has ", actual, " bytes, its descriptor says ", size));
    }
  }
  return m.files.at(name);
}

absl::StatusOr<ArchiveImage> FromOciLayout(const Members& m) {
  absl::StatusOr<std::string> index_text = ReadMember(m, "index.json");
  if (!index_text.ok()) return index_text.status();
  absl::StatusOr<std::vector<OciDescriptor>> index = ParseOciIndex(*index_text);
  if (!index.ok()) return index.status();
  absl::StatusOr<OciDescriptor> pick = PickLinuxAmd64(*index);
  if (!pick.ok()) return pick.status();
  std::string name = pick->ref_name;
  // index.json may point at a multi-platform index first.
  for (int depth = 0; IsIndexMediaType(pick->media_type); ++depth) {
    if (depth > 2) return absl::InvalidArgumentError("image indexes nest too deep");
    absl::StatusOr<std::string> file = Blob(m, pick->digest, static_cast<int64_t>(pick->size));
    if (!file.ok()) return file.status();
    absl::StatusOr<std::string> text = ReadFileToString(*file, kMaxOciJsonBytes);
    if (!text.ok()) return text.status();
    absl::StatusOr<std::vector<OciDescriptor>> inner = ParseOciIndex(*text);
    if (!inner.ok()) return inner.status();
    pick = PickLinuxAmd64(*inner);
    if (!pick.ok()) return pick.status();
  }
  absl::StatusOr<std::string> manifest_file =
      Blob(m, pick->digest, static_cast<int64_t>(pick->size));
  if (!manifest_file.ok()) return manifest_file.status();
  absl::StatusOr<std::string> manifest_text = ReadFileToString(*manifest_file, kMaxOciJsonBytes);
  if (!manifest_text.ok()) return manifest_text.status();
  absl::StatusOr<OciManifest> manifest = ParseOciManifest(*manifest_text);
  if (!manifest.ok()) return manifest.status();
  absl::StatusOr<std::string> config_file =
      Blob(m, manifest->config.digest, static_cast<int64_t>(manifest->config.size));
  if (!config_file.ok()) return config_file.status();
  absl::StatusOr<std::string> config_text = ReadFileToString(*config_file, kMaxOciJsonBytes);
  if (!config_text.ok()) return config_text.status();
  ArchiveImage image;
  absl::StatusOr<OciImageConfig> config = ParseOciImageConfig(*config_text);
  if (!config.ok()) return config.status();
  image.config = *config;
  image.config_json = *config_text;
  image.manifest_json = *manifest_text;
  image.digest = pick->digest;
  image.name = name;
  for (const OciDescriptor& layer : manifest->layers) {
    absl::StatusOr<std::string> file = Blob(m, layer.digest, static_cast<int64_t>(layer.size));
    if (!file.ok()) return file.status();
    image.layers.push_back(*file);
  }
  return image;
}

// "sha256:..." of a layer file's content after decompression (as SupportInProcessFilters allows).
absl::StatusOr<std::string> UncompressedSha256(const std::string& path) {
  ArchivePtr a(archive_read_new());
  SupportInProcessFilters(a.get());
  archive_read_support_format_raw(a.get());
  archive_entry* entry = nullptr;
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK ||
      archive_read_next_header(a.get(), &entry) != ARCHIVE_OK) {
    return absl::InvalidArgumentError(
        absl::StrCat("a layer of the archive cannot be read: ", archive_error_string(a.get())));
  }
  Sha256 sha;
  std::string buf(1 << 16, '\0');
  uint64_t total = 0;
  for (;;) {
    la_ssize_t n = archive_read_data(a.get(), buf.data(), buf.size());
    if (n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("a layer of the archive is damaged: ", archive_error_string(a.get())));
    }
    if (n == 0) break;
    total += static_cast<uint64_t>(n);
    if (total > kMaxImageBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("a layer of the archive holds more than ", kMaxImageBytes >> 30, " GiB"));
    }
    sha.Update(absl::string_view(buf.data(), static_cast<size_t>(n)));
  }
  return "sha256:" + sha.FinishHex();
}

absl::StatusOr<ArchiveImage> FromDockerSave(const Members& m) {
  absl::StatusOr<std::string> text = ReadMember(m, "manifest.json");
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<DockerSaveImage>> images = ParseDockerSaveManifest(*text);
  if (!images.ok()) return images.status();
  const DockerSaveImage& saved = images->front();
  absl::StatusOr<std::string> config_name = CleanTarPath(saved.config);
  if (!config_name.ok()) return config_name.status();
  absl::StatusOr<std::string> config_text = ReadMember(m, *config_name);
  if (!config_text.ok()) return config_text.status();
  absl::StatusOr<OciImageConfig> config = ParseOciImageConfig(*config_text);
  if (!config.ok()) return config.status();
  ArchiveImage image;
  image.config = *config;
  image.config_json = *config_text;
  // The config names each layer by the digest of its tar (rootfs.diff_ids): the layers must be
  // those, or the image would not be the one its config (and its digest) describe.
  if (config->diff_ids.size() != saved.layers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the image's config lists ", config->diff_ids.size(),
                     " layers (rootfs.diff_ids) and its manifest.json ", saved.layers.size(),
                     "; the archive is damaged or was altered"));
  }
  std::string identity = m.digests.at(m.Resolve(*config_name));
  for (size_t i = 0; i < saved.layers.size(); ++i) {
    const std::string& layer = saved.layers[i];
    absl::StatusOr<std::string> name = CleanTarPath(layer);
    if (!name.ok()) return name.status();
    std::string resolved = m.Resolve(*name);
    if (resolved.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("the archive has no layer ", layer));
    }
    const std::string& file = m.files.at(resolved);
    std::string diff_id = m.digests.at(resolved);
    if (diff_id != config->diff_ids[i]) {  // a compressed layer: its content is what counts
      absl::StatusOr<std::string> uncompressed = UncompressedSha256(file);
      if (!uncompressed.ok()) return uncompressed.status();
      diff_id = *uncompressed;
    }
    if (diff_id != config->diff_ids[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", layer, " is ", diff_id, ", not ", config->diff_ids[i],
                       " as the image's config says; the archive is damaged or was altered"));
    }
    image.layers.push_back(file);
    absl::StrAppend(&identity, "\n", m.digests.at(resolved));
  }
  image.digest = "sha256:" + Sha256Hex(identity);
  if (!saved.repo_tags.empty()) image.name = saved.repo_tags.front();
  return image;
}

}  // namespace

absl::StatusOr<ArchiveImage> ReadImageArchive(const std::string& archive_path,
                                              const std::string& dir) {
  absl::StatusOr<Members> members = CopyMembers(archive_path, dir);
  if (!members.ok()) return members.status();
  absl::StatusOr<ArchiveImage> image;
  if (!members->Resolve("index.json").empty()) {
    image = FromOciLayout(*members);
  } else if (!members->Resolve("manifest.json").empty()) {
    image = FromDockerSave(*members);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        archive_path,
        " is neither an OCI image layout nor a `docker save` archive (it has no index.json or "
        "manifest.json); for a root filesystem tar use `airlock image import --rootfs`"));
  }
  if (!image.ok()) {
    return absl::Status(image.status().code(),
                        absl::StrCat(archive_path, ": ", image.status().message()));
  }
  const OciImageConfig& c = image->config;
  if ((!c.os.empty() && c.os != "linux") ||
      (!c.architecture.empty() && c.architecture != "amd64")) {
    return absl::FailedPreconditionError(absl::StrCat(
        archive_path, " is a ", c.os, "/", c.architecture, " image; Airlock runs linux/amd64"));
  }
  return image;
}

}  // namespace airlock
