#include "src/daemon/session_manager.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "src/daemon/session_manager_testing.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

// A tenant that names sessions that do not exist, with ids as long as a request allows, costs
// airlockd no memory once each call has returned.
TEST(SessionManagerTest, IdsOfNoSessionLeaveNothingBehind) {
  testing::TempDir dir;
  SessionManagerWithoutVms manager(dir.path());
  ASSERT_NE(manager.store, nullptr);
  SessionManager& sessions = *manager.sessions;
  Principal mallory{1001, 1001};
  for (int i = 0; i < 500; ++i) {
    std::string id = std::string(10000, 'a') + std::to_string(i);
    EXPECT_TRUE(absl::IsNotFound(sessions.Pause(mallory, id).status()));
    EXPECT_TRUE(absl::IsNotFound(sessions.Resume(mallory, id).status()));
    EXPECT_TRUE(absl::IsNotFound(sessions.Fork(mallory, id, 1).status()));
  }
  EXPECT_LE(sessions.session_lock_count(), 65u);
}

// The images quota counts what images take on disk, known only once a pull or import is done:
// one that ends over it is taken back (a tag it moved points where it did), and says so.
TEST(SessionManagerTest, ATenantsImagesStayWithinItsImagesQuotaOnDisk) {
  testing::TempDir dir;
  std::string small = dir.File("small.tar");
  std::string big = dir.File("big.tar");
  testing::WriteTar(small, {{.name = "a", .data = "a"}});
  std::string noise;
  for (int i = 0; noise.size() < (24 << 20); ++i) noise += std::to_string(i * 2654435761u);
  testing::WriteTar(big, {{.name = "b", .data = noise}});
  ImageStore probe(dir.File("probe"));
  uint64_t small_size = probe.ImportRootfsTar(small, "s")->size_bytes;
  uint64_t big_size = probe.ImportRootfsTar(big, "b")->size_bytes;
  // Room for the small one and a quarter of the big one; the big one alone does not fit.
  uint64_t quota = small_size + big_size / 4;
  ASSERT_GT(big_size, quota);
  absl::StatusOr<Quotas> quotas = Quotas::Parse(absl::StrCat("tenant uid:1001 images=", quota));
  ASSERT_TRUE(quotas.ok()) << quotas.status();
  SessionManagerWithoutVms manager(dir.path(), *std::move(quotas));
  ASSERT_NE(manager.store, nullptr);
  SessionManager& sessions = *manager.sessions;

  Principal mallory{1001, 1001};
  ImageStore images(manager.paths.images, mallory.ImageScope());
  ImageService::QuotaCheck check = sessions.images().CheckQuotaAfter(mallory);
  absl::StatusOr<ImageInfo> made = images.ImportRootfsTar(small, "app:1");
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(check(*made).ok());
  std::string small_digest = made->digest;

  check = sessions.images().CheckQuotaAfter(mallory);
  made = images.ImportRootfsTar(big, "app:2");
  ASSERT_TRUE(made.ok()) << made.status();
  absl::Status over = check(*made);
  EXPECT_TRUE(absl::IsResourceExhausted(over)) << over;
  EXPECT_NE(over.message().find("over your images quota of"), std::string::npos) << over;
  EXPECT_NE(over.message().find("not kept"), std::string::npos) << over;
  EXPECT_EQ(images.OwnNames(), std::vector<std::string>{"app:1"});
  EXPECT_NE(access(made->rootfs_path.c_str(), F_OK), 0);

  // A tag moved to an image over the quota points where it did.
  check = sessions.images().CheckQuotaAfter(mallory);
  made = images.ImportRootfsTar(big, "app:1");
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(absl::IsResourceExhausted(check(*made)));
  EXPECT_EQ(images.Resolve("app:1")->digest, small_digest);

  // Root's images have no quota.
  Principal root{0, 0};
  ImageStore operator_images(manager.paths.images, root.ImageScope());
  check = sessions.images().CheckQuotaAfter(root);
  made = operator_images.ImportRootfsTar(big, "host/big:1");
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(check(*made).ok());
}

}  // namespace
}  // namespace airlock
