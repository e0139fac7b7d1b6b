#include "src/daemon/volumes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/common/byte_size.h"
#include "src/common/channel_messages.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/hex.h"
#include "src/common/log.h"
#include "src/common/unique_fd.h"
#include "src/image/ext4_writer.h"
#include "src/image/tar_to_ext4.h"
#include "src/vm/snapshot.h"
#include "src/vm/snapshot_manifest.h"
#include "src/vm/vm_driver.h"

namespace airlock {
namespace {

// One inode per 16 KiB, as mkfs.ext4 would; an import of more files gets more, up to one per
// 4 KiB block.
constexpr uint64_t kBytesPerInode = 16 << 10;
constexpr uint64_t kBlockSize = 4096;

// A new disk in the volumes directory, unnamed until it is whole: the filesystem, then the
// file stretched to kVolumeDiskBytes (sparse).
absl::StatusOr<UniqueFd> WriteDisk(const std::string& dir, const Ext4Writer::Options& options,
                                   const std::string& tar_path) {
  absl::StatusOr<UniqueFd> fd = UnnamedFile(dir);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<std::unique_ptr<Ext4Writer>> writer =
      Ext4Writer::Create(absl::StrCat("/proc/self/fd/", fd->get()), options);
  if (!writer.ok()) return writer.status();
  if (!tar_path.empty()) {
    if (absl::Status s = ApplyTar(tar_path, writer->get(), /*whiteouts=*/false); !s.ok()) return s;
  }
  if (absl::Status s = (*writer)->Finish(); !s.ok()) return s;
  if (ftruncate(fd->get(), static_cast<off_t>(kVolumeDiskBytes)) != 0) {
    return ErrnoStatus("size a volume's disk");
  }
  if (fsync(fd->get()) != 0) return ErrnoStatus("fsync a volume's disk");
  return fd;
}

// Gives the disk open as fd the name path (replacing what is there) and makes it durable.
absl::Status Install(int fd, const std::string& path) {
  std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  if (absl::Status s = LinkOpenFile(fd, tmp, "link a volume's disk"); !s.ok()) return s;
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = ErrnoStatus("rename", tmp);
    unlink(tmp.c_str());
    return s;
  }
  return SyncDirectory(DirName(path));
}

std::string NewId() { return RandomHex(8); }

// Whether the ext4 on the disk at path says its journal needs replaying (a writer's VM ended
// without freezing or unmounting it). One fixed field of the superblock (s_feature_incompat,
// RECOVER), read as a number: nothing else of what a guest wrote is looked at.
absl::StatusOr<bool> NeedsRecovery(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path);
  unsigned char incompat[4];
  if (pread(fd.get(), incompat, sizeof incompat, 1024 + 0x60) != sizeof incompat) {
    return ErrnoStatus("read the superblock of", path);
  }
  return (incompat[0] & 0x4) != 0;
}

}  // namespace

Volumes::Volumes(StateStore* store, QuotaAdmission* quotas, const SessionLayout& layout)
    : store_(store), quotas_(quotas), layout_(layout) {}

