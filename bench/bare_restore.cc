// The floor for a resume and a fork in bench/compare.sh: COUNT VMs restored at once from a
// paused session's snapshot by Airlock's own launcher and QEMU argv (the jail included), with
// no daemon in the path, each timed until its guest agent has answered on the channel. What
// this costs is what the guest and QEMU cost on a restore (under TCG, a cold translation
// cache); what a resume costs above it is airlockd's own path.
//
//   airlock-bare-restore SNAPSHOT_DIR [COUNT]   (as root; AIRLOCK_HOME: the snapshot's home)
//
// Prints the milliseconds from the first start to the last agent's answer. The snapshot is
// only read: each VM writes a copy of its disk, and its memory is loaded once, outside the
// time, into the sealed memfd that forks share.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "src/common/host_paths.h"
#include "src/vm/qemu_driver.h"
#include "src/vm/snapshot.h"
#include "src/vm/snapshot_manifest.h"
#include "src/vm/vm_launcher.h"

namespace airlock {
namespace {

int Fail(const absl::Status& status) {
  fprintf(stderr, "airlock-bare-restore: %s\n", std::string(status.message()).c_str());
  return 1;
}

int Main(int argc, char** argv) {
  uint32_t count = 1;
  if (argc < 2 || argc > 3 ||
      (argc == 3 && (!absl::SimpleAtoi(argv[2], &count) || count == 0 || count > 64))) {
    fprintf(stderr, "usage: airlock-bare-restore SNAPSHOT_DIR [COUNT (1-64)]\n");
    return 2;
  }
  HostPaths paths = DefaultHostPaths();
  absl::StatusOr<std::string> key = LoadOrCreateHostKey(paths.home + "/host.key");
  if (!key.ok()) return Fail(key.status());
  SnapshotFiles files;
  absl::StatusOr<SnapshotManifest> manifest =
      OpenSnapshot(argv[1], *key, &files, SnapshotUse::kFork);
  if (!manifest.ok()) return Fail(manifest.status());
  ImageInfo image;
  image.digest = manifest->image_digest;
  image.rootfs_path =
      absl::StrCat(paths.images, "/blobs/", absl::StripPrefix(manifest->image_digest, "sha256:"),
                   "/rootfs.ext4");
  QemuDriver driver(paths.qemu);
  std::vector<UniqueFd> disks;
  for (uint32_t i = 0; i < count; ++i) {
    absl::StatusOr<UniqueFd> disk = UnnamedFile(paths.scratch);
    if (!disk.ok()) return Fail(disk.status());
    if (absl::Status s = CopyDisk(files.disk.get(), disk->get()); !s.ok()) return Fail(s);
    disks.push_back(*std::move(disk));
  }
  std::vector<absl::StatusOr<LaunchedVm>> vms;
  for (uint32_t i = 0; i < count; ++i) vms.emplace_back(absl::UnknownError("not started"));
  absl::Time start = absl::Now();
  {
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < count; ++i) {
      threads.emplace_back([&, i] {
        LaunchOptions options{.memory_mib = static_cast<uint32_t>(manifest->memory_bytes >> 20),
                              .vcpus = manifest->vcpus,
                              .hostname = absl::StrCat("bare-", i)};
        vms[i] = RestoreVm(driver, paths, image, files, *manifest, std::move(disks[i]), options);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  for (const absl::StatusOr<LaunchedVm>& vm : vms) {
    if (!vm.ok()) return Fail(vm.status());
  }
  printf("%.0f\n", ms);
  return 0;
}

}  // namespace
}  // namespace airlock

int main(int argc, char** argv) { return airlock::Main(argc, argv); }
