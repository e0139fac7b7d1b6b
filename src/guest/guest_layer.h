// An image build's layer, taken inside the build VM: what a RUN changed is exactly the root
// overlay's upper directory (the VM booted on the previous step's image with an empty one),
// written as an OCI layer tar (PAX) to stdout for the host, which reads it as it reads any
// registry's layer (src/image/tar_to_ext4.cc, fuzzed). Overlay whiteouts (character devices
// 0/0) become `.wh.NAME` entries and opaque directories a `.wh..wh..opq` entry; overlay's own
// xattrs are left out, others (file capabilities) kept. Nothing is parsed on the host but tar.
#ifndef AIRLOCK_GUEST_GUEST_LAYER_H_
#define AIRLOCK_GUEST_GUEST_LAYER_H_

#include <string>
#include <vector>

namespace airlock::guest {

// Where PID 1 binds the root overlay's upper directory, read-only, at boot.
inline constexpr char kRootUpperView[] = "/run/airlock/root-upper";

// Writes the tree under the directory `root` as a layer tar to out_fd (sorted, so the same tree
// gives the same bytes), leaving out the paths in `skip` (relative, e.g. "etc/resolv.conf":
// what the agent itself wrote). Returns "" or what failed.
std::string WriteLayerTar(const std::string& root, int out_fd,
                          const std::vector<std::string>& skip);

// `/proc/1/exe layer-tar`: WriteLayerTar of kRootUpperView to stdout. Returns the exit status.
int LayerTarMain();

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_GUEST_LAYER_H_
