// Build-time tool: airlock-mkinitramfs AGENT OUT writes the guest initramfs.
#include <cstdio>

#include "src/image/initramfs_writer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: airlock-mkinitramfs AGENT_BINARY OUTPUT\n");
    return 2;
  }
  absl::Status status = airlock::WriteInitramfs(argv[1], argv[2]);
  if (!status.ok()) {
    std::fprintf(stderr, "airlock-mkinitramfs: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
