#include "src/image/oci_archive.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/common/file_util.h"
#include "src/common/hex.h"
#include "src/common/sha256.h"
#include "src/image/image_store.h"
#include "src/image/oci_export.h"
#include "src/image/registry_client.h"
#include "src/testing/local_registry.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

using json = nlohmann::json;
using testing::Debugfs;
using testing::TarEntry;
using testing::TempDir;
using testing::WriteTar;

std::string Digest(const std::string& bytes) { return "sha256:" + Sha256Hex(bytes); }

// Builds image archives in a temporary directory.
class ArchiveBuilder {
 public:
  explicit ArchiveBuilder(TempDir& dir) : dir_(dir) {}
  // A layer tar's bytes.
  std::string Layer(const std::vector<TarEntry>& entries) {
    int turn = layers_++;
    std::string path = dir_.File("layer" + std::to_string(turn) + ".tar");
    // In turn plain, gzip and zstd, as registries serve them.
    constexpr testing::Compression kTurns[] = {
        testing::Compression::kNone, testing::Compression::kGzip, testing::Compression::kZstd};
    WriteTar(path, entries, kTurns[turn % 3]);
    return *ReadFileToString(path, 64 << 20);
  }
  // An OCI image layout tar; `tamper` changes a layer's bytes after its digest was taken.
  std::string OciLayout(const std::vector<std::string>& layers, const json& config,
                        const std::string& ref_name, bool tamper = false,
                        const std::string& arch = "amd64") {
    std::vector<TarEntry> members;
    json layer_descriptors = json::array();
    for (const std::string& layer : layers) {
      layer_descriptors.push_back({{"mediaType", "application/vnd.oci.image.layer.v1.tar"},
                                   {"digest", Digest(layer)},
                                   {"size", layer.size()}});
      std::string bytes = layer;
      if (tamper) bytes[bytes.size() / 2] ^= 1;
      members.push_back({.name = "blobs/sha256/" + Digest(layer).substr(7), .data = bytes});
    }
    std::string config_bytes = config.dump();
    members.push_back(
        {.name = "blobs/sha256/" + Digest(config_bytes).substr(7), .data = config_bytes});
    json manifest = {{"schemaVersion", 2},
                     {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                     {"config",
                      {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                       {"digest", Digest(config_bytes)},
                       {"size", config_bytes.size()}}},
                     {"layers", layer_descriptors}};
    std::string manifest_bytes = manifest.dump();
    members.push_back(
        {.name = "blobs/sha256/" + Digest(manifest_bytes).substr(7), .data = manifest_bytes});
    json index = {{"schemaVersion", 2},
                  {"manifests",
                   {{{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                     {"digest", Digest(manifest_bytes)},
                     {"size", manifest_bytes.size()},
                     {"platform", {{"os", "linux"}, {"architecture", arch}}},
                     {"annotations", {{"org.opencontainers.image.ref.name", ref_name}}}}}}};
    members.push_back({.name = "index.json", .data = index.dump()});
    members.push_back({.name = "oci-layout", .data = R"({"imageLayoutVersion":"1.0.0"})"});
    std::string path = dir_.File("image" + std::to_string(count_++) + ".tar");
    WriteTar(path, members);
    return path;
  }

 private:
  TempDir& dir_;
  int layers_ = 0;
  int count_ = 0;
};

json Config() {
  return {{"architecture", "amd64"},
          {"os", "linux"},
          {"config",
           {{"Env", {"PATH=/usr/bin:/bin", "GREETING=hello"}},
            {"Entrypoint", {"sh", "-c"}},
            {"Cmd", {"echo $GREETING"}},
            {"WorkingDir", "/srv"}}},
          {"rootfs", {{"type", "layers"}}}};
}

TEST(OciArchiveTest, ImportsALayoutWithWhiteoutsAndItsConfig) {
  TempDir dir;
  ArchiveBuilder b(dir);
  std::string base = b.Layer({{.name = "etc/", .type = S_IFDIR, .mode = 0755},
                              {.name = "etc/gone", .data = "old"},
                              {.name = "etc/kept", .data = "kept"},
                              {.name = "srv/", .type = S_IFDIR, .mode = 0755}});
  std::string top =
      b.Layer({{.name = "etc/.wh.gone", .data = ""}, {.name = "etc/new", .data = "new"}});
  std::string third = b.Layer({{.name = "etc/zstd", .data = "from a zstd layer"}});
  ASSERT_EQ(third.substr(0, 4), "\x28\xb5\x2f\xfd");  // zstd's magic
  std::string archive = b.OciLayout({base, top, third}, Config(), "team/app:1");
  ImageStore store(dir.File("store"));
  absl::StatusOr<ImageInfo> info = store.ImportArchive(archive, "");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name, "team/app:1");
  EXPECT_EQ(info->run.entrypoint, (std::vector<std::string>{"sh", "-c"}));
  EXPECT_EQ(info->run.cmd, (std::vector<std::string>{"echo $GREETING"}));
  EXPECT_EQ(info->run.working_dir, "/srv");
  EXPECT_EQ(info->run.env.size(), 2u);
  EXPECT_EQ(Debugfs(info->rootfs_path, "cat /etc/new"), "new");
  EXPECT_EQ(Debugfs(info->rootfs_path, "cat /etc/kept"), "kept");
  EXPECT_EQ(Debugfs(info->rootfs_path, "cat /etc/zstd"), "from a zstd layer");
  // The manifest and config are kept beside the ext4, as the archive had them.
  std::string blob = DirName(info->rootfs_path);
  EXPECT_EQ(Digest(*ReadFileToString(blob + "/manifest.json", 1 << 20)), info->digest);
  EXPECT_EQ(*ReadFileToString(blob + "/config.json", 1 << 20), Config().dump());
  EXPECT_NE(Debugfs(info->rootfs_path, "stat /etc/gone").find("not found"), std::string::npos);
  // Nobody but root (and the airlock group) reads the store: QEMU gets images as descriptors.
  for (const std::string& path : {dir.File("store"), dir.File("store/blobs"), blob}) {
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 07777, ImageStore::kStoreDirMode) << path;
  }
  for (const std::string& path : {info->rootfs_path, blob + "/image.json", blob + "/config.json"}) {
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 07777, ImageStore::kStoreFileMode) << path;
    if (group* g = getgrnam("airlock"); g != nullptr && geteuid() == 0) {
      EXPECT_EQ(st.st_gid, g->gr_gid) << path;
    }
  }
  // The same image again: the same digest, and the tag resolves to it.
  absl::StatusOr<ImageInfo> again = store.ImportArchive(archive, "other:2");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->digest, info->digest);
  EXPECT_EQ(store.Resolve("team/app:1")->run.cmd, info->run.cmd);
}

