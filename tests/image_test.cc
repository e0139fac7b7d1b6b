// OCI images as a user meets them: an image archive (here an OCI layout whose base layer is the
// default image's own root filesystem tar, plus a layer with a file and a whiteout) is imported
// and runs its own command with its own environment and working directory; pushed to a local
// registry, it runs by reference (pulled on first use) and pulls by digest.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/common/file_util.h"
#include "src/common/subprocess.h"
#include "src/image/image_store.h"
#include "src/testing/local_registry.h"
#include "tests/cli_runner.h"

namespace airlock {
namespace {

using json = nlohmann::json;

// The default image's root filesystem tar, cached by scripts/setup.sh.
std::string RootfsTar() {
  std::string dir = "/var/cache/airlock/rootfs";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return "";
  std::string found;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > 4 && name.substr(name.size() - 4) == ".tar") found = dir + "/" + name;
  }
  closedir(d);
  return found;
}

void Tar(const std::string& out, const std::string& dir) {
  absl::StatusOr<ProcessResult> r = RunProcess({"/bin/tar", "-cf", out, "-C", dir, "."});
  ASSERT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->output : r.status().ToString());
}

// Puts bytes (or a file, by hard link) into an OCI layout as a blob; returns its descriptor.
json AddBlob(const std::string& layout, const std::string& media_type, const std::string& bytes,
             const std::string& file = "") {
  std::string digest = file.empty() ? Sha256String(bytes) : *Sha256File(file);
  std::string path = layout + "/blobs/sha256/" + digest;
  if (file.empty()) {
    EXPECT_TRUE(WriteFileAtomically(path, bytes, 0644).ok());
  } else {
    EXPECT_EQ(link(file.c_str(), path.c_str()), 0);
  }
  struct stat st;
  stat(path.c_str(), &st);
  return {{"mediaType", media_type},
          {"digest", "sha256:" + digest},
          {"size", static_cast<uint64_t>(st.st_size)}};
}

TEST(ImageTest, AnOciArchiveRunsItsOwnCommandWithItsEnvironment) {
  std::string rootfs = RootfsTar();
  ASSERT_FALSE(rootfs.empty()) << "run scripts/setup.sh first (it caches the rootfs tar)";
  char tmpl[] = "/var/tmp/airlock-imagetest-XXXXXX";  // same filesystem as the cache: hard links
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string work = tmpl;
  std::string layout = work + "/layout";
  ASSERT_TRUE(MakeDirectories(layout + "/blobs/sha256", 0755).ok());
  ASSERT_TRUE(MakeDirectories(work + "/top/srv", 0755).ok());
  ASSERT_TRUE(MakeDirectories(work + "/top/etc", 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(work + "/top/srv/hello", "hi from a layer\n", 0644).ok());
  ASSERT_TRUE(WriteFileAtomically(work + "/top/etc/.wh.debian_version", "", 0644).ok());
  Tar(work + "/top.tar", work + "/top");

  const char* kLayer = "application/vnd.oci.image.layer.v1.tar";
  json layers = {AddBlob(layout, kLayer, "", rootfs),
                 AddBlob(layout, kLayer, "", work + "/top.tar")};
  json config = {{"architecture", "amd64"},
                 {"os", "linux"},
                 {"config",
                  {{"Env", {"PATH=/usr/bin:/bin", "GREETING=hello-oci"}},
                   {"Entrypoint", {"sh", "-c"}},
                   {"Cmd", {"echo $GREETING from $(pwd); cat hello"}},
                   {"WorkingDir", "/srv"}}}};
  json manifest = {
      {"schemaVersion", 2},
      {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
      {"config", AddBlob(layout, "application/vnd.oci.image.config.v1+json", config.dump())},
      {"layers", layers}};
  json descriptor = AddBlob(layout, "application/vnd.oci.image.manifest.v1+json", manifest.dump());
  descriptor["annotations"] = {{"org.opencontainers.image.ref.name", "airlock-test/oci:1"}};
  json index = {{"schemaVersion", 2}, {"manifests", {descriptor}}};
  ASSERT_TRUE(WriteFileAtomically(layout + "/index.json", index.dump(), 0644).ok());
  ASSERT_TRUE(
      WriteFileAtomically(layout + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})", 0644).ok());
  Tar(work + "/image.tar", layout);

  Result r = RunAirlock({"image", "import", work + "/image.tar"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("airlock-test/oci:1 sha256:", 0), 0u) << r.out;

  // No command: the image's Entrypoint + Cmd, in its WorkingDir, with its Env.
  r = RunAirlock({"run", "airlock-test/oci:1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello-oci from /srv\nhi from a layer\n");
  // -e overrides the image's Env; a command replaces Entrypoint and Cmd.
  r = RunAirlock({"run", "-e", "GREETING=override", "airlock-test/oci:1"});
  EXPECT_EQ(r.out, "override from /srv\nhi from a layer\n");
  r = RunAirlock({"run", "airlock-test/oci:1", "--", "sh", "-c",
                  "test -e /etc/debian_version; echo $? $(cat /etc/hostname 2>/dev/null | wc -c)"});
  EXPECT_EQ(r.out.substr(0, 2), "1 ") << r.out;  // the whiteout removed it
  // An image without a command of its own says so.
  r = RunAirlock({"run", "airlock/bookworm-python"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("names none"), std::string::npos) << r.err;

  EXPECT_EQ(RunAirlock({"image", "rm", "airlock-test/oci:1"}).exit_code, 0);

  // Through a registry: push the archive, run it by reference (airlockd pulls it on first use),
  // pull it by digest.
  {
    testing::LocalRegistry registry(work + "/registry");
    std::string ref = registry.Host() + "/airlock-test/oci:1";
    r = RunAirlock({"image", "push", work + "/image.tar", ref});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string digest = r.out.substr(r.out.find(" sha256:") + 1);
    digest = digest.substr(0, digest.find('\n'));
    r = RunAirlock({"run", ref});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "hello-oci from /srv\nhi from a layer\n");
    r = RunAirlock({"image", "pull", registry.Host() + "/airlock-test/oci@" + digest});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(digest), std::string::npos) << r.out;
    r = RunAirlock({"image", "pull", registry.Host() + "/airlock-test/oci:missing"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("was not found"), std::string::npos) << r.err;
    RunAirlock({"image", "rm", ref, registry.Host() + "/airlock-test/oci@" + digest});
  }
  RemoveTree(work).IgnoreError();
}

}  // namespace
}  // namespace airlock
