#include "src/daemon/image_builds.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include "src/common/file_util.h"
#include "src/daemon/session_manager_testing.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

TEST(BuildSlotsTest, OneBuildPerTenantAndAtMostTheHostsShare) {
  BuildSlots slots(2);
  absl::StatusOr<std::shared_ptr<void>> alice = slots.Take("alice");
  ASSERT_TRUE(alice.ok()) << alice.status();
  absl::StatusOr<std::shared_ptr<void>> again = slots.Take("alice");
  EXPECT_TRUE(absl::IsResourceExhausted(again.status()));
  EXPECT_NE(again.status().message().find("one build at a time per user"), std::string::npos);
  absl::StatusOr<std::shared_ptr<void>> bob = slots.Take("bob");
  ASSERT_TRUE(bob.ok()) << bob.status();
  absl::StatusOr<std::shared_ptr<void>> carol = slots.Take("carol");
  EXPECT_TRUE(absl::IsResourceExhausted(carol.status()));
  EXPECT_NE(carol.status().message().find("2 image builds are running"), std::string::npos);
  // A slot is free again once its build (every copy of the pointer) has gone.
  std::shared_ptr<void> copy = *alice;
  alice->reset();
  EXPECT_FALSE(slots.Take("carol").ok());
  copy.reset();
  EXPECT_TRUE(slots.Take("carol").ok());
  EXPECT_TRUE(slots.Take("alice").ok());
}

// An airlockd stopped mid-build (killed, or the host lost power) left a build image's tag in a
// tenant's view and a half-fetched npm layer; the next one removes them, and nothing else.
TEST(ImageBuilderTest, LeftoversOfABuildThatNeverEndedAreRemovedAtStart) {
  testing::TempDir dir;
  std::string cache = dir.File("cache");
  ASSERT_EQ(setenv("AIRLOCK_CACHE", cache.c_str(), 1), 0);
  SessionManagerWithoutVms manager(dir.path());
  ASSERT_NE(manager.store, nullptr);
  const HostPaths& paths = manager.paths;

  std::string tar = dir.File("rootfs.tar");
  testing::WriteTar(tar, {{.name = "etc/", .type = S_IFDIR, .mode = 0755},
                          {.name = "etc/hostname", .data = "x\n"}});
  ImageStore alice(paths.images, "alice");
  ImageStore root(paths.images);
  ASSERT_TRUE(alice.ImportRootfsTar(tar, "airlock-build/npm-1-0-1700000000000").ok());
  ASSERT_TRUE(alice.ImportRootfsTar(tar, "alice/tool:1").ok());
  absl::StatusOr<ImageInfo> build_image =
      root.ImportRootfsLayers({tar, tar}, "airlock-build/npm-1-1-1700000000001");
  ASSERT_TRUE(build_image.ok()) << build_image.status();
  ASSERT_TRUE(root.ImportRootfsTar(tar, "airlock/base").ok());

  ASSERT_TRUE(MakeDirectories(cache + "/npm", 0700).ok());
  // pid 999999999 is no process: its files are leftovers. Ours is building right now.
  std::string gone = cache + "/npm/0123.tar.fetched-999999999-0";
  std::string gone_tmp = cache + "/npm/0123.tar.tmp-999999999-1";
  std::string running = absl::StrCat(cache, "/npm/4567.tar.fetched-", getpid(), "-0");
  std::string layer = cache + "/npm/89ab.tar";
  for (const std::string& file : {gone, gone_tmp, running, layer}) {
    ASSERT_TRUE(WriteFileAtomically(file, "x", 0600).ok()) << file;
  }

  std::vector<std::string> templates_removed;
  ImageBuilder builder(paths, manager.sessions.get(), manager.store.get(),
                       [&](const std::vector<std::string>& d) {
                         templates_removed.insert(templates_removed.end(), d.begin(), d.end());
                       });
  builder.RemoveLeftovers();
  unsetenv("AIRLOCK_CACHE");

  EXPECT_EQ(alice.OwnNames(), std::vector<std::string>{"alice/tool:1"});
  EXPECT_EQ(root.OwnNames(), std::vector<std::string>{"airlock/base"});
  EXPECT_TRUE(alice.Resolve("alice/tool:1").ok());
  // The build image of two layers was its own blob: freed, with its templates.
  EXPECT_NE(access(build_image->rootfs_path.c_str(), F_OK), 0);
  EXPECT_EQ(templates_removed, std::vector<std::string>{build_image->digest});
  EXPECT_EQ(ListDirectory(cache + "/npm"),
            (std::vector<std::string>{"4567.tar.fetched-" + std::to_string(getpid()) + "-0",
                                      "89ab.tar"}));
}

}  // namespace
}  // namespace airlock
