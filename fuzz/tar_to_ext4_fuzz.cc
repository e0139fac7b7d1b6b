// Fuzz target: a tar (any compression) converted into an ext4 image as an OCI layer would be,
// whiteouts included. Everything stays in memory files; nothing may touch the host filesystem.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "src/common/unique_fd.h"
#include "src/image/tar_to_ext4.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  airlock::UniqueFd tar(memfd_create("tar", MFD_CLOEXEC));
  airlock::UniqueFd image(memfd_create("image", MFD_CLOEXEC));
  if (!tar.valid() || !image.valid()) return 0;
  if (write(tar.get(), data, size) != static_cast<ssize_t>(size)) return 0;
  std::string tar_path = "/proc/self/fd/" + std::to_string(tar.get());
  absl::StatusOr<airlock::TarStats> stats = airlock::ScanTar(tar_path);
  if (!stats.ok()) return 0;
  airlock::Ext4Writer::Options options = airlock::ImageSizeFor({*stats});
  if (options.size_bytes > (256ull << 20)) return 0;  // declared sizes may be huge; stay small
  auto writer =
      airlock::Ext4Writer::Create("/proc/self/fd/" + std::to_string(image.get()), options);
  if (!writer.ok()) return 0;
  if (airlock::ApplyTar(tar_path, writer->get(), true).ok()) (*writer)->Finish().IgnoreError();
  return 0;
}