TEST(OciArchiveTest, ImportsADockerSaveArchiveWhoseLayersAreWhatItsConfigSays) {
  TempDir dir;
  ArchiveBuilder b(dir);
  std::vector<TarEntry> entries = {{.name = "app/run.sh", .data = "echo ok\n", .mode = 0755}};
  std::string layer = b.Layer(entries);    // plain
  std::string gzipped = b.Layer(entries);  // the same content, compressed
  ASSERT_NE(layer, gzipped);
  auto save = [&](const std::string& name, const std::string& layer_bytes,
                  const std::vector<std::string>& diff_ids) {
    json config = Config();
    config["rootfs"]["diff_ids"] = diff_ids;
    json manifest = json::array(
        {{{"Config", "cfg.json"}, {"RepoTags", {"saved:latest"}}, {"Layers", {"l1/layer.tar"}}}});
    std::string archive = dir.File(name);
    WriteTar(archive, {{.name = "manifest.json", .data = manifest.dump()},
                       {.name = "cfg.json", .data = config.dump()},
                       {.name = "l1/layer.tar", .data = layer_bytes},
                       {.name = "l2/layer.tar", .type = S_IFLNK, .data = "../l1/layer.tar"}});
    return archive;
  };
  ImageStore store(dir.File("store"));
  absl::StatusOr<ImageInfo> info =
      store.ImportArchive(save("saved.tar", layer, {Digest(layer)}), "");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name, "saved:latest");
  EXPECT_EQ(Debugfs(info->rootfs_path, "cat /app/run.sh"), "echo ok\n");
  // A compressed layer is checked by its content.
  info = store.ImportArchive(save("gzipped.tar", gzipped, {Digest(layer)}), "gz:1");
  EXPECT_TRUE(info.ok()) << info.status();
  // Layers that are not the config's, or not as many: refused, nothing stored.
  for (const auto& [name, diff_ids] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"other.tar", {Digest("other")}},
           {"fewer.tar", {}},
           {"more.tar", {Digest(layer), Digest(layer)}}}) {
    absl::StatusOr<ImageInfo> bad =
        store.ImportArchive(save(name, layer, diff_ids), "bad:" + name.substr(0, 4));
    ASSERT_FALSE(bad.ok()) << name;
    EXPECT_NE(bad.status().message().find("damaged or was altered"), std::string::npos)
        << bad.status();
    EXPECT_EQ(store.Resolve("bad:" + name.substr(0, 4)).status().code(),
              absl::StatusCode::kNotFound);
  }
}