absl::Status Volumes::Recover() {
  if (absl::Status s = MakeDirectories(layout_.volumes(), 0700); !s.ok()) return s;
  if (absl::Status s = store_->volumes().ClearBusy(); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> ids = store_->volumes().AllIds();
  if (!ids.ok()) return ids.status();
  std::set<std::string> known;
  for (const std::string& id : *ids) known.insert(id + ".ext4");
  for (const std::string& name : ListDirectory(layout_.volumes())) {
    if (known.contains(name)) continue;
    std::string path = absl::StrCat(layout_.volumes(), "/", name);
    LogInfo(absl::StrCat("removing ", path, ": no volume names it (left by a crash)"));
    if (unlink(path.c_str()) != 0) LogWarning(absl::StrCat("could not remove ", path));
  }
  return absl::OkStatus();
}

absl::Status Volumes::Adopt(const Principal& who, const SessionHandoff::Published& published,
                            SessionHandoff& handoff) {
  const SessionRecord& session = published.record;
  struct Slot {
    std::optional<VolumeRecord> here;  // this host's row of the volume
    bool same = false;                 // this host's copy is the published disk already
  };
  // Every volume is checked before any changes.
  std::vector<Slot> slots(session.volumes.size());
  for (size_t i = 0; i < session.volumes.size(); ++i) {
    const VolumeAttachment& a = session.volumes[i];
    if (absl::Status s = CheckVolumeName(a.name, published.volumes[i].snapshot); !s.ok()) return s;
    if (a.volume_id.size() != 16 ||
        a.volume_id.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return absl::DataLossError(absl::StrCat("volume ", a.name, " has a malformed id"));
    }
    absl::StatusOr<VolumeRecord> here = store_->volumes().Get(session.tenant, a.name);
    if (absl::IsNotFound(here.status())) continue;
    if (!here.ok()) return here.status();
    if (here->id != a.volume_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          "session ", session.id, " attaches volume ", a.name, " of host ", published.host,
          ", and this host has another volume of that name: remove this one (airlock volume rm ",
          a.name, ") or resume the session on host ", published.host));
    }
    UniqueFd fd(open(layout_.Volume(a.volume_id).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    absl::StatusOr<std::string> digest =
        fd.valid() ? SparseSha256(fd.get()) : absl::StatusOr<std::string>(absl::NotFoundError(""));
    slots[i].same = digest.ok() && absl::StrCat("sha256:", *digest) == published.volumes[i].digest;
    for (const std::string& h : here->holders) {
      if (h == session.id || slots[i].same) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "session ", session.id, " attaches volume ", a.name, " as host ", published.host,
          " left it, and session ", h, " here holds this host's older copy: remove that session ",
          "first, or resume this one on host ", published.host));
    }
    slots[i].here = *std::move(here);
  }
  for (size_t i = 0; i < session.volumes.size(); ++i) {
    const VolumeAttachment& a = session.volumes[i];
    const std::optional<VolumeRecord>& here = slots[i].here;
    std::string path = layout_.Volume(a.volume_id);
    if (!slots[i].same) {
      std::string fetched = path + ".fetch";
      unlink(fetched.c_str());  // one a crash left
      if (absl::Status s = handoff.FetchVolume(published, i, fetched); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("volume ", a.name, ": ", s.message()));
      }
      if (rename(fetched.c_str(), path.c_str()) != 0) {
        absl::Status s = ErrnoStatus("rename", fetched);
        unlink(fetched.c_str());
        return s;
      }
      if (absl::Status s = SyncDirectory(layout_.volumes()); !s.ok()) return s;
    }
    VolumeRecord v{.id = a.volume_id,
                   .tenant = session.tenant,
                   .name = a.name,
                   .size_bytes = published.volumes[i].size_bytes,
                   .read_only = published.volumes[i].snapshot,
                   .origin = here ? here->origin : absl::StrCat("from host ", published.host),
                   .generation = a.generation,
                   .created_ms = here ? here->created_ms : NowUnixMs()};
    if (absl::Status s = store_->volumes().Adopt(
            who, v,
            absl::StrCat("with session ", session.id, " from host ", published.host,
                         slots[i].same ? " (this host's copy was the same)" : ""));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<VolumeRecord> Volumes::Get(const Principal& who, const std::string& name) {
  return store_->volumes().Get(who.Tenant(), name);
}

absl::StatusOr<VolumeRecord> Volumes::Create(const Principal& who, const std::string& name,
                                             uint64_t size_bytes) {
  if (absl::Status s = CheckVolumeName(name); !s.ok()) return s;
  if (size_bytes < kMinVolumeBytes || size_bytes > kMaxVolumeBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a volume's size is ", FormatBytes(kMinVolumeBytes), " to ",
                     FormatBytes(kMaxVolumeBytes), " (--size 10g), not ", FormatBytes(size_bytes)));
  }
  size_bytes = size_bytes / kBlockSize * kBlockSize;
  absl::StatusOr<QuotaReservations::Hold> admitted =
      quotas_->Admit(who, who.Tenant(), {.disk_bytes = size_bytes}, "volume.create " + name);
  if (!admitted.ok()) {
    return absl::Status(admitted.status().code(), absl::StrCat("cannot create volume ", name, ": ",
                                                               admitted.status().message()));
  }
  VolumeRecord v{.id = NewId(),
                 .tenant = who.Tenant(),
                 .name = name,
                 .size_bytes = size_bytes,
                 .created_ms = NowUnixMs()};
  if (v.id.empty()) return absl::InternalError("getrandom failed");
  absl::StatusOr<UniqueFd> disk = WriteDisk(
      layout_.volumes(),
      {.size_bytes = size_bytes,
       .inode_count =
           static_cast<uint32_t>(std::min<uint64_t>(size_bytes / kBytesPerInode, 1u << 31)),
       .label = name.substr(0, 16),
       .journal = true},
      "");
  if (!disk.ok()) return disk.status();
  if (absl::Status s = Install(disk->get(), layout_.Volume(v.id)); !s.ok()) return s;
  absl::Status created = admitted->SettleWith({.disk_bytes = size_bytes}, [&] {
    return store_->volumes().Create(who, v, "volume.create", FormatBytes(size_bytes));
  });
  if (!created.ok()) {
    unlink(layout_.Volume(v.id).c_str());
    return created;
  }
  return v;
}

