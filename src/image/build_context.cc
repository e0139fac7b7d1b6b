#include "src/image/build_context.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/common/sha256.h"
#include "src/image/docker_ignore.h"
#include "src/image/tar_path.h"
#include "src/image/tar_to_ext4.h"

namespace airlock {
namespace {

struct WriteCloser {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

absl::Status ReadError(archive* a, const std::string& what) {
  const char* message = archive_error_string(a);
  return absl::InvalidArgumentError(absl::StrCat("the build context is not a valid tar (", what,
                                                 ": ", message ? message : "unreadable entry",
                                                 ")"));
}

bool HasGlob(absl::string_view s) { return s.find_first_of("*?[\\") != absl::string_view::npos; }

// A tar inside the entry the outer archive stands at, read as the outer one streams: what ADD
// unpacks.
struct NestedTar {
  archive* outer;
  std::vector<char> buf = std::vector<char>(1 << 16);
};

la_ssize_t ReadNested(archive*, void* data, const void** out) {
  auto* nested = static_cast<NestedTar*>(data);
  *out = nested->buf.data();
  return archive_read_data(nested->outer, nested->buf.data(), nested->buf.size());
}

// nullptr when the bytes are not even a stream libarchive could start on.
ArchivePtr OpenNestedTar(NestedTar* nested) {
  ArchivePtr a(archive_read_new());
  SupportInProcessFilters(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open(a.get(), nested, nullptr, ReadNested, nullptr) != ARCHIVE_OK) return {};
  return a;
}

}  // namespace

LayerTarWriter::LayerTarWriter() : out_(archive_write_new()) {
  archive_write_set_format_pax_restricted(out_);
}

LayerTarWriter::~LayerTarWriter() { archive_write_free(out_); }

absl::Status LayerTarWriter::Open(const std::string& path) {
  path_ = path;
  if (archive_write_open_filename(out_, path.c_str()) != ARCHIVE_OK) {
    return absl::UnavailableError(absl::StrCat("write ", path, ": ", archive_error_string(out_)));
  }
  return absl::OkStatus();
}

absl::Status LayerTarWriter::Add(const std::string& path, const Ext4Entry& entry,
                                 const Ext4Writer::Reader& read) {
  std::unique_ptr<archive_entry, EntryFree> e(archive_entry_new());
  archive_entry_set_pathname(e.get(), path.c_str());
  archive_entry_set_perm(e.get(), entry.meta.mode & 07777);
  archive_entry_set_uid(e.get(), entry.meta.uid);
  archive_entry_set_gid(e.get(), entry.meta.gid);
  archive_entry_set_mtime(e.get(), entry.meta.mtime, 0);
  bool data = false;
  switch (entry.type) {
    case S_IFDIR:
      archive_entry_set_filetype(e.get(), AE_IFDIR);
      break;
    case S_IFLNK:
      archive_entry_set_filetype(e.get(), AE_IFLNK);
      archive_entry_set_symlink(e.get(), entry.symlink_target.c_str());
      break;
    case S_IFREG:
      archive_entry_set_filetype(e.get(), AE_IFREG);
      if (!entry.hard_link_to.empty()) {
        archive_entry_set_hardlink(e.get(), entry.hard_link_to.c_str());
      } else {
        archive_entry_set_size(e.get(), static_cast<la_int64_t>(entry.size));
        data = true;
      }
      break;
    default:
      archive_entry_set_filetype(e.get(), entry.type == S_IFCHR   ? AE_IFCHR
                                          : entry.type == S_IFBLK ? AE_IFBLK
                                                                  : AE_IFIFO);
      archive_entry_set_rdevmajor(e.get(), entry.rdev_major);
      archive_entry_set_rdevminor(e.get(), entry.rdev_minor);
      break;
  }
  for (const auto& [name, value] : entry.xattrs) {
    archive_entry_xattr_add_entry(e.get(), name.c_str(), value.data(), value.size());
  }
  if (archive_write_header(out_, e.get()) != ARCHIVE_OK) {
    return absl::UnavailableError(
        absl::StrCat("write the layer's entry ", path, ": ", archive_error_string(out_)));
  }
  if (!data) return absl::OkStatus();
  std::vector<char> buf(1 << 16);
  uint64_t left = entry.size;
  while (left > 0) {
    absl::StatusOr<size_t> n = read(buf.data(), buf.size());
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::DataLossError(absl::StrCat(path, " ended early"));
    size_t keep = static_cast<size_t>(std::min<uint64_t>(*n, left));
    if (archive_write_data(out_, buf.data(), keep) < 0) {
      return absl::UnavailableError(absl::StrCat("write the layer: ", archive_error_string(out_)));
    }
    left -= keep;
  }
  return absl::OkStatus();
}

absl::Status LayerTarWriter::Close() {
  if (archive_write_close(out_) != ARCHIVE_OK) {
    return absl::UnavailableError(absl::StrCat("write ", path_, ": ", archive_error_string(out_)));
  }
  return absl::OkStatus();
}

absl::StatusOr<BuildContext> BuildContext::Open(const std::string& tar_path) {
  absl::StatusOr<ArchivePtr> a = OpenTar(tar_path);
  if (!a.ok()) return a.status();
  BuildContext context;
  context.tar_path_ = tar_path;
  context.entries_[""] = ContextEntry{.path = "", .type = S_IFDIR, .mode = 0755};
  uint64_t bytes = 0;
  archive_entry* entry;
  int r;
  std::vector<char> buf(1 << 16);
  while ((r = archive_read_next_header(a->get(), &entry)) == ARCHIVE_OK) {
    const char* raw = archive_entry_pathname(entry);
    if (raw == nullptr) return ReadError(a->get(), "an entry without a name");
    absl::StatusOr<std::string> path = CleanTarPath(raw);
    if (!path.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the build context: ", path.status().message()));
    }
    if (context.entries_.size() >= kMaxContextEntries) {
      return absl::InvalidArgumentError(absl::StrCat("the build context holds more than ",
                                                     kMaxContextEntries,
                                                     " files; leave some out with .dockerignore"));
    }
    ContextEntry e;
    e.path = *path;
    e.mode = archive_entry_perm(entry) & 07777;
    e.mtime = archive_entry_mtime(entry);
    if (archive_entry_hardlink(entry) != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("the build context holds a hard link (", e.path,
                       "); `airlock image build` sends each file whole"));
    }
    switch (archive_entry_filetype(entry)) {
      case AE_IFDIR:
        e.type = S_IFDIR;
        break;
      case AE_IFLNK:
        e.type = S_IFLNK;
        e.link = archive_entry_symlink(entry) ? archive_entry_symlink(entry) : "";
        break;
      case AE_IFREG: {
        e.type = S_IFREG;
        Sha256 sha;
        for (;;) {
          la_ssize_t n = archive_read_data(a->get(), buf.data(), buf.size());
          if (n < 0) return ReadError(a->get(), e.path);
          if (n == 0) break;
          sha.Update(absl::string_view(buf.data(), static_cast<size_t>(n)));
          e.size += static_cast<uint64_t>(n);
          if ((bytes += static_cast<uint64_t>(n)) > kMaxContextBytes) {
            return absl::InvalidArgumentError(
                absl::StrCat("the build context holds more than ", kMaxContextBytes >> 30,
                             " GiB; leave some out with .dockerignore"));
          }
        }
        e.digest = sha.FinishHex();
        break;
      }
      default:
        continue;  // devices, fifos and sockets have no place in a build
    }
    if (e.path.empty()) {
      if (e.type == S_IFDIR) context.entries_[""].mode = e.mode;
      continue;
    }
    context.entries_[e.path] = std::move(e);
  }
  if (r != ARCHIVE_EOF) return ReadError(a->get(), "after the last entry");
  // A file's parents are directories of the context even when the tar did not list them.
  std::vector<std::string> parents;
  for (const auto& [path, e] : context.entries_) {
    for (size_t at = path.find('/'); at != std::string::npos; at = path.find('/', at + 1)) {
      parents.push_back(path.substr(0, at));
    }
  }
  for (const std::string& p : parents) {
    auto [it, added] = context.entries_.try_emplace(p);
    if (added) it->second = ContextEntry{.path = p, .type = S_IFDIR, .mode = 0755};
    if (it->second.type != S_IFDIR) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the build context has ", p, " both as a file and as a directory of other files"));
    }
  }
  return context;
}