TEST(OciArchiveTest, PruneFreesWhatNoTagOrSessionUses) {
  TempDir dir;
  ArchiveBuilder b(dir);
  ImageStore store(dir.File("store"));
  std::string a = b.OciLayout({b.Layer({{.name = "a", .data = "a"}})}, Config(), "one:1");
  std::string c = b.OciLayout({b.Layer({{.name = "c", .data = "c"}})}, Config(), "two:1");
  std::string d = b.OciLayout({b.Layer({{.name = "d", .data = "d"}})}, Config(), "three:1");
  absl::StatusOr<ImageInfo> one = store.ImportArchive(a, "");
  absl::StatusOr<ImageInfo> two = store.ImportArchive(c, "");
  absl::StatusOr<ImageInfo> three = store.ImportArchive(d, "");
  ASSERT_TRUE(one.ok() && two.ok() && three.ok());
  // Untag two and three; a session still uses three. A crashed import left a directory.
  ASSERT_EQ(unlink(dir.File("store/refs/two%3A1").c_str()), 0);
  ASSERT_EQ(unlink(dir.File("store/refs/three%3A1").c_str()), 0);
  ASSERT_TRUE(MakeDirectories(dir.File("store/blobs/import.tmp-999999999-1"), 0700).ok());
  // Blobs made in the last ten minutes are kept (an import may be about to tag them): age two.
  std::string two_dir = DirName(two->rootfs_path);
  EXPECT_EQ(store.Prune({three->digest})->removed.size(), 0u);
  timespec old_times[2] = {{time(nullptr) - 3600, 0}, {time(nullptr) - 3600, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, two_dir.c_str(), old_times, 0), 0);
  absl::StatusOr<ImageStore::PruneResult> pruned = store.Prune({three->digest});
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(pruned->removed, std::vector<std::string>{two->digest});
  EXPECT_GT(pruned->freed_bytes, 0u);
  EXPECT_NE(access(two->rootfs_path.c_str(), F_OK), 0);
  EXPECT_EQ(access(one->rootfs_path.c_str(), F_OK), 0);
  EXPECT_EQ(access(three->rootfs_path.c_str(), F_OK), 0);
  EXPECT_NE(access(dir.File("store/blobs/import.tmp-999999999-1").c_str(), F_OK), 0);
}

