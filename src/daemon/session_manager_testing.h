// Test homes for SessionManager. SessionManagerWithoutVms: for unit tests of what it does
// without a VM (ids, quotas, images): one over a fresh state store and image store in a test's
// directory, whose QEMU is /bin/false.
#ifndef AIRLOCK_DAEMON_SESSION_MANAGER_TESTING_H_
#define AIRLOCK_DAEMON_SESSION_MANAGER_TESTING_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/image/image_store.h"
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

// For unit tests that run sessions on fake VMs (src/testing/fake_vm.h): a test directory laid
// out as airlockd's home (stand-ins for the kernel and initramfs, which fake VMs never read),
// with an image imported for a principal from a rootfs tar (testing::WriteTar), and a fresh
// state store there.
struct FakeVmHome {
  // dir: an empty directory of the test's own.
  FakeVmHome(const std::string& dir, const Principal& who, const std::string& image,
             const std::string& rootfs_tar)
      : paths{dir,          dir + "/vmlinux", dir + "/initramfs.cpio", dir + "/images",
              dir + "/tmp", "/bin/false"} {
    EXPECT_TRUE(MakeDirectories(paths.scratch, 0700).ok());
    EXPECT_TRUE(WriteFileAtomically(paths.kernel, "not a kernel", 0644).ok());
    EXPECT_TRUE(WriteFileAtomically(paths.initramfs, "not an initramfs", 0644).ok());
    EXPECT_TRUE(ImageStore(paths.images, who.ImageScope()).ImportRootfsTar(rootfs_tar, image).ok());
    absl::StatusOr<std::unique_ptr<StateStore>> opened =
        StateStore::Open(dir + "/state.db", 1 << 20);
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (opened.ok()) store = *std::move(opened);
  }
  HostPaths paths;
  std::unique_ptr<StateStore> store;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_SESSION_MANAGER_TESTING_H_
