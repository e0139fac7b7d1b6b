// For unit tests of what SessionManager does without a VM (ids, quotas, images): one over a
// fresh state store and image store in a test's directory, whose QEMU is /bin/false.
#ifndef AIRLOCK_DAEMON_SESSION_MANAGER_TESTING_H_
#define AIRLOCK_DAEMON_SESSION_MANAGER_TESTING_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "src/common/host_paths.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/vm/qemu_driver.h"

namespace airlock {

struct SessionManagerWithoutVms {
  // dir: an empty directory of the test's own.
  explicit SessionManagerWithoutVms(const std::string& dir, Quotas quotas = {})
      : paths{dir, "", "", dir + "/images", dir + "/tmp", "/bin/false"} {
    absl::StatusOr<std::unique_ptr<StateStore>> opened =
        StateStore::Open(dir + "/state.db", 1 << 20);
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (opened.ok()) store = *std::move(opened);
    sessions = std::make_unique<SessionManager>(SessionManagerOptions{
        .store = store.get(), .paths = paths, .hosts = &host, .quotas = std::move(quotas)});
  }
  HostPaths paths;
  QemuDriver driver{"/bin/false"};
  providers::LocalHost host{&driver, "test", providers::MachineCapacity()};
  std::unique_ptr<StateStore> store;
  std::unique_ptr<SessionManager> sessions;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_SESSION_MANAGER_TESTING_H_
