#include "src/daemon/session_manager.h"

#include <gtest/gtest.h>

#include "src/testing/test_util.h"
#include "src/vm/qemu_driver.h"

namespace airlock {
namespace {

// A tenant that names sessions that do not exist, with ids as long as a request allows, costs
// airlockd no memory once each call has returned.
TEST(SessionManagerTest, IdsOfNoSessionLeaveNothingBehind) {
  testing::TempDir dir;
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  HostPaths paths{dir.path(), "", "", dir.File("images"), dir.File("tmp"), "/bin/false"};
  QemuDriver driver("/bin/false");
  SessionManager sessions(store->get(), paths, &driver);
  Principal mallory{1001, 1001};
  for (int i = 0; i < 500; ++i) {
    std::string id = std::string(10000, 'a') + std::to_string(i);
    EXPECT_TRUE(absl::IsNotFound(sessions.Pause(mallory, id).status()));
    EXPECT_TRUE(absl::IsNotFound(sessions.Resume(mallory, id).status()));
    EXPECT_TRUE(absl::IsNotFound(sessions.Fork(mallory, id, 1).status()));
  }
  EXPECT_LE(sessions.session_lock_count(), 65u);
}

}  // namespace
}  // namespace airlock
