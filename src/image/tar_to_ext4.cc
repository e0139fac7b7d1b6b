#include "src/image/tar_to_ext4.h"

#include <archive.h>
#include <archive_entry.h>
#include <locale.h>
#include <sys/stat.h>

#include <cstring>
#include <functional>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/image/ext4_reader.h"
#include "src/image/tar_path.h"

namespace airlock {
namespace {

constexpr uint64_t kBlock = 4096;
constexpr char kWhiteoutPrefix[] = ".wh.";
constexpr char kOpaqueWhiteout[] = ".wh..wh..opq";

}  // namespace

void ArchiveCloser::operator()(archive* a) const { archive_read_free(a); }

void SupportInProcessFilters(archive* a) {
  for (int (*filter)(archive*) :
       {archive_read_support_filter_gzip, archive_read_support_filter_bzip2,
        archive_read_support_filter_xz, archive_read_support_filter_lzma,
        archive_read_support_filter_zstd, archive_read_support_filter_lz4}) {
    // Tried on a probe first: ARCHIVE_WARN means "enabled, through an outside program".
    ArchivePtr probe(archive_read_new());
    if (filter(probe.get()) == ARCHIVE_OK) filter(a);
  }
}

absl::StatusOr<ArchivePtr> OpenTar(const std::string& path) {
  ArchivePtr a(archive_read_new());
  SupportInProcessFilters(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 20) != ARCHIVE_OK) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", path, " as a tar archive: ", archive_error_string(a.get())));
  }
  return a;
}

