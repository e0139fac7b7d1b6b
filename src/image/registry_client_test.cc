// How pulls cope with a registry that fails (src/testing/fake_registry.h): server errors are
// retried with backoff, a hang or a cut-off download is given up on with a clear error, and
// whatever happens — also a pull killed mid-way — no half image is ever visible in the store;
// and the ways registries ask for logins (anonymous tokens, basic, tokens for a login).
#include "src/image/registry_client.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/common/file_util.h"
#include "src/image/image_store.h"
#include "src/testing/fake_registry.h"
#include "src/testing/test_util.h"

extern char** environ;

namespace airlock {
namespace {

using testing::FakeRegistry;
using testing::TempDir;

// A layer tar's bytes: one file, `size` bytes of noise (so compression cannot shrink it).
std::string Layer(TempDir& dir, const std::string& name, size_t size) {
  std::mt19937 random(static_cast<unsigned>(size));
  std::string noise(size, '\0');
  for (char& c : noise) c = static_cast<char>(random());
  std::string path = dir.File(name + ".tar");
  testing::WriteTar(path, {{.name = name, .data = noise}});
  return *ReadFileToString(path, 64 << 20);
}

std::string Config() {
  return nlohmann::json({{"architecture", "amd64"},
                         {"os", "linux"},
                         {"config", {{"Cmd", {"true"}}}},
                         {"rootfs", {{"type", "layers"}}}})
      .dump();
}

// Names in the store's blobs/ that are work in progress.
std::vector<std::string> Leftovers(const std::string& store) {
  std::vector<std::string> out;
  if (DIR* d = opendir((store + "/blobs").c_str())) {
    while (dirent* e = readdir(d)) {
      if (std::string(e->d_name).find(".tmp-") != std::string::npos) out.push_back(e->d_name);
    }
    closedir(d);
  }
  return out;
}

// Sets an environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(RegistryFaultTest, ServerErrorsAreRetriedAndThenReportedWithNothingStored) {
  TempDir dir;
  FakeRegistry registry;
  std::string digest = registry.AddImage("team/app", "1", {Layer(dir, "a", 1000)}, Config());
  std::string ref = registry.Host() + "/team/app:1";

  // Two 500s, then a healthy registry: the pull goes through.
  registry.SetFaults({.fail_first = 2});
  ImageStore store(dir.File("store"));
  absl::StatusOr<ImageInfo> info = store.Pull(ref);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->digest, digest);
  EXPECT_GE(registry.requests(), 2 + 3);  // the failures, manifest, config, layer

  // Nothing but 500s: a clear error after the retries, and nothing in the store.
  registry.SetFaults({.fail_always = true});
  ImageStore fresh(dir.File("fresh"));
  absl::StatusOr<ImageInfo> failed = fresh.Pull(ref);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(failed.status().message().find("answered HTTP 500"), std::string::npos)
      << failed.status();
  EXPECT_NE(failed.status().message().find("tried 4 times"), std::string::npos);
  EXPECT_TRUE(fresh.List()->empty());
  EXPECT_TRUE(Leftovers(dir.File("fresh")).empty());
}

TEST(RegistryFaultTest, AHangingOrCutOffDownloadIsGivenUpOnWithNothingStored) {
  TempDir dir;
  FakeRegistry registry;
  registry.AddImage("team/app", "1", {Layer(dir, "a", 100000)}, Config());
  std::string ref = registry.Host() + "/team/app:1";
  ScopedEnv timeout("AIRLOCK_REGISTRY_TIMEOUT", "1");
  ImageStore store(dir.File("store"));

  registry.SetFaults({.hang_blobs = true});
  absl::StatusOr<ImageInfo> hung = store.Pull(ref);
  ASSERT_FALSE(hung.ok());
  EXPECT_EQ(hung.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(hung.status().message().find("cannot reach " + registry.Host()), std::string::npos)
      << hung.status();
  EXPECT_TRUE(store.List()->empty());
  EXPECT_TRUE(Leftovers(dir.File("store")).empty());

  registry.SetFaults({.truncate_blobs = true});
  absl::StatusOr<ImageInfo> cut = store.Pull(ref);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kUnavailable) << cut.status();
  EXPECT_TRUE(store.List()->empty());
  EXPECT_TRUE(Leftovers(dir.File("store")).empty());

  // Healthy again: the same store pulls it.
  registry.SetFaults({});
  EXPECT_TRUE(store.Pull(ref).ok());
}

