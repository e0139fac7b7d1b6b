#include "src/daemon/session_handoff.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/hex.h"
#include "src/common/log.h"
#include "src/common/sha256.h"
#include "src/common/unique_fd.h"
#include "src/daemon/fleet_record.h"
#include "src/providers/blob_digest.h"
#include "src/vm/snapshot.h"
#include "src/vm/snapshot_manifest.h"
#include "src/vm/snapshot_pack.h"
#include "src/vm/vm_driver.h"

namespace airlock {
namespace {

// An entry of the fleet's session index.
constexpr char kIndexHeader[] = "airlock-session-index 1\n";
// An image's metadata (image.json: its run config and where it came from).
constexpr size_t kMaxImageMeta = 1 << 20;
// Beside an image's rootfs.ext4: the SparseSha256 of it, its blob's digest in a fleet.
constexpr char kRootfsDigestFile[] = "rootfs.blob-sha256";
// The largest root filesystem a published image may unpack to.
constexpr uint64_t kMaxImageRootfs = 64ull << 30;

// A pipe whose ends close on destruction.
struct Pipe {
  UniqueFd read, write;
};
absl::StatusOr<Pipe> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
  // 1 MiB rather than 64 KiB: the two threads at its ends switch 16 times less often. Best
  // effort (the system's pipe-max-size may be lower).
  fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

}  // namespace

absl::StatusOr<std::unique_ptr<SessionHandoff>> SessionHandoff::Start(
    std::unique_ptr<providers::BlobStore> blobs, std::unique_ptr<providers::EtcdClient> etcd,
    HandoffOptions options, std::string key) {
  std::unique_ptr<SessionHandoff> handoff(
      new SessionHandoff(std::move(blobs), std::move(etcd), std::move(options), std::move(key)));
  SessionHandoff* self = handoff.get();  // outlives every lease it holds
  handoff->lease_options_ = providers::HostLeaseOptions{
      .prefix = handoff->options_.prefix,
      .host_id = handoff->options_.host_id,
      .ttl_seconds = handoff->options_.ttl_seconds,
      .capacity_json = handoff->options_.capacity_json,
      .on_lost = [self](const absl::Status& why) {
        LogError(absl::StrCat("host ", self->host_id(),
                              " lost its etcd lease: other hosts may take its sessions over; "
                              "it rejoins once etcd answers (",
                              why.message(), ")"));
        absl::MutexLock lock(&self->lease_mu_);
        self->lease_lost_ = true;
      }};
  const providers::HostLeaseOptions& lease = handoff->lease_options_;
  absl::Time give_up = absl::Now() + handoff->options_.wait_for_previous;
  bool told = false;
  for (;;) {
    absl::StatusOr<std::unique_ptr<providers::HostLease>> started =
        providers::HostLease::Start(handoff->etcd_.get(), lease);
    if (started.ok()) {
      absl::MutexLock lock(&handoff->lease_mu_);
      handoff->lease_ = *std::move(started);
      break;
    }
    // Registered already: this host's previous run, whose lease has yet to expire.
    if (!absl::IsFailedPrecondition(started.status()) || absl::Now() >= give_up) {
      return started.status();
    }
    if (!told) {
      LogInfo(absl::StrCat("waiting for the etcd lease of host ", lease.host_id,
                           "'s previous run to expire"));
      told = true;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  handoff->rejoiner_ = std::thread([self] { self->Rejoin(); });
  return handoff;
}

SessionHandoff::~SessionHandoff() {
  {
    absl::MutexLock lock(&lease_mu_);
    stopping_ = true;
  }
  if (rejoiner_.joinable()) rejoiner_.join();
}

void SessionHandoff::OnRejoined(std::function<void()> fn) {
  absl::MutexLock lock(&rejoined_mu_);
  on_rejoined_ = std::move(fn);
}

void SessionHandoff::Rejoin() {
  for (;;) {
    {
      absl::MutexLock lock(&lease_mu_);
      auto lost_or_stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(lease_mu_) {
        return lease_lost_ || stopping_;
      };
      lease_mu_.Await(absl::Condition(&lost_or_stopping));
      if (stopping_) return;
      lease_lost_ = false;
    }
    // The lost lease is let go without revoking it (etcd may still count it, and claims of
    // sessions this host runs must not vanish at once); a new one can be had once it expires.
    lease()->Abandon();
    bool told = false;
    for (;;) {
      {
        absl::MutexLock lock(&lease_mu_);
        if (lease_mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Seconds(1))) return;
      }
      absl::StatusOr<std::unique_ptr<providers::HostLease>> started =
          providers::HostLease::Start(etcd_.get(), lease_options_);
      if (started.ok()) {
        std::shared_ptr<providers::HostLease> old;
        {
          absl::MutexLock lock(&lease_mu_);
          old = std::exchange(lease_, std::shared_ptr<providers::HostLease>(*std::move(started)));
        }
        break;
      }
      if (!told) {
        LogWarning(absl::StrCat("host ", host_id(), " cannot rejoin the fleet yet (",
                                started.status().message(), "); trying every second"));
        told = true;
      }
    }
    LogInfo(absl::StrCat("host ", host_id(), " rejoined the fleet with a new etcd lease"));
    absl::MutexLock lock(&rejoined_mu_);
    if (on_rejoined_) on_rejoined_();
  }
}

std::string SessionHandoff::SnapshotKey(const std::string& id) const {
  return absl::StrCat(options_.prefix, "/sessions/", id, "/snapshot");
}

std::string SessionHandoff::IndexPrefix(const std::string& tenant) const {
  return absl::StrCat(
      options_.prefix, "/index/",
      tenant.empty()
          ? ""
          : HexString(reinterpret_cast<const unsigned char*>(tenant.data()), tenant.size()) + "/");
}

absl::Status SessionHandoff::Index(const SessionRecord& record) {
  std::string value = SignFleetRecord(kIndexHeader,
                                      {{"host", options_.host_id},
                                       {"state", SessionStateName(record.state)},
                                       {"reason", record.reason},
                                       {"generation", absl::StrCat(SeenGeneration(record.id))}},
                                      record, key_);
  absl::StatusOr<bool> written = etcd_->PutWhile(lease()->OwnerKey(record.id), options_.host_id,
                                                 IndexPrefix(record.tenant) + record.id, value);
  return written.status();
}

absl::Status SessionHandoff::Unindex(const std::string& tenant, const std::string& id,
                                     bool whoever_wrote_it) {
  std::string key = IndexPrefix(tenant) + id;
  absl::StatusOr<std::optional<providers::EtcdKeyValue>> kv = etcd_->Get(key);
  if (!kv.ok() || !*kv) return kv.status();
  // Only this host's entry: a host that had the session before removes only its own record.
  absl::StatusOr<IndexEntry> entry = VerifyIndexEntry((*kv)->value);
  if (!whoever_wrote_it && entry.ok() && entry->host != options_.host_id) return absl::OkStatus();
  return etcd_->DeleteIf(key, (*kv)->mod_revision).status();
}

absl::StatusOr<SessionHandoff::IndexEntry> SessionHandoff::VerifyIndexEntry(
    absl::string_view value) const {
  absl::StatusOr<FleetRecord> verified =
      VerifyFleetRecord(value, kIndexHeader, {"host", "state", "reason", "generation"}, key_);
  if (!verified.ok()) return verified.status();
  std::optional<SessionState> state = ParseSessionState(verified->fields["state"]);
  if (!state || verified->fields["host"].empty()) {
    return absl::DataLossError("it names no host or no state");
  }
  uint64_t generation = 0;
  if (const std::string& g = verified->fields["generation"];
      !g.empty() && !absl::SimpleAtoi(g, &generation)) {
    return absl::DataLossError("its generation is not a number");
  }
  // A host that saw a newer generation of the session knows this entry was put back.
  if (uint64_t seen = SeenGeneration(verified->record.id); generation < seen) {
    return absl::DataLossError(
        absl::StrCat("it is older than the session this host saw (generation ", generation,
                     ", this host saw ", seen, "): an older entry was put back in etcd"));
  }
  IndexEntry entry{.record = std::move(verified->record),
                   .host = verified->fields["host"],
                   .generation = generation};
  entry.record.state = *state;
  entry.record.reason = verified->fields["reason"];
  return entry;
}

absl::StatusOr<std::vector<SessionHandoff::IndexEntry>> SessionHandoff::ReadIndex(
    const std::string& tenant) const {
  std::string prefix = IndexPrefix(tenant);
  absl::StatusOr<std::vector<providers::EtcdKeyValue>> kvs =
      etcd_->GetPrefix(prefix, providers::kMaxEtcdEntries);
  if (!kvs.ok()) return kvs.status();
  std::vector<IndexEntry> out;
  for (const providers::EtcdKeyValue& kv : *kvs) {
    absl::StatusOr<IndexEntry> entry = VerifyIndexEntry(kv.value);
    // Under the key it was written for: the tenant's, by its id.
    std::string expected =
        entry.ok() ? IndexPrefix(entry->record.tenant) + entry->record.id : std::string();
    if (!entry.ok() || kv.key != expected) {
      LogWarning(absl::StrCat(
          "fleet index: ", absl::CHexEscape(kv.key),
          " left out: ", entry.ok() ? "it is another session's entry" : entry.status().message()));
      continue;
    }
    out.push_back(*std::move(entry));
  }
  return out;
}

absl::StatusOr<SessionHandoff::IndexEntry> SessionHandoff::ReadIndex(const std::string& tenant,
                                                                     const std::string& id) const {
  if (absl::Status st = CheckSessionId(id); !st.ok()) return st;
  absl::StatusOr<std::optional<providers::EtcdKeyValue>> kv = etcd_->Get(IndexPrefix(tenant) + id);
  if (!kv.ok()) return kv.status();
  if (!*kv) return absl::NotFoundError(absl::StrCat("no session ", id, " in the fleet"));
  absl::StatusOr<IndexEntry> entry = VerifyIndexEntry((*kv)->value);
  if (!entry.ok()) return entry.status();
  if (entry->record.id != id || entry->record.tenant != tenant) {
    return absl::DataLossError(
        absl::StrCat("the fleet's entry of session ", id, " is another session's"));
  }
  return entry;
}

absl::Status SessionHandoff::ClaimAsItWas(const std::string& id) {
  uint64_t seen = SeenGeneration(id);
  if (absl::Status st = Claim(id); !st.ok()) return st;
  absl::StatusOr<Published> published = Find(id);
  if (!published.ok() || published->generation <= seen) return absl::OkStatus();
  LogIfFailed(Release(id), absl::StrCat("session ", id, ": not released"));
  return absl::FailedPreconditionError(absl::StrCat(
      "session ", id, " was taken over by host ", published->host,
      " meanwhile, which ran and paused it since (its published snapshot is newer than this "
      "host's)"));
}

absl::Status SessionHandoff::Claim(const std::string& id) {
  std::shared_ptr<providers::HostLease> lease = this->lease();
  absl::StatusOr<bool> claimed = lease->ClaimSession(id);
  if (!claimed.ok() && lease->lost()) {
    // Not "another host runs it" (FailedPrecondition): nobody knows until this host rejoins.
    return absl::UnavailableError(
        absl::StrCat("host ", host_id(),
                     " lost its etcd lease and rejoins the fleet once etcd answers; try again "
                     "shortly (",
                     claimed.status().message(), ")"));
  }
  if (!claimed.ok()) return claimed.status();
  if (*claimed) return absl::OkStatus();
  absl::StatusOr<std::optional<std::string>> owner = lease->Owner(id);
  std::string who = owner.ok() && *owner ? **owner : "another host";
  return absl::FailedPreconditionError(
      absl::StrCat("session ", id, " runs on host ", who,
                   "; pause it there first (or, if that host is gone, try again once its lease of ",
                   lease->ttl_seconds(), " s has expired)"));
}

absl::Status SessionHandoff::Release(const std::string& id) { return lease()->ReleaseSession(id); }

absl::Status SessionHandoff::PutBytes(const std::string& digest, const std::string& bytes,
                                      Pins* pins) {
  if (absl::Status st = Pin(digest, pins); !st.ok()) return st;
  absl::StatusOr<uint64_t> present = blobs_->Stat(digest);
  if (present.ok() && *present == bytes.size()) return absl::OkStatus();
  UniqueFd fd(memfd_create("airlock-blob", MFD_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("memfd_create");
  if (absl::Status st = WriteAll(fd.get(), bytes); !st.ok()) return st;
  if (lseek(fd.get(), 0, SEEK_SET) != 0) return ErrnoStatus("lseek");
  return blobs_->Put(digest, fd.get(), bytes.size());
}

absl::StatusOr<std::string> SessionHandoff::GetBytes(const std::string& digest, size_t max_bytes) {
  absl::StatusOr<uint64_t> size = blobs_->Stat(digest);
  if (!size.ok()) return size.status();
  if (*size > max_bytes) {
    return absl::DataLossError(
        absl::StrCat("blob ", digest, " is ", *size, " bytes, more than ", max_bytes));
  }
  UniqueFd fd(memfd_create("airlock-blob", MFD_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("memfd_create");
  if (absl::Status st = blobs_->Get(digest, fd.get()); !st.ok()) return st;
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus("fstat");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return absl::DataLossError(absl::StrCat("blob ", digest, " grew past ", max_bytes, " bytes"));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  if (pread(fd.get(), bytes.data(), bytes.size(), 0) != st.st_size) {
    return ErrnoStatus("read a blob");
  }
  return bytes;
}

absl::Status SessionHandoff::PutFile(const std::string& digest, const std::string& path,
                                     Pins* pins) {
  if (absl::Status st = Pin(digest, pins); !st.ok()) return st;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return ErrnoStatus("open", path);
  absl::StatusOr<PackLayout> layout = MeasurePack(fd.get());
  if (!layout.ok()) return layout.status();
  absl::StatusOr<uint64_t> present = blobs_->Stat(digest);
  if (present.ok() && *present == layout->packed_bytes) return absl::OkStatus();
  absl::StatusOr<Pipe> pipe = MakePipe();
  if (!pipe.ok()) return pipe.status();
  absl::Status written;
  std::thread writer([&, out = std::move(pipe->write)]() mutable {
    written = WritePack(fd.get(), *layout, out.get());
    out.reset();  // end of stream for the store
  });
  absl::Status put = blobs_->Put(digest, pipe->read.get(), layout->packed_bytes);
  pipe->read.reset();  // a store that stopped reading early: the writer ends with EPIPE
  writer.join();
  if (!put.ok()) return put;
  return written;
}

absl::StatusOr<SessionHandoff::ImageBlobs> SessionHandoff::PutImage(const ImageInfo& image,
                                                                    Pins* pins) {
  absl::StatusOr<std::string> meta =
      ReadFileToString(DirName(image.rootfs_path) + "/image.json", kMaxImageMeta);
  if (!meta.ok()) return meta.status();
  std::optional<ImageBlobs> known;
  {
    absl::MutexLock lock(&images_mu_);
    if (auto it = images_.find(image.digest); it != images_.end()) known = it->second;
  }
  if (known) {
    // Uploaded by this run already, but a collection may have removed it since: pinned and
    // looked for again (sent again only if it is gone).
    if (absl::Status put = PutFile(known->rootfs, image.rootfs_path, pins); !put.ok()) return put;
    if (absl::Status put = PutBytes(known->meta, *meta, pins); !put.ok()) return put;
    return *known;
  }
  UniqueFd fd(open(image.rootfs_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return ErrnoStatus("open", image.rootfs_path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus("stat", image.rootfs_path);
  // An image's root filesystem never changes once in the store: its digest is hashed once and
  // kept beside it (airlockd's own note, in a directory only root writes).
  std::string noted = DirName(image.rootfs_path) + "/" + kRootfsDigestFile;
  absl::StatusOr<std::string> hex = ReadFileToString(noted, 64);
  if (!hex.ok() || hex->size() != 64 ||
      hex->find_first_not_of("0123456789abcdef") != std::string::npos) {
    hex = SparseSha256(fd.get());
    if (!hex.ok()) return hex.status();
    LogIfFailed(WriteFileAtomically(noted, *hex, 0644),
                absl::StrCat("image ", image.digest, ": its blob digest not noted"));
  }
  ImageBlobs blobs{.rootfs = absl::StrCat("sha256:", *hex),
                   .rootfs_size = static_cast<uint64_t>(st.st_size),
                   .meta = absl::StrCat("sha256:", Sha256Hex(*meta))};
  if (absl::Status put = PutFile(blobs.rootfs, image.rootfs_path, pins); !put.ok()) return put;
  if (absl::Status put = PutBytes(blobs.meta, *meta, pins); !put.ok()) return put;
  absl::MutexLock lock(&images_mu_);
  images_[image.digest] = blobs;
  return blobs;
}

absl::Status SessionHandoff::Publish(const SessionRecord& record, const std::string& dir,
                                     const ImageInfo& image,
                                     const std::vector<VolumeDisk>& volumes) {
  if (volumes.size() != record.volumes.size()) {
    return absl::InternalError("a publishing's volumes are not the session's");
  }
  absl::StatusOr<std::string> text =
      ReadFileToString(absl::StrCat(dir, "/", kSnapshotManifestFile), kMaxManifestBytes);
  if (!text.ok()) return text.status();
  absl::StatusOr<SnapshotManifest> manifest = VerifyManifest(*text, key_);
  if (!manifest.ok()) return manifest.status();
  // Pinned until the record names them (or the publishing failed: then a collection may take
  // them).
  Pins pins{.lease = lease()->lease_id()};
  absl::Cleanup unpin = [&] { Unpin(pins); };
  for (const SnapshotFile& file : manifest->files) {
    if (absl::Status st =
            PutFile(absl::StrCat("sha256:", file.sha256), absl::StrCat(dir, "/", file.name), &pins);
        !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("uploading ", file.name, ": ", st.message()));
    }
  }
  // Each volume's disk under its digest: one no session changed since is not sent again.
  std::vector<std::string> volume_lines;
  for (size_t slot = 0; slot < volumes.size(); ++slot) {
    const VolumeDisk& v = volumes[slot];
    UniqueFd fd(open(v.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd.valid()) return ErrnoStatus("open volume", v.path);
    absl::StatusOr<std::string> digest = SparseSha256(fd.get());
    if (!digest.ok()) return digest.status();
    std::string blob = absl::StrCat("sha256:", *digest);
    if (absl::Status st = PutFile(blob, v.path, &pins); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("uploading volume ", record.volumes[slot].name,
                                                  ": ", st.message()));
    }
    volume_lines.push_back(absl::StrCat(blob, ",", v.size_bytes, ",", v.snapshot ? 1 : 0));
  }
  std::string manifest_digest = absl::StrCat("sha256:", Sha256Hex(*text));
  if (absl::Status st = PutBytes(manifest_digest, *text, &pins); !st.ok()) return st;
  absl::StatusOr<ImageBlobs> image_blobs = PutImage(image, &pins);
  if (!image_blobs.ok()) {
    return absl::Status(
        image_blobs.status().code(),
        absl::StrCat("uploading image ", record.image, ": ", image_blobs.status().message()));
  }
  uint64_t generation = SeenGeneration(record.id) + 1;
  std::string value = SignFleetRecord(
      kRecordHeader,
      {{"host", options_.host_id},
       {"manifest", manifest_digest},
       {"image-blobs",
        absl::StrCat(image_blobs->rootfs, "\t", image_blobs->rootfs_size, "\t", image_blobs->meta)},
       {"generation", absl::StrCat(generation)},
       {"volume-disks", absl::StrJoin(volume_lines, " ")}},
      record, key_);
  // Only while the pins hold (they go with the lease they were made under): a host that lost
  // its lease during a long upload may have had a blob removed under it.
  absl::StatusOr<bool> written =
      etcd_->PutWhile(pins.keys.front(), host_id(), SnapshotKey(record.id), value);
  if (!written.ok()) return written.status();
  if (!*written) {
    return absl::UnavailableError(absl::StrCat(
        "host ", host_id(), " lost its etcd lease while it uploaded session ", record.id,
        "'s snapshot, so its blobs were not kept for it; the snapshot stays here"));
  }
  // Published: what follows only remembers and tells, and never fails the publishing.
  LogIfFailed(RaiseGeneration(record.id, generation),
              absl::StrCat("session ", record.id, ": its generation not remembered"));
  // The fleet's index says it is paused here, while this host still holds it (the index thread
  // writes it again if this fails).
  LogIfFailed(Index(record), absl::StrCat("fleet index: session ", record.id, " not written"));
  return absl::OkStatus();
}

absl::StatusOr<SessionHandoff::Published> SessionHandoff::Find(const std::string& id) {
  if (absl::Status st = CheckSessionId(id); !st.ok()) return st;
  absl::StatusOr<std::optional<providers::EtcdKeyValue>> kv = etcd_->Get(SnapshotKey(id));
  if (!kv.ok()) return kv.status();
  if (!*kv) return absl::NotFoundError(absl::StrCat("session ", id, " not found"));
  auto refuse = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("the published snapshot of session ", id, " is refused: ", why));
  };
  absl::StatusOr<FleetRecord> verified =
      VerifyFleetRecord((*kv)->value, kRecordHeader, PublishedRecordFields(), key_);
  if (!verified.ok()) return refuse(verified.status().message());
  Published published;
  if (auto it = verified->fields.find("generation");
      it != verified->fields.end() && !absl::SimpleAtoi(it->second, &published.generation)) {
    return refuse("its generation is not a number");
  }
  // Signed, but older than one this host saw: put back by someone who can write to etcd.
  if (uint64_t seen = SeenGeneration(id); published.generation < seen) {
    return refuse(absl::StrCat("it is older than the one this host saw (generation ",
                               published.generation, ", this host saw ", seen,
                               "): an older record was put back in etcd"));
  }
  published.host = verified->fields["host"];
  published.manifest = verified->fields["manifest"];
  if (auto it = verified->fields.find("image-blobs"); it != verified->fields.end()) {
    std::vector<std::string> parts = absl::StrSplit(it->second, '\t');
    if (parts.size() != 3 || !providers::BlobDigestHex(parts[0]).ok() ||
        !absl::SimpleAtoi(parts[1], &published.image_rootfs_size) ||
        published.image_rootfs_size > kMaxImageRootfs || !providers::BlobDigestHex(parts[2]).ok()) {
      return refuse("its image line is malformed");
    }
    published.image_rootfs = parts[0];
    published.image_meta = parts[2];
  }
  if (auto it = verified->fields.find("volume-disks");
      it != verified->fields.end() && !it->second.empty()) {
    for (absl::string_view line : absl::StrSplit(it->second, ' ')) {
      std::vector<std::string> parts = absl::StrSplit(line, ',');
      Published::Volume v;
      if (parts.size() != 3 || !providers::BlobDigestHex(parts[0]).ok() ||
          !absl::SimpleAtoi(parts[1], &v.size_bytes) || (parts[2] != "0" && parts[2] != "1")) {
        return refuse("its volume-disks line is malformed");
      }
      v.digest = parts[0];
      v.snapshot = parts[2] == "1";
      published.volumes.push_back(std::move(v));
    }
  }
  SessionRecord& record = verified->record;
  if (record.id != id) return refuse("it is the record of another session");
  if (published.volumes.size() != record.volumes.size()) {
    return refuse("it names another number of volumes than the session attaches");
  }
  if (published.host.empty() || !providers::BlobDigestHex(published.manifest).ok()) {
    return refuse("it names no host or no manifest");
  }
  published.record = std::move(record);
  LogIfFailed(RaiseGeneration(id, published.generation),
              absl::StrCat("session ", id, ": its generation not remembered"));
  return published;
}

uint64_t SessionHandoff::SeenGeneration(const std::string& id) const {
  uint64_t generation = 0;
  if (options_.generations_dir.empty() || !CheckSessionId(id).ok()) return 0;
  absl::StatusOr<std::string> text =
      ReadFileToString(absl::StrCat(options_.generations_dir, "/", id), 32);
  if (!text.ok() || !absl::SimpleAtoi(*text, &generation)) return 0;
  return generation;
}

absl::Status SessionHandoff::RaiseGeneration(const std::string& id, uint64_t generation) {
  if (options_.generations_dir.empty()) return absl::OkStatus();
  if (absl::Status st = CheckSessionId(id); !st.ok()) return st;
  absl::MutexLock lock(&generations_mu_);
  if (generation <= SeenGeneration(id)) return absl::OkStatus();
  if (absl::Status st = MakeDirectories(options_.generations_dir, 0700); !st.ok()) return st;
  return WriteFileAtomically(absl::StrCat(options_.generations_dir, "/", id),
                             absl::StrCat(generation, "\n"), 0600);
}

absl::Status SessionHandoff::GetFile(const std::string& digest, uint64_t max_size, int out) {
  absl::StatusOr<Pipe> pipe = MakePipe();
  if (!pipe.ok()) return pipe.status();
  absl::Status unpacked;
  std::thread reader(
      [&, in = std::move(pipe->read)] { unpacked = UnpackStream(in.get(), out, max_size); });
  absl::Status got = blobs_->Get(digest, pipe->write.get());
  pipe->write.reset();
  reader.join();
  return got.ok() ? unpacked : got;
}

absl::Status SessionHandoff::FetchVolume(const Published& published, size_t slot,
                                         const std::string& path) {
  if (slot >= published.volumes.size()) return absl::InternalError("no such volume slot");
  const Published::Volume& v = published.volumes[slot];
  UniqueFd out(open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out.valid()) return ErrnoStatus("create", path);
  absl::Status got = GetFile(v.digest, kVolumeDiskBytes, out.get());
  absl::StatusOr<std::string> digest =
      got.ok() ? SparseSha256(out.get()) : absl::StatusOr<std::string>(got);
  if (digest.ok() && absl::StrCat("sha256:", *digest) != v.digest) {
    digest = absl::DataLossError(absl::StrCat("volume ", published.record.volumes[slot].name,
                                              " of session ", published.record.id,
                                              " is not the disk its record names"));
  }
  if (digest.ok() && fsync(out.get()) != 0) digest = ErrnoStatus("fsync", path);
  if (!digest.ok()) {
    unlink(path.c_str());
    return digest.status();
  }
  return absl::OkStatus();
}

absl::Status SessionHandoff::FetchImage(const Published& published, ImageStore& images) {
  const SessionRecord& r = published.record;
  if (published.image_rootfs.empty()) {
    return absl::NotFoundError(
        absl::StrCat("image ", r.image, " (", r.image_digest, ") is not on this host, and host ",
                     published.host, " did not publish it with session ", r.id,
                     "; pull it here (airlock image pull ", r.image, ") and resume again"));
  }
  absl::StatusOr<std::string> meta = GetBytes(published.image_meta, kMaxImageMeta);
  if (!meta.ok()) return meta.status();
  return images.InstallBlob(r.image_digest, *meta, [&](const std::string& path) {
    UniqueFd out(open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!out.valid()) return ErrnoStatus("create", path);
    absl::Status got = GetFile(published.image_rootfs, published.image_rootfs_size, out.get());
    if (got.ok() && fsync(out.get()) != 0) got = ErrnoStatus("fsync", path);
    return got;
  });
}

absl::Status SessionHandoff::Fetch(const Published& published, const std::string& dir) {
  absl::StatusOr<std::string> text = GetBytes(published.manifest, kMaxManifestBytes);
  if (!text.ok()) return text.status();
  absl::StatusOr<SnapshotManifest> manifest = VerifyManifest(*text, key_);
  if (!manifest.ok()) return manifest.status();
  if (manifest->session_id != published.record.id) {
    return absl::DataLossError(absl::StrCat("the published snapshot of session ",
                                            published.record.id, " is another session's"));
  }
  std::string work = dir + ".fetch";
  if (absl::Status st = RemoveTree(work); !st.ok()) return st;
  if (mkdir(work.c_str(), 0700) != 0) return ErrnoStatus("mkdir", work);
  for (const SnapshotFile& file : manifest->files) {
    std::string path = absl::StrCat(work, "/", file.name);
    UniqueFd out(open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!out.valid()) return ErrnoStatus("create", path);
    absl::Status got = GetFile(absl::StrCat("sha256:", file.sha256), file.size, out.get());
    if (got.ok() && fsync(out.get()) != 0) got = ErrnoStatus("fsync", path);
    if (!got.ok()) {
      RemoveTree(work).IgnoreError();
      return absl::Status(got.code(), absl::StrCat("downloading ", file.name, " of session ",
                                                   published.record.id, ": ", got.message()));
    }
  }
  if (absl::Status st =
          WriteFileAtomically(absl::StrCat(work, "/", kSnapshotManifestFile), *text, 0600);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = RemoveTree(dir); !st.ok()) return st;
  if (rename(work.c_str(), dir.c_str()) != 0) return ErrnoStatus("rename", work);
  return SyncDirectory(dir.substr(0, dir.rfind('/')));
}

absl::Status SessionHandoff::Forget(const std::string& id) {
  if (absl::Status st = etcd_->Delete(SnapshotKey(id)); !st.ok()) return st;
  // Removed: any record of it put back is older than this (one never published has none).
  if (uint64_t seen = SeenGeneration(id); seen > 0) {
    LogIfFailed(RaiseGeneration(id, seen + 1),
                absl::StrCat("session ", id, ": its removal not remembered"));
  }
  return absl::OkStatus();
}

absl::Status SessionHandoff::SetDraining(const std::string& host, bool draining,
                                         const std::string& by, bool pause_sessions) {
  std::string key = absl::StrCat(options_.prefix, "/drain/", host);
  if (!draining) return etcd_->Delete(key);
  nlohmann::json mark = {
      {"by", by}, {"unix_ms", absl::ToUnixMillis(absl::Now())}, {"pause", pause_sessions}};
  return etcd_->Put(key, mark.dump());
}

absl::StatusOr<bool> SessionHandoff::Draining(const std::string& host, bool* pauses) const {
  absl::StatusOr<std::optional<providers::EtcdKeyValue>> mark =
      etcd_->Get(absl::StrCat(options_.prefix, "/drain/", host));
  if (!mark.ok()) return mark.status();
  if (pauses != nullptr) {
    // Any mark but one that says plainly not to pauses them (an older host's has no "pause").
    nlohmann::json parsed = mark->has_value()
                                ? nlohmann::json::parse((*mark)->value, nullptr, false)
                                : nlohmann::json();
    *pauses = !(parsed.is_object() && parsed.contains("pause") && parsed["pause"].is_boolean() &&
                !parsed["pause"].get<bool>());
  }
  return mark->has_value();
}

absl::StatusOr<std::optional<std::string>> SessionHandoff::Owner(const std::string& id) const {
  return lease()->Owner(id);
}

absl::StatusOr<std::string> SessionHandoff::AddressOf(const std::string& host) const {
  absl::StatusOr<std::optional<providers::EtcdKeyValue>> kv =
      etcd_->Get(absl::StrCat(options_.prefix, "/hosts/", host));
  if (!kv.ok()) return kv.status();
  if (!kv->has_value()) {
    return absl::NotFoundError(absl::StrCat("host ", host, " is not registered with the fleet"));
  }
  return providers::ParseHostCapacity((*kv)->value).address;
}

absl::StatusOr<std::vector<SessionHandoff::HostInfo>> SessionHandoff::Hosts() const {
  std::string hosts_prefix = absl::StrCat(options_.prefix, "/hosts/");
  absl::StatusOr<std::vector<providers::EtcdKeyValue>> hosts =
      etcd_->GetPrefix(hosts_prefix, providers::kMaxEtcdEntries);
  if (!hosts.ok()) return hosts.status();
  std::map<std::string, HostInfo> by_id;
  for (const providers::EtcdKeyValue& kv : *hosts) {
    std::string id = kv.key.substr(hosts_prefix.size());
    by_id[id] = {.id = id, .capacity_json = kv.value};
  }
  std::string sessions_prefix = absl::StrCat(options_.prefix, "/sessions/");
  absl::StatusOr<std::vector<providers::EtcdKeyValue>> keys =
      etcd_->GetPrefix(sessions_prefix, providers::kMaxEtcdEntries);
  if (!keys.ok()) return keys.status();
  for (const providers::EtcdKeyValue& kv : *keys) {
    absl::string_view rest = absl::string_view(kv.key).substr(sessions_prefix.size());
    if (!absl::ConsumeSuffix(&rest, "/owner")) continue;
    auto it = by_id.find(kv.value);
    if (it != by_id.end()) it->second.sessions.emplace_back(rest);
  }
  std::string drain_prefix = absl::StrCat(options_.prefix, "/drain/");
  absl::StatusOr<std::vector<providers::EtcdKeyValue>> drains =
      etcd_->GetPrefix(drain_prefix, providers::kMaxEtcdEntries);
  if (!drains.ok()) return drains.status();
  for (const providers::EtcdKeyValue& kv : *drains) {
    std::string id = kv.key.substr(drain_prefix.size());
    auto it = by_id.find(id);
    if (it == by_id.end()) it = by_id.emplace(id, HostInfo{.id = id, .up = false}).first;
    it->second.draining = true;
  }
  std::vector<HostInfo> out;
  for (auto& [id, info] : by_id) out.push_back(std::move(info));
  return out;
}

absl::StatusOr<std::vector<providers::HostInfo>> FleetHosts::Hosts() {
  absl::StatusOr<std::vector<SessionHandoff::HostInfo>> hosts = handoff_->Hosts();
  if (!hosts.ok()) return hosts.status();
  std::vector<providers::HostInfo> out;
  for (SessionHandoff::HostInfo& host : *hosts) {
    out.push_back({.id = host.id,
                   .capacity = providers::ParseHostCapacity(host.capacity_json),
                   .sessions = std::move(host.sessions),
                   .this_host = host.id == handoff_->host_id(),
                   .draining = host.draining,
                   .up = host.up});
  }
  return out;
}

}  // namespace airlock