absl::StatusOr<std::vector<const ContextEntry*>> BuildContext::Match(
    absl::string_view source) const {
  std::string cleaned = CleanSlashPath(absl::StrCat("/", source));  // rooted: `..` stops at /
  if (CleanSlashPath(source) == ".." || absl::StartsWith(CleanSlashPath(source), "../")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", source, "\" is outside the build context: a COPY takes files from the context only"));
  }
  std::string path = cleaned.substr(1);  // "" is the context's root
  std::vector<const ContextEntry*> out;
  if (!HasGlob(path)) {
    auto it = entries_.find(path);
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "\"", source, "\" is not in the build context (left out by .dockerignore?)"));
    }
    out.push_back(&it->second);
    return out;
  }
  for (const auto& [p, e] : entries_) {
    if (!p.empty() && DockerIgnore::Match(path, p)) out.push_back(&e);
  }
  if (out.empty()) {
    return absl::NotFoundError(
        absl::StrCat("\"", source, "\" matches nothing in the build context"));
  }
  return out;
}

std::vector<const ContextEntry*> BuildContext::Below(const ContextEntry& dir) const {
  std::vector<const ContextEntry*> out;
  std::string prefix = dir.path.empty() ? "" : dir.path + "/";
  for (auto it = entries_.lower_bound(prefix); it != entries_.end(); ++it) {
    if (!absl::StartsWith(it->first, prefix)) break;
    if (it->first != dir.path) out.push_back(&it->second);
  }
  return out;
}