absl::StatusOr<std::vector<VolumeRecord>> Volumes::List(const Principal& who) {
  return store_->volumes().List(who.Tenant());
}

absl::Status Volumes::Remove(const Principal& who, const std::string& name) {
  absl::StatusOr<VolumeRecord> removed = store_->volumes().Remove(who, who.Tenant(), name);
  if (!removed.ok()) return removed.status();
  std::string path = layout_.Volume(removed->id);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    // The next start-up removes it: no volume names it any more.
    LogWarning(absl::StrCat("volume ", name, ": could not remove ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<VolumeRecord> Volumes::Snapshot(const Principal& who, const std::string& name,
                                               const std::string& snapshot_name) {
  if (absl::Status s = CheckVolumeName(snapshot_name, /*snapshot=*/true); !s.ok()) return s;
  absl::StatusOr<VolumeRecord> source =
      store_->volumes().Mark(who.Tenant(), name, "snapshot", /*read_write_only=*/true);
  if (!source.ok()) return source.status();
  absl::StatusOr<VolumeRecord> made = [&]() -> absl::StatusOr<VolumeRecord> {
    // A paused holder's volume is frozen: clean on disk, and nobody writes it meanwhile.
    absl::StatusOr<QuotaReservations::Hold> admitted = quotas_->Admit(
        who, who.Tenant(), {.disk_bytes = source->size_bytes}, "volume.snapshot " + snapshot_name);
    if (!admitted.ok()) {
      return absl::Status(
          admitted.status().code(),
          absl::StrCat("cannot snapshot volume ", name, ": ", admitted.status().message()));
    }
    UniqueFd from(open(layout_.Volume(source->id).c_str(), O_RDONLY | O_CLOEXEC));
    if (!from.valid()) return ErrnoStatus("open volume", name);
    absl::StatusOr<UniqueFd> copy = UnnamedFile(layout_.volumes());
    if (!copy.ok()) return copy.status();
    if (absl::Status s = CopyDisk(from.get(), copy->get()); !s.ok()) return s;
    if (fsync(copy->get()) != 0) return ErrnoStatus("fsync a volume's disk");
    VolumeRecord v{.id = NewId(),
                   .tenant = who.Tenant(),
                   .name = snapshot_name,
                   .size_bytes = source->size_bytes,
                   .read_only = true,
                   .origin = "snapshot of " + name,
                   .created_ms = NowUnixMs()};
    if (v.id.empty()) return absl::InternalError("getrandom failed");
    if (absl::Status s = Install(copy->get(), layout_.Volume(v.id)); !s.ok()) return s;
    absl::Status created = admitted->SettleWith({.disk_bytes = v.size_bytes}, [&] {
      return store_->volumes().Create(who, v, "volume.snapshot", "of " + name);
    });
    if (!created.ok()) {
      unlink(layout_.Volume(v.id).c_str());
      return created;
    }
    return v;
  }();
  LogIfFailed(store_->volumes().Unmark(who, *source, false, "", ""),
              absl::StrCat("volume ", name, " left marked busy"));
  return made;
}

absl::StatusOr<VolumeRecord> Volumes::Import(const Principal& who, const std::string& name,
                                             const std::string& tar_path) {
  absl::StatusOr<VolumeRecord> v =
      store_->volumes().Mark(who.Tenant(), name, "import", /*read_write_only=*/false);
  if (!v.ok()) return v.status();
  TarStats stats;
  absl::Status imported = [&]() -> absl::Status {
    absl::StatusOr<TarStats> scanned = ScanTar(tar_path);
    if (!scanned.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a tar archive this volume can take (a directory or a .tar, .tar.gz, "
                       ".tar.zst...): ",
                       scanned.status().message()));
    }
    stats = *scanned;
    if (stats.entries == 0) {
      // A file that begins with zeros, such as a filesystem image, reads as an empty tar.
      return absl::InvalidArgumentError(
          "not a tar archive this volume can take: it holds no entries (a filesystem image is "
          "not imported; a directory or a .tar, .tar.gz, .tar.zst... is); the volume is "
          "unchanged");
    }
    uint64_t blocks = v->size_bytes / kBlockSize;
    // Room for the journal, the inode tables and what ScanTar cannot foresee.
    uint64_t inodes = std::max<uint64_t>(v->size_bytes / kBytesPerInode, stats.entries + 1024);
    uint64_t overhead = std::min<uint64_t>(blocks / 8, 64ull << 20 >> 12) + inodes / 16 + 1024;
    if (inodes > blocks / 2 || inodes >= (1ull << 31)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the archive holds ", stats.entries, " entries; volume ", name, " (",
                       FormatBytes(v->size_bytes), ") holds at most ", blocks / 2,
                       ": make a larger volume or import fewer files"));
    }
    if (stats.blocks + overhead > blocks) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the archive needs about ", FormatBytes((stats.blocks + overhead) * kBlockSize),
          "; volume ", name, " is ", FormatBytes(v->size_bytes),
          ": make a larger volume (airlock volume create NAME --size ...)"));
    }
    absl::StatusOr<UniqueFd> disk = WriteDisk(layout_.volumes(),
                                              {.size_bytes = v->size_bytes,
                                               .inode_count = static_cast<uint32_t>(inodes),
                                               .label = name.substr(0, 16),
                                               .journal = true},
                                              tar_path);
    if (!disk.ok()) return disk.status();
    return Install(disk->get(), layout_.Volume(v->id));
  }();
  std::string outcome =
      imported.ok() ? absl::StrCat(stats.entries, " entries, ", FormatBytes(stats.data_bytes))
                    : absl::StrCat("failed: ", imported.message());
  absl::Status unmarked =
      store_->volumes().Unmark(who, *v, imported.ok(), "volume.import", outcome);
  if (!imported.ok()) return imported;
  if (!unmarked.ok()) return unmarked;
  return store_->volumes().Get(who.Tenant(), name);
}