TEST(OciArchiveTest, RemoveFreesAnImageWithItsLastTagUnlessASessionUsesIt) {
  TempDir dir;
  ArchiveBuilder b(dir);
  ImageStore store(dir.File("store"));
  std::string a = b.OciLayout({b.Layer({{.name = "a", .data = "a"}})}, Config(), "one:1");
  std::string c = b.OciLayout({b.Layer({{.name = "c", .data = "c"}})}, Config(), "two:1");
  absl::StatusOr<ImageInfo> one = store.ImportArchive(a, "");
  absl::StatusOr<ImageInfo> also_one = store.ImportArchive(a, "alias:1");
  absl::StatusOr<ImageInfo> two = store.ImportArchive(c, "");
  ASSERT_TRUE(one.ok() && also_one.ok() && two.ok());

  // Another tag still points at it: only the tag goes.
  absl::StatusOr<ImageStore::RemoveResult> r = store.Remove("alias:1", {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->digest, one->digest);
  EXPECT_FALSE(r->freed);
  EXPECT_FALSE(store.Resolve("alias:1").ok());
  EXPECT_EQ(access(one->rootfs_path.c_str(), F_OK), 0);
  // The last tag of an image a session uses: the files stay for the session.
  r = store.Remove("one:1", {one->digest});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->freed);
  EXPECT_EQ(access(one->rootfs_path.c_str(), F_OK), 0);
  EXPECT_TRUE(store.ResolveDigest("one:1", one->digest).ok());
  // The last tag of an image nothing uses: freed.
  r = store.Remove("two:1", {one->digest});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->freed);
  EXPECT_GT(r->freed_bytes, 0u);
  EXPECT_NE(access(two->rootfs_path.c_str(), F_OK), 0);
  EXPECT_EQ(store.List()->size(), 0u);
  EXPECT_EQ(store.Remove("two:1", {}).status().code(), absl::StatusCode::kNotFound);
}

TEST(OciArchiveTest, BadArchivesAreClearErrorsAndStoreNothing) {
  TempDir dir;
  ArchiveBuilder b(dir);
  std::string layer = b.Layer({{.name = "x", .data = "x"}});
  ImageStore store(dir.File("store"));
  struct Case {
    std::string archive;
    std::string expect;
  };
  std::string escaping = dir.File("escape.tar");
  WriteTar(escaping, {{.name = "../index.json", .data = "{}"}});
  std::string plain = dir.File("plain.tar");
  WriteTar(plain, {{.name = "etc/passwd", .data = "root"}});
  std::string dot_dot_layer =
      b.OciLayout({b.Layer({{.name = "../../evil", .data = "x"}})}, Config(), "bad:1");
  for (const Case& c : std::vector<Case>{
           {b.OciLayout({layer}, Config(), "t:1", /*tamper=*/true), "does not match its digest"},
           {b.OciLayout({layer}, Config(), "t:1", false, "arm64"), "no linux/amd64 variant"},
           {b.OciLayout({layer}, Config(), ""), "give one with --tag"},
           {escaping, "escape"},
           {plain, "neither an OCI image layout nor"},
           {dot_dot_layer, "escape"},
           {dir.File("missing.tar"), "cannot read"}}) {
    absl::StatusOr<ImageInfo> info = store.ImportArchive(c.archive, "");
    ASSERT_FALSE(info.ok()) << c.expect;
    EXPECT_NE(info.status().message().find(c.expect), std::string::npos) << info.status();
  }
  EXPECT_TRUE(store.List()->empty());
}

}  // namespace
}  // namespace airlock

