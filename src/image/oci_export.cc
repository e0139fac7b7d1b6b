#include "src/image/oci_export.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/sha256.h"
#include "src/common/unique_fd.h"
#include "src/image/build_context.h"
#include "src/image/ext4_reader.h"

namespace airlock {
namespace {

constexpr char kManifestType[] = "application/vnd.oci.image.manifest.v1+json";

struct WriteFree {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

// libarchive's writer, its blocks handed to the sink; the sink's error is kept for the caller.
struct SinkState {
  const ExportSink* sink;
  absl::Status error;
};

la_ssize_t WriteToSink(archive*, void* data, const void* buf, size_t n) {
  auto* state = static_cast<SinkState*>(data);
  state->error = (*state->sink)(absl::string_view(static_cast<const char*>(buf), n));
  return state->error.ok() ? static_cast<la_ssize_t>(n) : -1;
}

}  // namespace

nlohmann::json OciConfigFor(const ImageInfo& image, const std::string& layer_digest) {
  nlohmann::json config = nlohmann::json::object();
  if (!image.run.env.empty()) config["Env"] = image.run.env;
  if (!image.run.entrypoint.empty()) config["Entrypoint"] = image.run.entrypoint;
  if (!image.run.cmd.empty()) config["Cmd"] = image.run.cmd;
  if (!image.run.working_dir.empty()) config["WorkingDir"] = image.run.working_dir;
  if (!image.run.user.empty()) config["User"] = image.run.user;
  const nlohmann::json& recorded = image.recorded;
  if (auto it = recorded.find("labels"); it != recorded.end() && it->is_object()) {
    config["Labels"] = *it;
  }
  // "8000" and "53/udp" as OCI writes them: "8000/tcp", "53/udp".
  if (auto it = recorded.find("exposed_ports"); it != recorded.end() && it->is_array()) {
    for (const nlohmann::json& port : *it) {
      if (!port.is_string()) continue;
      std::string p = port.get<std::string>();
      config["ExposedPorts"][p.find('/') == std::string::npos ? p + "/tcp" : p] =
          nlohmann::json::object();
    }
  }
  if (auto it = recorded.find("volumes"); it != recorded.end() && it->is_array()) {
    for (const nlohmann::json& v : *it) {
      if (v.is_string()) config["Volumes"][v.get<std::string>()] = nlohmann::json::object();
    }
  }
  if (auto it = recorded.find("stop_signal"); it != recorded.end() && it->is_string()) {
    config["StopSignal"] = *it;
  }
  return {{"architecture", "amd64"},
          {"os", "linux"},
          {"config", config},
          {"rootfs", {{"type", "layers"}, {"diff_ids", {layer_digest}}}},
          {"history",
           {{{"created_by", absl::StrCat("airlock image save ", image.name, " (", image.digest,
                                         "): ", image.source)}}}}};
}

absl::Status ExportOciLayout(const ImageInfo& image, const std::string& ref_name,
                             const std::string& scratch_dir, const ExportSink& sink) {
  // The layer: every entry of the image's filesystem, as a PAX tar.
  UniqueFd layer_fd(open(scratch_dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!layer_fd.valid()) return ErrnoStatus("create an unnamed file in", scratch_dir);
  std::string layer_path = absl::StrCat("/proc/self/fd/", layer_fd.get());
  LayerTarWriter layer;
  if (absl::Status s = layer.Open(layer_path); !s.ok()) return s;
  absl::Status walked =
      WalkExt4(image.rootfs_path, "/", [&](const Ext4Entry& e, const Ext4Writer::Reader& read) {
        if (e.path.empty()) return absl::OkStatus();  // the root
        return layer.Add(e.path, e, read);
      });
  if (!walked.ok()) return walked;
  if (absl::Status s = layer.Close(); !s.ok()) return s;
  Sha256 sha;
  std::vector<char> buf(1 << 20);
  uint64_t layer_size = 0;
  for (;;) {
    ssize_t n = pread(layer_fd.get(), buf.data(), buf.size(), static_cast<off_t>(layer_size));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read", "the image's layer");
    if (n == 0) break;
    sha.Update(absl::string_view(buf.data(), static_cast<size_t>(n)));
    layer_size += static_cast<uint64_t>(n);
  }
  std::string layer_hex = sha.FinishHex();
  std::string layer_digest = "sha256:" + layer_hex;

  std::string config = OciConfigFor(image, layer_digest).dump();
  std::string config_hex = Sha256Hex(config);
  nlohmann::json manifest_json = {{"schemaVersion", 2},
                                  {"mediaType", kManifestType},
                                  {"config",
                                   {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                                    {"digest", "sha256:" + config_hex},
                                    {"size", config.size()}}},
                                  {"layers",
                                   {{{"mediaType", "application/vnd.oci.image.layer.v1.tar"},
                                     {"digest", layer_digest},
                                     {"size", layer_size}}}}};
  std::string manifest = manifest_json.dump();
  std::string manifest_hex = Sha256Hex(manifest);
  nlohmann::json index_json = {
      {"schemaVersion", 2},
      {"manifests",
       {{{"mediaType", kManifestType},
         {"digest", "sha256:" + manifest_hex},
         {"size", manifest.size()},
         {"annotations", {{"org.opencontainers.image.ref.name", ref_name}}}}}}};
  std::string index = index_json.dump();

  // The layout, as a tar handed to the sink.
  SinkState state{&sink, absl::OkStatus()};
  std::unique_ptr<archive, WriteFree> out(archive_write_new());
  archive_write_set_format_pax_restricted(out.get());
  archive_write_set_bytes_in_last_block(out.get(), 1);
  if (archive_write_open(out.get(), &state, nullptr, WriteToSink, nullptr) != ARCHIVE_OK) {
    return absl::InternalError(
        absl::StrCat("start the image's tar: ", archive_error_string(out.get())));
  }
  auto failed = [&](const std::string& what) {
    if (!state.error.ok()) return state.error;
    return absl::InternalError(
        absl::StrCat("write ", what, " of the image's tar: ", archive_error_string(out.get())));
  };
  auto header = [&](const std::string& path, bool dir, uint64_t size) -> absl::Status {
    std::unique_ptr<archive_entry, EntryFree> e(archive_entry_new());
    archive_entry_set_pathname(e.get(), path.c_str());
    archive_entry_set_filetype(e.get(), dir ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(e.get(), dir ? 0755 : 0644);
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(size));
    archive_entry_set_mtime(e.get(), image.created, 0);
    if (archive_write_header(out.get(), e.get()) != ARCHIVE_OK) return failed(path);
    return absl::OkStatus();
  };
  auto file = [&](const std::string& path, const std::string& content) -> absl::Status {
    if (absl::Status s = header(path, false, content.size()); !s.ok()) return s;
    if (archive_write_data(out.get(), content.data(), content.size()) < 0) return failed(path);
    return absl::OkStatus();
  };
  for (const auto& [path, content] : std::vector<std::pair<std::string, std::string>>{
           {"oci-layout", R"({"imageLayoutVersion":"1.0.0"})"}, {"index.json", index}}) {
    if (absl::Status s = file(path, content); !s.ok()) return s;
  }
  for (const char* dir : {"blobs", "blobs/sha256"}) {
    if (absl::Status s = header(dir, true, 0); !s.ok()) return s;
  }
  if (absl::Status s = file("blobs/sha256/" + config_hex, config); !s.ok()) return s;
  if (absl::Status s = file("blobs/sha256/" + manifest_hex, manifest); !s.ok()) return s;
  std::string layer_name = "blobs/sha256/" + layer_hex;
  if (absl::Status s = header(layer_name, false, layer_size); !s.ok()) return s;
  for (uint64_t at = 0; at < layer_size;) {
    ssize_t n = pread(layer_fd.get(), buf.data(), buf.size(), static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus("read", "the image's layer");
    if (archive_write_data(out.get(), buf.data(), static_cast<size_t>(n)) < 0) {
      return failed(layer_name);
    }
    at += static_cast<uint64_t>(n);
  }
  if (archive_write_close(out.get()) != ARCHIVE_OK) return failed("the end");
  return absl::OkStatus();
}

}  // namespace airlock
