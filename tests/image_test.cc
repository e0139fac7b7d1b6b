// OCI images as a user meets them: an image archive (here an OCI layout whose base layer is the
// default image's own root filesystem tar, plus layers of the test's) is imported and runs its
// own command with its own environment, working directory and user; pushed to a local
// registry, it runs by reference (pulled on first use) and pulls by digest. Hostile layer
// entries stay inside the image (checked from inside the guest), and `image rm`/`prune` free
// the space once no session uses an image.
#include <dirent.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "proto/airlock/v1/airlock.grpc.pb.h"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/common/sha256.h"
#include "src/common/subprocess.h"
#include "src/image/image_store.h"
#include "src/testing/local_registry.h"
#include "src/testing/test_util.h"
#include "tests/cli_runner.h"
#include "tests/small_home.h"

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
  std::string digest = file.empty() ? Sha256Hex(bytes) : *Sha256FileHex(file);
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

// Bytes that nothing can compress.
std::string Noise(size_t bytes) {
  std::string noise(bytes, '\0');
  for (size_t done = 0; done < noise.size();) {
    ssize_t n = getrandom(noise.data() + done, noise.size() - done, 0);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return noise;
}

// A work directory under /var/tmp (the rootfs cache's filesystem, so layers hard-link).
std::string WorkDir() {
  char tmpl[] = "/var/tmp/airlock-imagetest-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  return tmpl;
}

// Writes an OCI image layout tar at `out`: the default rootfs as the base layer (unless not
// `base`), then `layers` (tar files), with `config` as the image's config and `ref` as its name.
void WriteLayoutArchive(const std::string& work, const std::vector<std::string>& layers,
                        const json& run_config, const std::string& ref, const std::string& out,
                        bool base = true) {
  std::string layout = out + ".layout";
  ASSERT_TRUE(MakeDirectories(layout + "/blobs/sha256", 0755).ok());
  const char* kLayer = "application/vnd.oci.image.layer.v1.tar";
  json descriptors = json::array();
  if (base) {
    std::string rootfs = RootfsTar();
    ASSERT_FALSE(rootfs.empty()) << "run scripts/setup.sh first (it caches the rootfs tar)";
    descriptors.push_back(AddBlob(layout, kLayer, "", rootfs));
  }
  for (const std::string& layer : layers) descriptors.push_back(AddBlob(layout, kLayer, "", layer));
  json config = {{"architecture", "amd64"}, {"os", "linux"}, {"config", run_config}};
  json manifest = {
      {"schemaVersion", 2},
      {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
      {"config", AddBlob(layout, "application/vnd.oci.image.config.v1+json", config.dump())},
      {"layers", descriptors}};
  json descriptor = AddBlob(layout, "application/vnd.oci.image.manifest.v1+json", manifest.dump());
  descriptor["annotations"] = {{"org.opencontainers.image.ref.name", ref}};
  json index = {{"schemaVersion", 2}, {"manifests", {descriptor}}};
  ASSERT_TRUE(WriteFileAtomically(layout + "/index.json", index.dump(), 0644).ok());
  ASSERT_TRUE(
      WriteFileAtomically(layout + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})", 0644).ok());
  Tar(out, layout);
  RemoveTree(layout).IgnoreError();
}

// The image store's disk runs full: an import is refused and says so, and the store is as it
// was (no partial image, no work left behind, the space given back); with room, it imports.
TEST(ImageTest, AnImportThatFindsNoRoomLeavesTheStoreAsItWas) {
  std::string work = WorkDir();
  ASSERT_TRUE(MakeDirectories(work + "/big/srv", 0755).ok());
  std::string noise = Noise(24 << 20);
  ASSERT_TRUE(WriteFileAtomically(work + "/big/srv/noise", noise, 0644).ok());
  Tar(work + "/big.tar", work + "/big");
  WriteLayoutArchive(work, {work + "/big.tar"}, {{"Cmd", {"true"}}}, "airlock-test/big:1",
                     work + "/big-image.tar", /*base=*/false);
  {
    SmallHome home(160, /*shared_images=*/false);
    ASSERT_EQ(RunAirlock({"image", "ls"}).exit_code, 0);  // its airlockd is up
    home.Fill(12);
    int64_t before = home.FreeBytes();
    Result r = RunAirlock({"image", "import", work + "/big-image.tar"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
    EXPECT_GE(home.FreeBytes(), before - (2 << 20));
    EXPECT_EQ(RunAirlock({"image", "ls"}).out.find("airlock-test/big"), std::string::npos);
    absl::StatusOr<ProcessResult> left =
        RunProcess({"/usr/bin/find", home.path() + "/images", "-name", "*.tmp*"});
    ASSERT_TRUE(left.ok());
    EXPECT_EQ(left->output, "");
    home.Free();
    r = RunAirlock({"image", "import", work + "/big-image.tar"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  RemoveTree(work).IgnoreError();
}

// The same for a Dockerfile build (issue 44: every write point): refused with what ran out and
// what to do, nothing of it left (no image, no temporary file), the space given back; with room,
// it builds.
TEST(ImageTest, ABuildThatFindsNoRoomLeavesTheStoreAsItWas) {
  std::string work = WorkDir();
  ASSERT_TRUE(MakeDirectories(work + "/ctx", 0755).ok());
  std::string noise = Noise(24 << 20);
  ASSERT_TRUE(WriteFileAtomically(work + "/ctx/noise", noise, 0644).ok());
  ASSERT_TRUE(
      WriteFileAtomically(work + "/ctx/Dockerfile", "FROM scratch\nCOPY noise /srv/noise\n", 0644)
          .ok());
  {
    SmallHome home(160, /*shared_images=*/false);
    ASSERT_EQ(RunAirlock({"image", "ls"}).exit_code, 0);  // its airlockd is up
    // No room for the context itself (24 MiB in 12), then room for it but not for the layer
    // and the image the build makes of it (in 40).
    for (int room : {12, 40}) {
      home.Fill(room);
      int64_t before = home.FreeBytes();
      Result r = RunAirlock({"image", "build", "-t", "airlock-test/full:1", work + "/ctx"});
      EXPECT_NE(r.exit_code, 0) << room;
      EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << room << r.err;
      EXPECT_NE(r.err.find("free some space there"), std::string::npos) << room << r.err;
      EXPECT_GE(home.FreeBytes(), before - (2 << 20)) << room;
      EXPECT_EQ(RunAirlock({"image", "ls"}).out.find("airlock-test/full"), std::string::npos);
      absl::StatusOr<ProcessResult> left =
          RunProcess({"/usr/bin/find", home.path(), "-name", "*.tmp*"});
      ASSERT_TRUE(left.ok());
      EXPECT_EQ(left->output, "") << room;
      home.Free();
    }
    Result r = RunAirlock({"image", "build", "-t", "airlock-test/full:1", work + "/ctx"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(RunAirlock({"image", "ls"}).out.find("airlock-test/full"), std::string::npos);
  }
  RemoveTree(work).IgnoreError();
}

TEST(ImageTest, AnOciArchiveRunsItsOwnCommandWithItsEnvironment) {
  std::string work = WorkDir();
  ASSERT_TRUE(MakeDirectories(work + "/top/srv", 0755).ok());
  ASSERT_TRUE(MakeDirectories(work + "/top/etc", 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(work + "/top/srv/hello", "hi from a layer\n", 0644).ok());
  ASSERT_TRUE(WriteFileAtomically(work + "/top/etc/.wh.debian_version", "", 0644).ok());
  Tar(work + "/top.tar", work + "/top");
  WriteLayoutArchive(work, {work + "/top.tar"},
                     {{"Env", {"PATH=/usr/bin:/bin", "GREETING=hello-oci"}},
                      {"Entrypoint", {"sh", "-c"}},
                      {"Cmd", {"echo $GREETING from $(pwd); cat hello"}},
                      {"WorkingDir", "/srv"}},
                     "airlock-test/oci:1", work + "/image.tar");

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
    // A Dockerfile builds on it, FROM the registry (pulled on first use): what its RUN wrote
    // is there, and it keeps the base's Entrypoint, Cmd, Env and WorkingDir.
    {
      testing::TempDir context;
      ASSERT_TRUE(WriteFileAtomically(context.File("Dockerfile"),
                                      "FROM " + ref + "\nRUN echo built on it > /srv/built\n", 0644)
                      .ok());
      Result built = RunAirlock({"image", "build", "-t", "airlock-test/on-oci:1", context.path()});
      ASSERT_EQ(built.exit_code, 0) << built.err;
      Result on = RunAirlock({"run", "airlock-test/on-oci:1"});
      EXPECT_EQ(on.out, "hello-oci from /srv\nhi from a layer\n") << on.err;
      on = RunAirlock({"run", "airlock-test/on-oci:1", "--", "cat", "/srv/built"});
      EXPECT_EQ(on.out, "built on it\n") << on.err;
      EXPECT_EQ(RunAirlock({"image", "rm", "airlock-test/on-oci:1", ref}).exit_code, 0);
    }
    // A user who cannot write the image store: airlockd would pull it on first use, but never
    // from the host's loopback (or private networks) for anyone but root.
    RunAs alice{61001, 61001};
    r = RunAirlock({"session", "create", ref}, "", alice);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("AIRLOCK_REGISTRY_ALLOW_INTERNAL"), std::string::npos) << r.err;
    std::vector<std::string> audit = AuditRows();
    EXPECT_NE(std::find(audit.begin(), audit.end(), "uid:61001/gid:61001 image.pull " + ref),
              audit.end());
    // Through the API, a pull streams its progress, then the image.
    {
      auto channel = grpc::CreateChannel(std::string("unix:") + getenv("AIRLOCK_SOCKET"),
                                         grpc::InsecureChannelCredentials());
      auto images = v1::Images::NewStub(channel);
      grpc::ClientContext context;
      v1::PullImageRequest request;
      request.set_reference(ref);
      auto stream = images->Pull(&context, request);
      v1::ImageProgress progress;
      uint64_t done = 0, total = 0;
      v1::Image image;
      while (stream->Read(&progress)) {
        if (progress.has_image()) {
          image = progress.image();
        } else {
          EXPECT_GE(progress.done_bytes(), done);
          done = progress.done_bytes();
          total = progress.total_bytes();
        }
      }
      ASSERT_TRUE(stream->Finish().ok());
      EXPECT_GT(total, 0u);
      EXPECT_EQ(done, total);
      EXPECT_EQ(image.name(), ref);
      EXPECT_EQ(image.digest().rfind("sha256:", 0), 0u);
      EXPECT_NE(image.source().find("airlock-test/oci"), std::string::npos) << image.source();
    }
    // Root's CLI has airlockd pull it (with a progress bar on a terminal), then runs it.
    r = RunAirlock({"run", ref});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "hello-oci from /srv\nhi from a layer\n");
    // In the store, it is there for everyone.
    r = RunAirlock({"session", "create", ref}, "", alice);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string id = r.out.substr(0, r.out.find('\n'));
    r = RunAirlock({"exec", id, "--", "cat", "/srv/hello"}, "", alice);
    EXPECT_EQ(r.out, "hi from a layer\n") << r.err;
    EXPECT_EQ(RunAirlock({"rm", id}, "", alice).exit_code, 0);
    r = RunAirlock({"image", "pull", registry.Host() + "/airlock-test/oci@" + digest});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(digest), std::string::npos) << r.out;
    r = RunAirlock({"image", "pull", registry.Host() + "/airlock-test/oci:missing"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("was not found"), std::string::npos) << r.err;
    RunAirlock({"image", "rm", ref, registry.Host() + "/airlock-test/oci@" + digest});
  }
  // Another user imports through airlockd too: the image is theirs alone.
  RunAs carol{61005, 61005}, dave{61006, 61006};
  chmod(work.c_str(), 0755);
  chmod((work + "/image.tar").c_str(), 0644);
  r = RunAirlock({"image", "import", work + "/image.tar", "--tag", "carol/oci:1"}, "", carol);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("carol/oci:1 sha256:", 0), 0u) << r.out;
  EXPECT_NE(RunAirlock({"image", "ls"}, "", carol).out.find("carol/oci:1"), std::string::npos);
  EXPECT_EQ(RunAirlock({"image", "ls"}, "", dave).out.find("carol/oci:1"), std::string::npos);
  EXPECT_EQ(RunAirlock({"image", "ls"}).out.find("carol/oci:1"), std::string::npos);
  r = RunAirlock({"run", "carol/oci:1"}, "", carol);
  EXPECT_EQ(r.out, "hello-oci from /srv\nhi from a layer\n") << r.err;
  r = RunAirlock({"run", "carol/oci:1"}, "", dave);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("carol/oci:1"), std::string::npos) << r.err;
  r = RunAirlock({"image", "import", work + "/missing.tar"}, "", carol);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("No such file"), std::string::npos) << r.err;

  RemoveTree(work).IgnoreError();
}

TEST(ImageTest, TheImageUserRunsCommandsAndHostileEntriesStayInside) {
  std::string work = WorkDir();
  // A file on the host that a layer's symlink names: the guest must not see it.
  std::string secret = work + "/host-secret";
  ASSERT_TRUE(WriteFileAtomically(secret, "host only\n", 0600).ok());
  using testing::TarEntry;
  testing::WriteTar(work + "/hostile.tar",
                    {{.name = "/abs-marker", .data = "absolute\n"},
                     {.name = "escape", .type = S_IFLNK, .data = "../../../../../../../"},
                     {.name = "hostfile", .type = S_IFLNK, .data = secret},
                     {.name = "linked", .data = "abs-marker", .hardlink = true},
                     {.name = "devnull2", .type = S_IFCHR, .mode = 0666},
                     {.name = "setuid", .data = "#!/bin/sh\nid -u\n", .mode = 04755}},
                    testing::Compression::kZstd);
  WriteLayoutArchive(work, {work + "/hostile.tar"}, {{"User", "nobody"}, {"Cmd", {"id", "-u"}}},
                     "airlock-test/user:1", work + "/image.tar");
  Result r = RunAirlock({"image", "import", work + "/image.tar"});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // The image's User runs its command, with that user's HOME; --user overrides it.
  r = RunAirlock({"run", "airlock-test/user:1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "65534\n");
  r = RunAirlock({"run", "airlock-test/user:1", "--", "sh", "-c", "echo $HOME $(id -g)"});
  EXPECT_EQ(r.out, "/nonexistent 65534\n");
  r = RunAirlock({"run", "--user", "0:100", "airlock-test/user:1", "--", "sh", "-c",
                  "echo $(id -u) $(id -g)"});
  EXPECT_EQ(r.out, "0 100\n") << r.err;
  r = RunAirlock({"run", "-u", "1234:4321", "airlock-test/user:1", "--", "sh", "-c",
                  "echo $(id -u) $(id -g) $HOME"});
  EXPECT_EQ(r.out, "1234 4321 /\n");
  r = RunAirlock({"run", "-u", "ghost", "airlock-test/user:1", "--", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("user ghost is not in the image's /etc/passwd"), std::string::npos) << r.err;
  // The user cannot write what root owns.
  r = RunAirlock(
      {"run", "airlock-test/user:1", "--", "sh", "-c", "touch /etc/x 2>/dev/null; echo $?"});
  EXPECT_EQ(r.out, "1\n");

  // Inside the guest: the absolute path landed in the image's root, the symlinks resolve
  // inside the guest (".." of / is /), the hard link is the same file, the device is one.
  r = RunAirlock({"run", "-u", "0", "airlock-test/user:1", "--", "sh", "-c",
                  "cat /abs-marker /escape/abs-marker; readlink /hostfile;"
                  "cat /hostfile 2>/dev/null || echo not-here;"
                  "[ $(stat -c %i /abs-marker) = $(stat -c %i /linked) ] && echo same-inode;"
                  "stat -c '%F %t,%T' /devnull2; stat -c %a /setuid"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("absolute\nabsolute\n", secret, "\nnot-here\nsame-inode\n",
                                "character special file 1,3\n4755\n"));
  // And on the host nothing was written outside the store.
  EXPECT_NE(access("/abs-marker", F_OK), 0);
  EXPECT_EQ(*ReadFileToString(secret, 100), "host only\n");

  EXPECT_EQ(RunAirlock({"image", "rm", "airlock-test/user:1"}).exit_code, 0);
  RemoveTree(work).IgnoreError();
}

// The blob directory of an image in this test's store ("" once it is gone).
std::string BlobDir(const std::string& digest) {
  std::string dir = DefaultHostPaths().images + "/blobs/" + digest.substr(7);
  return access(dir.c_str(), F_OK) == 0 ? dir : "";
}

TEST(ImageTest, RmAndPruneFreeTheSpaceOnceNoSessionUsesAnImage) {
  std::string work = WorkDir();
  ASSERT_TRUE(MakeDirectories(work + "/top", 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(work + "/top/marker", "rm test\n", 0644).ok());
  Tar(work + "/top.tar", work + "/top");
  WriteLayoutArchive(work, {work + "/top.tar"}, {{"Cmd", {"cat", "/marker"}}}, "airlock-test/rm:1",
                     work + "/image.tar");
  Result r = RunAirlock({"image", "import", work + "/image.tar"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string digest = r.out.substr(r.out.find(" sha256:") + 1);
  digest = digest.substr(0, digest.find('\n'));
  ASSERT_FALSE(BlobDir(digest).empty());

  // Nothing uses it: rm frees it at once.
  r = RunAirlock({"image", "rm", "airlock-test/rm:1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("removed " + digest), std::string::npos) << r.out;
  EXPECT_TRUE(BlobDir(digest).empty());
  r = RunAirlock({"image", "rm", "airlock-test/rm:1", "airlock/bookworm-python"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("airlock image ls"), std::string::npos) << r.err;
  EXPECT_EQ(RunAirlock({"run", "--", "true"}).exit_code, 0);  // the typo removed nothing

  // A paused session uses it: rm untags it, the files stay, the session resumes and runs.
  ASSERT_EQ(RunAirlock({"image", "import", work + "/image.tar"}).exit_code, 0);
  r = RunAirlock({"session", "create", "airlock-test/rm:1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string id = r.out.substr(0, r.out.find('\n'));
  ASSERT_EQ(RunAirlock({"pause", id}).exit_code, 0);
  r = RunAirlock({"image", "rm", "airlock-test/rm:1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kept " + digest + ": 1 session"), std::string::npos) << r.out;
  r = RunAirlock({"image", "prune"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find(digest), std::string::npos) << r.out;
  ASSERT_FALSE(BlobDir(digest).empty());
  r = RunAirlock({"exec", id, "--", "cat", "/marker"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "rm test\n");

  // Once the session is gone, prune frees it (blobs younger than ten minutes are kept for
  // imports about to tag them, so age it first).
  ASSERT_EQ(RunAirlock({"rm", id}).exit_code, 0);
  timespec old_times[2] = {{time(nullptr) - 3600, 0}, {time(nullptr) - 3600, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, BlobDir(digest).c_str(), old_times, 0), 0);
  r = RunAirlock({"image", "prune"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("removed " + digest), std::string::npos) << r.out;
  EXPECT_TRUE(BlobDir(digest).empty());
  RemoveTree(work).IgnoreError();
}

}  // namespace
}  // namespace airlock