TEST(RegistryFaultTest, APullKilledMidwayLeavesNoImageAndTheNextPullCompletes) {
  TempDir dir;
  FakeRegistry registry;
  registry.AddImage("team/app", "1", {Layer(dir, "big", 4 << 20)}, Config());
  std::string ref = registry.Host() + "/team/app:1";
  std::string home = dir.File("home");
  ASSERT_TRUE(MakeDirectories(home, 0755).ok());
  registry.SetFaults({.blob_bytes_per_second = 1 << 20});

  // A pull in a process of its own (as airlockd is), killed once the layer is coming in.
  std::string store_dir = home + "/images";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    _exit(ImageStore(store_dir).Pull(ref).ok() ? 0 : 1);
  }
  bool downloading = false;
  for (int i = 0; i < 400 && !downloading; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (const std::string& name : Leftovers(store_dir)) {
      std::string work = store_dir + "/blobs/" + name;
      if (DIR* d = opendir(work.c_str())) {
        while (dirent* e = readdir(d)) {
          struct stat st;
          if (e->d_name[0] != '.' && stat((work + "/" + e->d_name).c_str(), &st) == 0 &&
              st.st_size > (256 << 10)) {
            downloading = true;
          }
        }
        closedir(d);
      }
    }
  }
  ASSERT_TRUE(downloading) << "the pull never got to the layer";
  kill(pid, SIGKILL);
  int status;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));

  ImageStore store(store_dir);
  EXPECT_TRUE(store.List()->empty());
  EXPECT_EQ(store.Resolve(ref).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(Leftovers(store_dir).empty());  // the dead pull's work

  registry.SetFaults({});
  absl::StatusOr<ImageInfo> info = store.Pull(ref);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(store.List()->size(), 1u);
  // Prune clears what the killed process left; the new image stays.
  ASSERT_TRUE(store.Prune({}).ok());
  EXPECT_TRUE(Leftovers(store_dir).empty());
  EXPECT_TRUE(store.Resolve(ref).ok());
}

