// Fuzz target: an image build's context tar, as a client sends it. Indexing it either fails
// cleanly or gives entries whose paths stay inside the context, whose parents are directories,
// and a COPY layer of everything (with ADD's unpacking of each file that is a tar) that reads
// back from the same bytes. Memory files only.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/common/unique_fd.h"
#include "src/image/build_context.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  airlock::UniqueFd tar(memfd_create("context", MFD_CLOEXEC));
  airlock::UniqueFd layer(memfd_create("layer", MFD_CLOEXEC));
  if (!tar.valid() || !layer.valid()) return 0;
  if (write(tar.get(), data, size) != static_cast<ssize_t>(size)) return 0;
  absl::StatusOr<airlock::BuildContext> context =
      airlock::BuildContext::Open("/proc/self/fd/" + std::to_string(tar.get()));
  if (!context.ok()) return 0;
  std::vector<airlock::LayerItem> items;
  for (const auto& [path, e] : context->entries()) {
    if (path.size() >= 2 && (path.substr(0, 2) == ".." || path[0] == '/')) __builtin_trap();
    size_t slash = path.rfind('/');
    if (slash != std::string::npos &&
        context->entries().at(path.substr(0, slash)).type != S_IFDIR) {
      __builtin_trap();
    }
    if (path.empty()) continue;
    items.push_back({.dest = "copy/" + path, .source = &e, .type = e.type, .mode = e.mode});
    // A file that is itself a tar is also unpacked, as ADD does (a nested, untrusted archive).
    absl::StatusOr<bool> archive = context->IsTarArchive(e);
    if (archive.ok() && *archive) {
      items.push_back({.dest = "add/" + path, .source = &e, .type = S_IFREG, .unpack = true});
    }
  }
  (void)context->Match("*");
  (void)context->Match("a/../../b");
  (void)context->WriteLayer(items, "/proc/self/fd/" + std::to_string(layer.get()), 64 << 20);
  return 0;
}