absl::StatusOr<std::vector<VolumeAttachment>> Volumes::Resolve(
    const Principal& who, const std::vector<VolumeRequest>& requests) {
  if (requests.size() > kVolumeSlots) {
    return absl::InvalidArgumentError(absl::StrCat("a session attaches at most ", kVolumeSlots,
                                                   " volumes, not ", requests.size()));
  }
  std::vector<VolumeAttachment> out;
  std::set<std::string> names, paths;
  for (const VolumeRequest& r : requests) {
    if (!IsVolumeMountPoint(r.path)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a volume cannot be mounted at \"", r.path,
          "\": use an absolute path such as /data or /root/.cache/pip (not /, nor in /proc, "
          "/sys, /dev, /run or /workspace, nor a top-level system directory such as /etc)"));
    }
    if (!paths.insert(r.path).second) {
      return absl::InvalidArgumentError(absl::StrCat("two volumes are mounted at ", r.path));
    }
    if (!names.insert(r.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("volume ", r.name, " is attached twice; attach it once"));
    }
    absl::StatusOr<VolumeRecord> v = Get(who, r.name);
    if (!v.ok()) return v.status();
    if (r.read_only && v->holders.empty()) {
      // A reader mounts without replaying the journal (it cannot write), so it must find none
      // to replay. (A held volume is checked by who holds it: the insert refuses a reader of a
      // written one.)
      absl::StatusOr<bool> dirty = NeedsRecovery(layout_.Volume(v->id));
      if (!dirty.ok()) return dirty.status();
      if (*dirty) {
        return absl::FailedPreconditionError(absl::StrCat(
            "volume ", r.name,
            " was not released cleanly (the VM of the session that last "
            "wrote it ended without letting go of it), so it cannot be read as it is: attach it "
            "read-write once (airlock run --volume ",
            r.name,
            ":/v -- true), which replays its "
            "journal, then read-only"));
      }
    }
    out.push_back({.volume_id = v->id,
                   .name = v->name,
                   .path = r.path,
                   .read_only = r.read_only,
                   .generation = v->generation});
  }
  return out;
}