absl::StatusOr<bool> BuildContext::IsTarArchive(const ContextEntry& entry) const {
  if (entry.type != S_IFREG) return false;
  absl::StatusOr<ArchivePtr> a = OpenTar(tar_path_);
  if (!a.ok()) return a.status();
  archive_entry* e;
  while (archive_read_next_header(a->get(), &e) == ARCHIVE_OK) {
    absl::StatusOr<std::string> path =
        CleanTarPath(archive_entry_pathname(e) ? archive_entry_pathname(e) : "");
    if (!path.ok() || *path != entry.path || archive_entry_filetype(e) != AE_IFREG) continue;
    NestedTar nested{a->get()};
    ArchivePtr inner = OpenNestedTar(&nested);
    if (inner == nullptr) return false;
    archive_entry* first;
    int r = archive_read_next_header(inner.get(), &first);
    return r == ARCHIVE_OK || r == ARCHIVE_WARN ||
           (r == ARCHIVE_EOF && archive_format(inner.get()) != 0);
  }
  return absl::DataLossError(absl::StrCat(entry.path, " is no longer in the build context"));
}

absl::Status BuildContext::WriteLayer(const std::vector<LayerItem>& items,
                                      const std::string& out_path,
                                      uint64_t max_unpacked_bytes) const {
  std::unique_ptr<archive, WriteCloser> out(archive_write_new());
  archive_write_set_format_pax_restricted(out.get());
  if (archive_write_open_filename(out.get(), out_path.c_str()) != ARCHIVE_OK) {
    return absl::UnavailableError(
        absl::StrCat("write ", out_path, ": ", archive_error_string(out.get())));
  }
  auto header = [&](const LayerItem& item, uint64_t size) -> absl::Status {
    std::unique_ptr<archive_entry, EntryFree> e(archive_entry_new());
    archive_entry_set_pathname(e.get(), item.dest.c_str());
    archive_entry_set_filetype(e.get(), item.type == S_IFDIR   ? AE_IFDIR
                                        : item.type == S_IFLNK ? AE_IFLNK
                                                               : AE_IFREG);
    archive_entry_set_perm(e.get(), item.mode & 07777);
    archive_entry_set_uid(e.get(), item.uid);
    archive_entry_set_gid(e.get(), item.gid);
    archive_entry_set_mtime(e.get(), item.source ? item.source->mtime : time(nullptr), 0);
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(size));
    if (item.type == S_IFLNK && item.source) {
      archive_entry_set_symlink(e.get(), item.source->link.c_str());
    }
    if (archive_write_header(out.get(), e.get()) != ARCHIVE_OK) {
      return absl::UnavailableError(absl::StrCat("write the layer's entry ", item.dest, ": ",
                                                 archive_error_string(out.get())));
    }
    return absl::OkStatus();
  };
  auto data = [&](const char* bytes, size_t n) -> absl::Status {
    if (n > 0 && archive_write_data(out.get(), bytes, n) < 0) {
      return absl::UnavailableError(
          absl::StrCat("write the layer: ", archive_error_string(out.get())));
    }
    return absl::OkStatus();
  };
  // Directories, links and inline files first (in order); then files read from the context,
  // as many passes as a file is copied to places (each pass copies each source once).
  std::multimap<std::string, const LayerItem*> pending;
  for (const LayerItem& item : items) {
    if (item.inline_content) {
      if (absl::Status s = header(item, item.inline_content->size()); !s.ok()) return s;
      if (absl::Status s = data(item.inline_content->data(), item.inline_content->size());
          !s.ok()) {
        return s;
      }
    } else if (item.type == S_IFREG && item.source) {
      pending.emplace(item.source->path, &item);
    } else {
      if (absl::Status s = header(item, 0); !s.ok()) return s;
    }
  }
  // An archive's entries under the item's directory, as the archive has them (owners and modes
  // unless the instruction sets them; extended attributes are dropped).
  uint64_t unpacked = 0, unpacked_entries = 0;
  auto unpack = [&](archive* outer, const LayerItem& item) -> absl::Status {
    NestedTar nested{outer};
    ArchivePtr inner = OpenNestedTar(&nested);
    std::string what = absl::StrCat("ADD ", item.source->path, ": ");
    if (!inner) return absl::InvalidArgumentError(absl::StrCat(what, "not a tar archive"));
    std::vector<char> chunk(1 << 16);
    archive_entry* in;
    int r;
    while ((r = archive_read_next_header(inner.get(), &in)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
      absl::StatusOr<std::string> rel =
          CleanTarPath(archive_entry_pathname(in) ? archive_entry_pathname(in) : "");
      if (!rel.ok()) return absl::InvalidArgumentError(what + std::string(rel.status().message()));
      std::string base =
          rel->substr(rel->rfind('/') == std::string::npos ? 0 : rel->rfind('/') + 1);
      if (absl::StartsWith(base, ".wh.")) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, "holds ", *rel, ", a name that means a removal in image layers; rename it"));
      }
      if (++unpacked_entries > kMaxContextEntries) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, "holds more than ", kMaxContextEntries, " entries"));
      }
      std::string dest = rel->empty() ? item.dest : absl::StrCat(item.dest, "/", *rel);
      std::unique_ptr<archive_entry, EntryFree> e(archive_entry_clone(in));
      archive_entry_set_pathname(e.get(), dest.c_str());
      archive_entry_xattr_clear(e.get());
      archive_entry_set_uname(e.get(), nullptr);
      archive_entry_set_gname(e.get(), nullptr);
      if (item.own) {
        archive_entry_set_uid(e.get(), item.uid);
        archive_entry_set_gid(e.get(), item.gid);
      }
      if (item.set_mode) archive_entry_set_perm(e.get(), item.mode & 07777);
      if (const char* link = archive_entry_hardlink(in); link != nullptr) {
        absl::StatusOr<std::string> to = CleanTarPath(link);
        if (!to.ok()) return absl::InvalidArgumentError(what + std::string(to.status().message()));
        archive_entry_set_hardlink(e.get(), absl::StrCat(item.dest, "/", *to).c_str());
      } else if (archive_entry_filetype(in) == AE_IFSOCK) {
        continue;
      }
      la_int64_t size = archive_entry_size(in);
      if (size < 0 || (unpacked += static_cast<uint64_t>(size)) > max_unpacked_bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, "unpacks to more than ", max_unpacked_bytes >> 20,
                         " MiB, more than this build may write; unpack it in a RUN, or leave "
                         "out what is not needed"));
      }
      if (archive_write_header(out.get(), e.get()) != ARCHIVE_OK) {
        return absl::UnavailableError(
            absl::StrCat("write the layer's entry ", dest, ": ", archive_error_string(out.get())));
      }
      for (;;) {
        la_ssize_t n = archive_read_data(inner.get(), chunk.data(), chunk.size());
        if (n < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, "a damaged archive (", archive_error_string(inner.get()), ")"));
        }
        if (n == 0) break;
        if (absl::Status s = data(chunk.data(), static_cast<size_t>(n)); !s.ok()) return s;
      }
    }
    if (r != ARCHIVE_EOF) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "a damaged archive (", archive_error_string(inner.get()), ")"));
    }
    return absl::OkStatus();
  };
  std::vector<char> buf(1 << 16);
  while (!pending.empty()) {
    absl::StatusOr<ArchivePtr> a = OpenTar(tar_path_);
    if (!a.ok()) return a.status();
    archive_entry* entry;
    int r;
    std::set<std::string> done;
    while (!pending.empty() && (r = archive_read_next_header(a->get(), &entry)) == ARCHIVE_OK) {
      absl::StatusOr<std::string> path =
          CleanTarPath(archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "");
      if (!path.ok() || archive_entry_filetype(entry) != AE_IFREG) continue;
      auto it = pending.find(*path);
      if (it == pending.end() || done.count(*path)) continue;
      const LayerItem& item = *it->second;
      if (item.unpack) {
        if (absl::Status s = unpack(a->get(), item); !s.ok()) return s;
        done.insert(*path);
        pending.erase(it);
        continue;
      }
      if (absl::Status s = header(item, item.source->size); !s.ok()) return s;
      uint64_t written = 0;
      for (;;) {
        la_ssize_t n = archive_read_data(a->get(), buf.data(), buf.size());
        if (n < 0) return ReadError(a->get(), *path);
        if (n == 0) break;
        size_t keep = static_cast<size_t>(
            std::min<uint64_t>(static_cast<uint64_t>(n), item.source->size - written));
        if (absl::Status s = data(buf.data(), keep); !s.ok()) return s;
        written += keep;
      }
      if (written != item.source->size) {
        return absl::DataLossError(absl::StrCat(*path, " changed in the build context"));
      }
      done.insert(*path);
      pending.erase(it);
    }
    if (done.empty()) {
      return absl::DataLossError(
          absl::StrCat(pending.begin()->first, " is no longer in the build context"));
    }
  }
  if (archive_write_close(out.get()) != ARCHIVE_OK) {
    return absl::UnavailableError(
        absl::StrCat("write ", out_path, ": ", archive_error_string(out.get())));
  }
  return absl::OkStatus();
}

}  // namespace airlock