namespace {

absl::Status ArchiveError(archive* a, const std::string& path) {
  const char* message = archive_error_string(a);
  return absl::InvalidArgumentError(
      absl::StrCat(path, " is not a valid tar archive: ", message ? message : "unreadable entry",
                   " (is it truncated?)"));
}

// Adds missing parent directories of a cleaned path, like tar does for sparse archives.
absl::Status EnsureParents(const std::string& path, Ext4Writer* writer,
                           std::set<std::string>* known) {
  for (size_t at = path.find('/'); at != std::string::npos; at = path.find('/', at + 1)) {
    std::string dir = path.substr(0, at);
    if (known->count(dir)) continue;
    if (!writer->Exists(dir)) {
      if (absl::Status s = writer->AddDirectory(dir, {.mode = 0755}); !s.ok()) return s;
    }
    known->insert(dir);
  }
  return absl::OkStatus();
}

absl::Status ApplyEntry(archive* a, archive_entry* entry, const std::string& path,
                        Ext4Writer* writer) {
  Ext4Metadata meta;
  meta.mode = archive_entry_perm(entry) & 07777;
  la_int64_t uid = archive_entry_uid(entry), gid = archive_entry_gid(entry);
  if (uid < 0 || gid < 0 || uid > 0xffffffffll || gid > 0xffffffffll) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": invalid owner"));
  }
  meta.uid = static_cast<uint32_t>(uid);
  meta.gid = static_cast<uint32_t>(gid);
  meta.mtime = archive_entry_mtime(entry);

  if (const char* hardlink = archive_entry_hardlink(entry)) {
    absl::StatusOr<std::string> target = CleanTarPath(hardlink);
    if (!target.ok()) return target.status();
    return writer->AddHardLink(path, *target);
  }
  absl::Status status;
  switch (archive_entry_filetype(entry)) {
    case AE_IFDIR:
      status = writer->AddDirectory(path, meta);
      break;
    case AE_IFREG: {
      la_int64_t size = archive_entry_size(entry);
      if (size < 0 || static_cast<uint64_t>(size) > kMaxImageBytes) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": invalid size ", size));
      }
      status = writer->AddFile(path, meta, static_cast<uint64_t>(size),
                               [a, &path](char* buf, size_t cap) -> absl::StatusOr<size_t> {
                                 la_ssize_t n = archive_read_data(a, buf, cap);
                                 if (n < 0) return ArchiveError(a, path);
                                 return static_cast<size_t>(n);
                               });
      break;
    }
    case AE_IFLNK: {
      const char* target = archive_entry_symlink(entry);
      if (target == nullptr) return absl::InvalidArgumentError(absl::StrCat(path, ": no target"));
      status = writer->AddSymlink(path, target, meta);
      break;
    }
    case AE_IFCHR:
    case AE_IFBLK:
    case AE_IFIFO:
    case AE_IFSOCK:
      status = writer->AddSpecial(path, archive_entry_filetype(entry), meta,
                                  archive_entry_rdevmajor(entry), archive_entry_rdevminor(entry));
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(path, ": unsupported entry type"));
  }
  if (!status.ok()) return status;
  archive_entry_xattr_reset(entry);
  const char* name;
  const void* value;
  size_t size;
  while (archive_entry_xattr_next(entry, &name, &value, &size) == ARCHIVE_OK) {
    // Only what a root filesystem needs: file capabilities and user attributes.
    if (strcmp(name, "security.capability") != 0 && !absl::StartsWith(name, "user.")) continue;
    if (size > 4000) return absl::InvalidArgumentError(absl::StrCat(path, ": xattr too large"));
    status = writer->SetXattr(path, name, absl::string_view(static_cast<const char*>(value), size));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

void ReadTarNamesAsUtf8() {
  if (setlocale(LC_CTYPE, "C.UTF-8") == nullptr) setlocale(LC_CTYPE, "C.utf8");
}

absl::StatusOr<TarStats> ScanTar(const std::string& tar_path) {
  absl::StatusOr<ArchivePtr> a = OpenTar(tar_path);
  if (!a.ok()) return a.status();
  TarStats stats;
  archive_entry* entry;
  int r;
  while ((r = archive_read_next_header(a->get(), &entry)) == ARCHIVE_OK) {
    ++stats.entries;
    la_int64_t size = archive_entry_size(entry);
    if (archive_entry_filetype(entry) == AE_IFREG && archive_entry_hardlink(entry) == nullptr) {
      if (size < 0 || static_cast<uint64_t>(size) > kMaxImageBytes ||
          stats.data_bytes + static_cast<uint64_t>(size) > kMaxImageBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            tar_path, ": entry ",
            archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "?", " has size ", size,
            "; images are limited to ", kMaxImageBytes >> 30, " GiB"));
      }
      stats.data_bytes += static_cast<uint64_t>(size);
      stats.blocks += (static_cast<uint64_t>(size) + kBlock - 1) / kBlock;
      // Extent trees of large files need index blocks.
      stats.blocks += static_cast<uint64_t>(size) / (128ull << 20);
    } else if (archive_entry_filetype(entry) == AE_IFDIR) {
      stats.blocks += 1;
    } else if (archive_entry_filetype(entry) == AE_IFLNK) {
      const char* target = archive_entry_symlink(entry);
      if (target != nullptr && strlen(target) >= 60) stats.blocks += 1;
    }
    if (archive_entry_xattr_count(entry) > 0) stats.blocks += 1;
  }
  if (r != ARCHIVE_EOF) return ArchiveError(a->get(), tar_path);
  // Every entry's name is stored in its directory: ~ (8 + ~24) bytes each.
  stats.blocks += stats.entries * 32 / kBlock + 1;
  return stats;
}

Ext4Writer::Options ImageSizeFor(const std::vector<TarStats>& layers) {
  uint64_t blocks = 0, entries = 0;
  for (const TarStats& s : layers) {
    blocks += s.blocks;
    entries += s.entries;
  }
  Ext4Writer::Options options;
  uint64_t inodes = entries + entries / 8 + 1024;
  // Data + inode tables (256 bytes each) + 10% for bitmaps, descriptors and slack + 16 MiB.
  uint64_t bytes = blocks * kBlock + inodes * 256;
  bytes += bytes / 10 + (16ull << 20);
  options.size_bytes = (bytes + (1 << 20) - 1) / (1 << 20) * (1 << 20);
  options.inode_count = static_cast<uint32_t>(std::min<uint64_t>(inodes, 1u << 31));
  return options;
}