TEST(RegistryFaultTest, ABlobIsNeverMoreThanItsDescriptorSaysAndAPullHasACap) {
  TempDir dir;
  FakeRegistry registry;
  std::string layer = Layer(dir, "a", 5000);
  std::string digest = registry.AddImage("team/app", "v1", {layer}, Config());
  const std::string path = "/v2/team/app/manifests/";
  // The same image with a manifest that says its layer is empty: once, a size of 0 meant "no
  // limit" and the whole layer came down.
  nlohmann::json manifest = nlohmann::json::parse(registry.Served(path + digest));
  manifest["layers"][0]["size"] = 0;
  registry.SetObject(path + "zero", "application/vnd.oci.image.manifest.v1+json", manifest.dump());
  ImageStore store(dir.File("store"));
  absl::StatusOr<ImageInfo> zero = store.Pull(registry.Host() + "/team/app:zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_TRUE(store.List()->empty());
  // A pull quota below the image's size refuses it before anything is downloaded.
  absl::StatusOr<ImageInfo> capped =
      store.Pull(registry.Host() + "/team/app:v1", nullptr, {.max_bytes = 4000});
  EXPECT_EQ(capped.status().code(), absl::StatusCode::kResourceExhausted) << capped.status();
  EXPECT_NE(capped.status().message().find("more than this pull may take: 4000 bytes"),
            std::string::npos)
      << capped.status();
  EXPECT_TRUE(store.Pull(registry.Host() + "/team/app:v1", nullptr, {.max_bytes = 1 << 20}).ok());
  EXPECT_TRUE(Leftovers(dir.File("store")).empty());
}

TEST(RegistryFaultTest, AManifestOrIndexThatDoesNotMatchItsDigestIsRefused) {
  TempDir dir;
  FakeRegistry registry;
  std::string a = registry.AddImage("team/app", "a", {Layer(dir, "a", 100)}, Config());
  std::string b = registry.AddImage("team/app", "b", {Layer(dir, "b", 200)}, Config());
  const std::string manifests = "/v2/team/app/manifests/";
  std::string b_manifest = registry.Served(manifests + b);
  // Asked for a by digest, the registry answers with b's manifest.
  registry.SetObject(manifests + a, "application/vnd.oci.image.manifest.v1+json", b_manifest);
  ImageStore store(dir.File("store"));
  absl::StatusOr<ImageInfo> lied = store.Pull(registry.Host() + "/team/app@" + a);
  ASSERT_FALSE(lied.ok());
  EXPECT_EQ(lied.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(lied.status().message().find("has digest " + b), std::string::npos) << lied.status();
  // An index naming a's digest for linux/amd64, with the same lie behind it.
  nlohmann::json index = {{"schemaVersion", 2},
                          {"mediaType", "application/vnd.oci.image.index.v1+json"},
                          {"manifests",
                           {{{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                             {"digest", a},
                             {"size", b_manifest.size()},
                             {"platform", {{"os", "linux"}, {"architecture", "amd64"}}}}}}};
  registry.SetObject(manifests + "multi", "application/vnd.oci.image.index.v1+json", index.dump());
  lied = store.Pull(registry.Host() + "/team/app:multi");
  EXPECT_EQ(lied.status().code(), absl::StatusCode::kDataLoss) << lied.status();
  EXPECT_TRUE(store.List()->empty());
  EXPECT_TRUE(Leftovers(dir.File("store")).empty());
}

TEST(RegistryAuthTest, AnonymousTokensBasicLoginsAndTokensForLoginsWork) {
  TempDir dir;
  FakeRegistry registry;
  registry.AddImage("team/app", "1", {Layer(dir, "a", 100)}, Config());
  std::string ref = registry.Host() + "/team/app:1";
  int stores = 0;
  auto pull = [&] { return ImageStore(dir.File("store" + std::to_string(stores++))).Pull(ref); };
  ScopedEnv no_file("AIRLOCK_REGISTRY_AUTH_FILE", dir.File("no-such-auth.json").c_str());

  // Docker Hub's way for public images: a token asked for without credentials, and blobs
  // served from elsewhere by redirect.
  registry.SetAuth(FakeRegistry::Auth::kAnonymousBearer);
  registry.SetFaults({.redirect_blobs = true});
  absl::StatusOr<ImageInfo> info = pull();
  EXPECT_TRUE(info.ok()) << info.status();
  registry.SetFaults({});

  // Basic logins: none given is an error that says how to log in; the environment's work.
  registry.SetAuth(FakeRegistry::Auth::kBasic, "robot:s3cret");
  info = pull();
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(info.status().message().find("needs a login: set AIRLOCK_REGISTRY_USER"),
            std::string::npos)
      << info.status();
  {
    // The environment's login goes only to the registry it names.
    ScopedEnv user("AIRLOCK_REGISTRY_USER", "robot");
    ScopedEnv password("AIRLOCK_REGISTRY_PASSWORD", "s3cret");
    {
      ScopedEnv host("AIRLOCK_REGISTRY_HOST", "registry.example.com");
      info = pull();
      EXPECT_NE(info.status().message().find("needs a login"), std::string::npos) << info.status();
    }
    ScopedEnv host("AIRLOCK_REGISTRY_HOST", registry.Host().c_str());
    info = pull();
    EXPECT_TRUE(info.ok()) << info.status();
    // A pull for another user through airlockd never uses the host's logins.
    info = ImageStore(dir.File("store-tenant")).Pull(ref, nullptr, {.use_credentials = false});
    EXPECT_EQ(info.status().code(), absl::StatusCode::kPermissionDenied) << info.status();
    EXPECT_NE(info.status().message().find("does not use the host's registry logins"),
              std::string::npos)
        << info.status();
  }
  {
    ScopedEnv user("AIRLOCK_REGISTRY_USER", "robot");
    ScopedEnv password("AIRLOCK_REGISTRY_PASSWORD", "wrong");
    ScopedEnv host("AIRLOCK_REGISTRY_HOST", registry.Host().c_str());
    info = pull();
    EXPECT_EQ(info.status().code(), absl::StatusCode::kPermissionDenied) << info.status();
  }

  // A token for a login, the login from the credentials file.
  registry.SetAuth(FakeRegistry::Auth::kBearerWithLogin, "robot:s3cret");
  info = pull();
  EXPECT_EQ(info.status().code(), absl::StatusCode::kPermissionDenied) << info.status();
  EXPECT_NE(info.status().message().find("refused a token"), std::string::npos) << info.status();
  std::string auth_file = dir.File("auth.json");
  ASSERT_TRUE(WriteFileAtomically(auth_file,
                                  nlohmann::json({{registry.Host(), "robot:s3cret"}}).dump(), 0600)
                  .ok());
  ScopedEnv file("AIRLOCK_REGISTRY_AUTH_FILE", auth_file.c_str());
  info = pull();
  EXPECT_TRUE(info.ok()) << info.status();
}

TEST(RegistryAccessTest, PullsForOtherUsersDoNotReachInternalAddresses) {
  TempDir dir;
  FakeRegistry registry;  // on 127.0.0.1
  registry.AddImage("team/app", "1", {Layer(dir, "a", 100)}, Config());
  std::string ref = registry.Host() + "/team/app:1";
  absl::StatusOr<ImageInfo> info =
      ImageStore(dir.File("store")).Pull(ref, nullptr, {.internal_addresses = false});
  EXPECT_EQ(info.status().code(), absl::StatusCode::kPermissionDenied) << info.status();
  EXPECT_NE(info.status().message().find("refused to reach " + registry.Host() + " at 127.0.0.1"),
            std::string::npos)
      << info.status();
  EXPECT_TRUE(Leftovers(dir.File("store")).empty());
  // The operator's own pulls reach it.
  EXPECT_TRUE(ImageStore(dir.File("store")).Pull(ref).ok());

  for (const char* internal :
       {"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
        "0.0.0.0", "::1", "::", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "not an address"}) {
    EXPECT_TRUE(IsInternalRegistryAddress(internal)) << internal;
  }
  for (const char* external :
       {"1.1.1.1", "172.32.0.1", "192.169.0.1", "2001:4860:4860::8888", "::ffff:8.8.8.8"}) {
    EXPECT_FALSE(IsInternalRegistryAddress(external)) << external;
  }
}

TEST(RegistryAccessTest, ATenantsPullNamesAnImageForThatTenantAlone) {
  TempDir dir;
  FakeRegistry registry;
  registry.AddImage("team/app", "1", {Layer(dir, "a", 100)}, Config());
  std::string ref = registry.Host() + "/team/app:1";
  std::string store = dir.File("store");
  // The operator's tag of another image under the same name as the tenants will use.
  absl::StatusOr<ImageInfo> first = ImageStore(store).Pull(ref);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<ImageInfo> resolved = ImageStore(store).Resolve(ref);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  std::string operators = resolved->digest;
  // The registry's tag moves (a hostile tenant controlling it, say); alice pulls it afresh
  // in her own view, and only she sees the new image under that name.
  std::string moved = registry.AddImage("team/app", "1", {Layer(dir, "b", 200)}, Config());
  ImageStore alice(store, "uid:61001"), bob(store, "uid:61002");
  absl::StatusOr<ImageInfo> pulled = alice.Pull(ref);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->digest, moved);
  EXPECT_EQ(alice.Resolve(ref)->digest, moved);
  EXPECT_EQ(bob.Resolve(ref)->digest, operators);  // bob still sees the operator's
  EXPECT_EQ(ImageStore(store).Resolve(ref)->digest, operators);
  // Lists: each sees the operator's names and its own, never another tenant's.
  ASSERT_TRUE(alice.Pull(registry.Host() + "/team/app:1", nullptr, {}).ok());
  registry.AddImage("team/other", "2", {Layer(dir, "c", 300)}, Config());
  ASSERT_TRUE(alice.Pull(registry.Host() + "/team/other:2").ok());
  auto names = [](const ImageStore& view) {
    std::vector<std::string> out;
    absl::StatusOr<std::vector<ImageInfo>> listed = view.List();
    for (const ImageInfo& i : listed.ok() ? *listed : std::vector<ImageInfo>()) {
      out.push_back(i.name + " " + i.digest);
    }
    return out;
  };
  // What each tenant's own pulls hold (its images quota counts it); the operator's is not.
  EXPECT_GT(alice.OwnBytes(), 0u);
  EXPECT_EQ(bob.OwnBytes(), 0u);
  EXPECT_EQ(ImageStore(store).OwnBytes(), 0u);
  EXPECT_EQ(names(bob), std::vector<std::string>{ref + " " + operators});
  EXPECT_EQ(names(alice).size(), 2u);
  EXPECT_EQ(names(ImageStore(store)), std::vector<std::string>{ref + " " + operators});
  // Bob pulls the name now and shares alice's blob (by digest); removing her tag keeps it.
  ASSERT_EQ(bob.Pull(ref)->digest, moved);
  absl::StatusOr<ImageStore::RemoveResult> removed = alice.Remove(ref, {});
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_FALSE(removed->freed);
  EXPECT_EQ(bob.Resolve(ref)->digest, moved);
  EXPECT_EQ(alice.Resolve(ref)->digest, operators);  // hers is gone: the operator's shows again
}

TEST(RegistryFaultTest, ConcurrentPullsOfOneImageBothSucceedWithOneCopy) {
  TempDir dir;
  FakeRegistry registry;
  registry.AddImage("team/app", "1", {Layer(dir, "a", 1 << 20)}, Config());
  registry.SetFaults({.blob_bytes_per_second = 4 << 20});  // so that they overlap
  std::string ref = registry.Host() + "/team/app:1";
  ImageStore store(dir.File("store"));
  absl::StatusOr<ImageInfo> one, two;
  std::thread a([&] { one = store.Pull(ref); });
  std::thread b([&] { two = ImageStore(dir.File("store")).Pull(ref); });
  a.join();
  b.join();
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(one->digest, two->digest);
  EXPECT_EQ(store.List()->size(), 1u);
  EXPECT_TRUE(Leftovers(dir.File("store")).empty());
}

}  // namespace
}  // namespace airlock