uint64_t Volumes::ReadWriteBytes(const SessionRecord& session) {
  absl::StatusOr<std::vector<VolumeRecord>> all = store_->volumes().List(session.tenant);
  uint64_t bytes = 0;
  for (const VolumeAttachment& a : session.volumes) {
    if (a.read_only || !all.ok()) continue;
    for (const VolumeRecord& v : *all) {
      if (v.id == a.volume_id) bytes += v.size_bytes;
    }
  }
  return bytes;
}

absl::StatusOr<std::vector<VolumeAttachment>> Volumes::CopyForFork(
    const Principal& who, const SessionRecord& source, const std::vector<int>& disks,
    const std::string& child_id, std::vector<std::string>* made_names) {
  absl::StatusOr<std::vector<VolumeRecord>> all = store_->volumes().List(source.tenant);
  if (!all.ok()) return all.status();
  std::vector<VolumeAttachment> out = source.volumes;
  for (size_t slot = 0; slot < out.size(); ++slot) {
    VolumeAttachment& a = out[slot];
    if (a.read_only) continue;
    auto from = std::find_if(all->begin(), all->end(),
                             [&](const VolumeRecord& v) { return v.id == a.volume_id; });
    if (from == all->end() || slot >= disks.size() || disks[slot] < 0) {
      return absl::NotFoundError(absl::StrCat("volume ", a.name, " of the session is gone"));
    }
    absl::StatusOr<UniqueFd> copy = UnnamedFile(layout_.volumes());
    if (!copy.ok()) return copy.status();
    if (absl::Status s = CopyDisk(disks[slot], copy->get()); !s.ok()) return s;
    if (fsync(copy->get()) != 0) return ErrnoStatus("fsync a volume's disk");
    VolumeRecord v{.id = NewId(),
                   .tenant = source.tenant,
                   .name = absl::StrCat(from->name.substr(0, 50), "-", child_id),
                   .size_bytes = from->size_bytes,
                   .origin = absl::StrCat("fork of ", from->name, " for session ", child_id),
                   .created_ms = NowUnixMs()};
    if (v.id.empty()) return absl::InternalError("getrandom failed");
    if (absl::Status s = Install(copy->get(), layout_.Volume(v.id)); !s.ok()) return s;
    if (absl::Status s = store_->volumes().Create(who, v, "volume.fork", v.origin); !s.ok()) {
      unlink(layout_.Volume(v.id).c_str());
      return s;
    }
    made_names->push_back(v.name);
    a.volume_id = v.id;
    a.name = v.name;
    a.generation = 0;
  }
  return out;
}

absl::Status Volumes::CheckUnchanged(const SessionRecord& session) {
  if (session.volumes.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<VolumeRecord>> all = store_->volumes().List(session.tenant);
  if (!all.ok()) return all.status();
  for (const VolumeAttachment& a : session.volumes) {
    auto v = std::find_if(all->begin(), all->end(),
                          [&](const VolumeRecord& r) { return r.id == a.volume_id; });
    if (v == all->end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("volume ", a.name, " of session ", session.id, " is gone"));
    }
    if (v->generation != a.generation) {
      return absl::FailedPreconditionError(
          absl::StrCat("volume ", a.name, " changed since session ", session.id,
                       " was paused; its guest's cache would not match the disk"));
    }
  }
  return absl::OkStatus();
}

}  // namespace airlock