absl::Status ApplyTar(const std::string& tar_path, Ext4Writer* writer, bool whiteouts) {
  absl::StatusOr<ArchivePtr> a = OpenTar(tar_path);
  if (!a.ok()) return a.status();
  std::set<std::string> known_dirs;
  archive_entry* entry;
  int r;
  while ((r = archive_read_next_header(a->get(), &entry)) == ARCHIVE_OK) {
    const char* raw = archive_entry_pathname(entry);
    if (raw == nullptr) return absl::InvalidArgumentError(tar_path + ": entry without a name");
    absl::StatusOr<std::string> path = CleanTarPath(raw);
    if (!path.ok()) return path.status();
    if (absl::Status s = EnsureParents(*path, writer, &known_dirs); !s.ok()) return s;
    std::string base = path->substr(path->find_last_of('/') + 1);
    std::string dir =
        base.size() == path->size() ? "" : path->substr(0, path->size() - base.size() - 1);
    absl::Status status;
    if (whiteouts && base == kOpaqueWhiteout) {
      status = writer->ClearDirectory(dir);
    } else if (whiteouts && absl::StartsWith(base, kWhiteoutPrefix)) {
      std::string victim = base.substr(strlen(kWhiteoutPrefix));
      if (victim.empty() || victim == "." || victim == "..") {
        // ".wh.", ".wh..", ".wh...": the directory itself or its parent, never a file in it.
        return absl::InvalidArgumentError(
            absl::StrCat(tar_path, ": the whiteout ", *path, " names no file"));
      }
      status = writer->Remove(dir.empty() ? victim : absl::StrCat(dir, "/", victim));
      known_dirs.clear();  // a removed directory may have been known
    } else if (path->empty()) {
      if (archive_entry_filetype(entry) != AE_IFDIR) {
        return absl::InvalidArgumentError(tar_path + ": the root entry is not a directory");
      }
      status = writer->AddDirectory("", {.mode = archive_entry_perm(entry) & 07777u,
                                         .uid = static_cast<uint32_t>(archive_entry_uid(entry)),
                                         .gid = static_cast<uint32_t>(archive_entry_gid(entry)),
                                         .mtime = archive_entry_mtime(entry)});
    } else {
      if (archive_entry_filetype(entry) != AE_IFDIR) known_dirs.erase(*path);
      status = ApplyEntry(a->get(), entry, *path, writer);
    }
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat(tar_path, ": ", status.message()));
    }
  }
  if (r != ARCHIVE_EOF) return ArchiveError(a->get(), tar_path);
  return absl::OkStatus();
}

namespace {

// An image at out_path: what `base` writes first (its size in base_stats), then the layers.
absl::Status ConvertOver(const TarStats& base_stats, const std::vector<std::string>& layers,
                         const std::string& out_path, bool whiteouts,
                         const std::function<absl::Status(Ext4Writer*)>& base = nullptr) {
  std::vector<TarStats> stats = {base_stats};
  for (const std::string& layer : layers) {
    absl::StatusOr<TarStats> scanned = ScanTar(layer);
    if (!scanned.ok()) return scanned.status();
    stats.push_back(*scanned);
  }
  absl::StatusOr<std::unique_ptr<Ext4Writer>> writer =
      Ext4Writer::Create(out_path, ImageSizeFor(stats));
  if (!writer.ok()) return writer.status();
  if (base) {
    if (absl::Status s = base(writer->get()); !s.ok()) return s;
  }
  for (const std::string& layer : layers) {
    if (absl::Status s = ApplyTar(layer, writer->get(), whiteouts); !s.ok()) return s;
  }
  return (*writer)->Finish();
}

}  // namespace

absl::Status ConvertLayers(const std::vector<std::string>& layers, const std::string& out_path,
                           bool whiteouts) {
  return ConvertOver({}, layers, out_path, whiteouts);
}

absl::Status ConvertLayersOver(const std::string& base_image,
                               const std::vector<std::string>& layers,
                               const std::string& out_path) {
  if (base_image.empty()) {
    return ConvertOver(TarStats{}, layers, out_path, /*whiteouts=*/true,
                       [](Ext4Writer* w) { return w->AddDirectory("", {.mode = 0755}); });
  }
  absl::StatusOr<Ext4Usage> usage = MeasureExt4(base_image);
  if (!usage.ok()) return usage.status();
  return ConvertOver(TarStats{usage->entries, usage->data_bytes, usage->blocks}, layers, out_path,
                     /*whiteouts=*/true, [&](Ext4Writer* w) { return CopyExt4(base_image, w); });
}

absl::Status ConvertRootfsTar(const std::string& tar_path, const std::string& out_path) {
  return ConvertLayers({tar_path}, out_path, false);
}

}  // namespace airlock