namespace airlock {
namespace {

TEST(RegistryTest, PushPullByTagAndDigestAndRefuseATamperedBlob) {
  TempDir dir;
  testing::LocalRegistry registry(dir.File("registry"));
  ArchiveBuilder b(dir);
  std::string base = b.Layer({{.name = "etc/", .type = S_IFDIR, .mode = 0755},
                              {.name = "etc/motd", .data = "pulled"},
                              {.name = "srv/", .type = S_IFDIR, .mode = 0755}});
  std::string archive = b.OciLayout({base}, Config(), "x:1");
  absl::StatusOr<ArchiveImage> image = ReadImageArchive(archive, dir.File("members"));
  ASSERT_TRUE(image.ok()) << image.status();
  std::string tag = registry.Host() + "/team/app:1";
  absl::StatusOr<std::string> pushed =
      RegistryClient().Push(*ParseImageReference(tag), image->layers, image->config_json);
  ASSERT_TRUE(pushed.ok()) << pushed.status();

  ImageStore store(dir.File("store"));
  absl::StatusOr<ImageInfo> info = store.Pull(tag);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->digest, *pushed);
  EXPECT_EQ(Debugfs(info->rootfs_path, "cat /etc/motd"), "pulled");
  EXPECT_EQ(Digest(*ReadFileToString(DirName(info->rootfs_path) + "/manifest.json", 1 << 20)),
            *pushed);
  EXPECT_EQ(info->run.cmd, (std::vector<std::string>{"echo $GREETING"}));
  absl::StatusOr<ImageInfo> again = store.Pull(tag);  // already there: nothing downloaded
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->digest, info->digest);
  std::string by_digest = registry.Host() + "/team/app@" + *pushed;
  absl::StatusOr<ImageInfo> pinned = store.Pull(by_digest);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->digest, *pushed);

  // Errors: an unknown tag, a registry that is not there, a blob changed on the registry.
  absl::StatusOr<ImageInfo> missing = store.Pull(registry.Host() + "/team/app:nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  absl::StatusOr<ImageInfo> down = store.Pull("localhost:1/team/app:1");
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  std::string layer_digest = "sha256:" + *Sha256FileHex(image->layers[0]);
  std::string blob = registry.BlobFile(layer_digest);
  absl::StatusOr<std::string> bytes = ReadFileToString(blob, 64 << 20);
  ASSERT_TRUE(bytes.ok()) << blob;
  (*bytes)[bytes->size() / 2] ^= 1;
  ASSERT_TRUE(WriteFileAtomically(blob, *bytes, 0644).ok());
  ImageStore fresh(dir.File("fresh"));
  absl::StatusOr<ImageInfo> tampered = fresh.Pull(tag);
  EXPECT_EQ(tampered.status().code(), absl::StatusCode::kDataLoss) << tampered.status();
  EXPECT_NE(tampered.status().message().find("does not match its digest"), std::string::npos);
  EXPECT_TRUE(fresh.List()->empty());
}

TEST(RegistryTest, ReferencesParseLikeDockers) {
  absl::StatusOr<ImageReference> r = ParseImageReference("python:3.11-slim");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->registry, "registry-1.docker.io");
  EXPECT_EQ(r->repository, "library/python");
  EXPECT_EQ(r->tag, "3.11-slim");
  EXPECT_FALSE(r->insecure);
  r = ParseImageReference("ghcr.io/org/tool");
  EXPECT_EQ(r->registry, "ghcr.io");
  EXPECT_EQ(r->repository, "org/tool");
  EXPECT_EQ(r->tag, "latest");
  r = ParseImageReference("localhost:5000/team/app@sha256:" + std::string(64, 'a'));
  EXPECT_TRUE(r->insecure);
  EXPECT_TRUE(r->tag.empty());
  EXPECT_FALSE(ParseImageReference("UPPER/case").ok());
  EXPECT_FALSE(ParseImageReference("a@sha256:short").ok());
  EXPECT_FALSE(ParseImageReference("").ok());
}

// What a Dockerfile recorded goes into the config an image is saved or pushed with, as OCI
// writes it.
TEST(OciExportTest, TheConfigCarriesTheCommandAndWhatTheBuildRecorded) {
  ImageInfo image;
  image.name = "test/app:1";
  image.run.entrypoint = {"/app/run.sh"};
  image.run.cmd = {"--serve"};
  image.run.env = {"A=1"};
  image.run.working_dir = "/app";
  image.run.user = "nobody";
  image.recorded = {{"labels", {{"org.example.kind", "app"}}},
                    {"exposed_ports", {"8080", "53/udp"}},
                    {"volumes", {"/data"}},
                    {"stop_signal", "SIGINT"}};
  json config = OciConfigFor(image, "sha256:" + std::string(64, 'a'))["config"];
  EXPECT_EQ(config["Entrypoint"], json({"/app/run.sh"}));
  EXPECT_EQ(config["Cmd"], json({"--serve"}));
  EXPECT_EQ(config["Env"], json({"A=1"}));
  EXPECT_EQ(config["WorkingDir"], "/app");
  EXPECT_EQ(config["User"], "nobody");
  EXPECT_EQ(config["Labels"], json({{"org.example.kind", "app"}}));
  EXPECT_EQ(config["ExposedPorts"],
            json({{"8080/tcp", json::object()}, {"53/udp", json::object()}}));
  EXPECT_EQ(config["Volumes"], json({{"/data", json::object()}}));
  EXPECT_EQ(config["StopSignal"], "SIGINT");
}

}  // namespace
}  // namespace airlock
