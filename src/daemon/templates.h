// Templates: a "ready" snapshot of a freshly booted VM, one per image and VM shape, under
// $AIRLOCK_HOME/templates. The first session of an image and shape boots once and saves it;
// every later session (and every `airlock run`) restores it instead of booting. A template's
// name carries the image digest, the shape and a hash of the kernel, initramfs and QEMU it was
// made with, so a new kernel or image gets a new template (the stale one is deleted), and one
// that is missing or refused by verification is built again. Thread-safe.
#ifndef AIRLOCK_DAEMON_TEMPLATES_H_
#define AIRLOCK_DAEMON_TEMPLATES_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/common/host_paths.h"
#include "src/image/image_store.h"
#include "src/telemetry/metrics.h"
#include "src/vm/snapshot.h"
#include "src/vm/snapshot_manifest.h"
#include "src/vm/vm_driver.h"
#include "src/vm/vm_launcher.h"

namespace airlock {

struct VmShape {
  uint32_t memory_mib = 512;
  uint32_t vcpus = 1;
  uint64_t disk_bytes = 1ull << 30;
};

// What airlockd's VMs did since it started (airlock ps, and the OTLP metrics).
struct VmCounters {
  std::atomic<uint64_t> boots{0};
  std::atomic<uint64_t> restores{0};
  std::atomic<uint64_t> snapshots{0};
  std::atomic<uint64_t> snapshot_bytes{0};  // memory state written by pauses and forks
  std::atomic<uint64_t> execs{0};
  std::atomic<uint64_t> image_pulls{0};
  std::atomic<uint64_t> pool_takes{0};  // sessions that got a VM from the warm pool
  telemetry::Histogram boot_ms{telemetry::LatencyBoundsMs()};
  telemetry::Histogram restore_ms{telemetry::LatencyBoundsMs()};
  telemetry::Histogram exec_ms{telemetry::LatencyBoundsMs()};
};

class Templates {
 public:
  Templates(HostPaths paths, VmDriver* driver, std::string key, VmCounters* counters)
      : paths_(std::move(paths)), driver_(driver), key_(std::move(key)), counters_(counters) {}

  struct Template {
    std::string dir;
    SnapshotManifest manifest;
    SnapshotFiles files;  // as verified: restore from these
  };
  // The verified template for an image and shape, booting and saving it first if needed.
  [[nodiscard]] absl::StatusOr<Template> Get(const ImageInfo& image, const VmShape& shape);
  // Deletes a template that would not restore, so that the next Get builds it anew.
  void Discard(const std::string& dir);

 private:
  absl::Status Build(const std::string& dir, const ImageInfo& image, const VmShape& shape)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  HostPaths paths_;
  VmDriver* driver_;
  std::string key_;
  VmCounters* counters_;
  absl::Mutex mu_;  // one build at a time; a Get waits for a build in progress
};

// The manifest of a snapshot about to be taken of vm (files are filled in by TakeSnapshot).
SnapshotManifest DescribeVm(const HostPaths& paths, const std::string& id,
                            const std::string& image_digest, uint32_t vcpus, uint64_t memory_bytes,
                            const Vm& vm);

// Launch options for a VM of this shape with this hostname (nothing else set).
LaunchOptions OptionsForShape(const VmShape& shape, const std::string& hostname);

// A description of the files a VM is made of (kernel, initramfs), for snapshot manifests and
// template names: their real paths, sizes and modification times.
std::string KernelIdentity(const HostPaths& paths);

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_TEMPLATES_H_
