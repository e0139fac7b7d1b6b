// An image build's context: the tar a client made of its directory, read on the host entry by
// entry and never unpacked (it is untrusted: fuzz/build_context_fuzz.cc). It answers COPY's
// questions: which entries a source names (globs as .dockerignore's, a directory standing for
// what is under it), the digest of each (for the step's cache key), and writes the layer a
// COPY makes: the chosen entries under their destination, owned and moded as the instruction
// says. Paths never leave the context: a source that cleans to `..` is refused, symbolic links
// are copied as links and never followed.
#ifndef AIRLOCK_IMAGE_BUILD_CONTEXT_H_
#define AIRLOCK_IMAGE_BUILD_CONTEXT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/image/ext4_reader.h"

struct archive;

namespace airlock {

// At most this many entries in a context, and this many bytes of file content.
inline constexpr size_t kMaxContextEntries = 1 << 20;
inline constexpr uint64_t kMaxContextBytes = 16ull << 30;

struct ContextEntry {
  std::string path;   // cleaned, relative ("app/main.py"); "" is the context's root
  uint32_t type = 0;  // S_IFREG, S_IFDIR or S_IFLNK (nothing else is kept)
  uint32_t mode = 0;  // permission bits
  uint64_t size = 0;
  std::string digest;  // sha256 hex of a regular file's content
  std::string link;    // a symbolic link's target, as stored
  int64_t mtime = 0;
};

// One entry of a COPY's layer: where it goes, and what it is (a context entry, or an inline
// file such as a heredoc's body).
struct LayerItem {
  std::string dest;  // cleaned, relative to the image root
  const ContextEntry* source = nullptr;
  std::optional<std::string> inline_content;  // instead of a source: a file with this content
  uint32_t type = 0;  // of the item (a directory made for the destination: S_IFDIR)
  uint32_t mode = 0;
  uint32_t uid = 0, gid = 0;
  // ADD of a local tar archive (plain, gzip, bzip2 or xz): the source's entries go under dest,
  // a directory; their owners become uid/gid when `own`, their modes `mode` when `set_mode`.
  bool unpack = false;
  bool own = false, set_mode = false;
};

// Writes a layer tar (PAX) entry by entry: what COPY --from takes out of an image.
class LayerTarWriter {
 public:
  LayerTarWriter();
  ~LayerTarWriter();
  [[nodiscard]] absl::Status Open(const std::string& path);
  // The entry at `path` (relative), its content from `read` when a regular file.
  [[nodiscard]] absl::Status Add(const std::string& path, const Ext4Entry& entry,
                                 const Ext4Writer::Reader& read);
  [[nodiscard]] absl::Status Close();

 private:
  ::archive* out_ = nullptr;
  std::string path_;
};

class BuildContext {
 public:
  // Reads the index of the tar at tar_path (digests computed on the way). INVALID_ARGUMENT for
  // what is not a tar, a path that leaves the context, or more than the caps allow.
  [[nodiscard]] static absl::StatusOr<BuildContext> Open(const std::string& tar_path);

  // The entries a COPY source names, as written after variable expansion ("src/", "*.txt",
  // "/app/a.py": from the context's root). A directory comes first, then what is under it.
  // INVALID_ARGUMENT when it leaves the context; NOT_FOUND, saying so, when nothing matches.
  [[nodiscard]] absl::StatusOr<std::vector<const ContextEntry*>> Match(
      absl::string_view source) const;

  // The entries under a directory entry (not the directory itself), in path order.
  std::vector<const ContextEntry*> Below(const ContextEntry& dir) const;

  // Whether a regular file of the context is a tar archive Docker's ADD would unpack: a tar,
  // plain or compressed with gzip, bzip2 or xz (decided by content, not by name).
  [[nodiscard]] absl::StatusOr<bool> IsTarArchive(const ContextEntry& entry) const;

  // Writes a layer tar (PAX) of the items to out_path, content read from the context tar. What
  // unpacked archives hold counts against max_unpacked_bytes (INVALID_ARGUMENT past it).
  [[nodiscard]] absl::Status WriteLayer(const std::vector<LayerItem>& items,
                                        const std::string& out_path,
                                        uint64_t max_unpacked_bytes = kMaxContextBytes) const;

  const std::map<std::string, ContextEntry>& entries() const { return entries_; }

 private:
  std::string tar_path_;
  std::map<std::string, ContextEntry> entries_;  // by path
};

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_BUILD_CONTEXT_H_
