// SessionHandoff: hands paused sessions between the airlockd hosts of a fleet. The hosts share a
// blob store (snapshot files, by content; src/providers/blob_store.h) and an etcd cluster (which
// host runs a session, and each session's last published snapshot; host_lease.h).
//
// Keys under the fleet's etcd prefix:
//   <prefix>/hosts/<host>              a host and its capacity, bound to its lease (HostLease)
//   <prefix>/drain/<host>              a host being drained (airlock hosts drain): who asked and
//                                      when; not bound to a lease, so it outlasts restarts
//   <prefix>/sessions/<id>/owner       the host running the session, bound to its lease
//   <prefix>/sessions/<id>/snapshot    the session's last published snapshot: the host that took
//                                      it, the session's record, the manifest's blob digest,
//                                      signed with the fleet's key (fleet_record.h)
//   <prefix>/index/<tenant>/<id>       the fleet's session index: the session's record, state
//                                      and host as its holder last wrote them, signed; the
//                                      tenant in hex
//   <prefix>/blob-pins/<digest>/<pin>  a blob a publishing relies on before its record names
//                                      it, bound to the publishing host's lease
//   <prefix>/blob-gc/lock              the host collecting blobs now, bound to its lease
//   <prefix>/blob-gc/marks/<digest>    when a collection first found the blob named by nothing
//   <prefix>/blob-gc/removing/<digest> a blob being removed, bound to the collector's lease
//
// The rules SessionManager follows:
//   - A pause publishes: each file of the snapshot is uploaded packed (snapshot_pack.h) under its
//     manifest digest (a blob present already is not sent again), then the disks of the
//     volumes it attaches (each packed under its sparse digest), then the manifest, then the
//     session's image (its root filesystem, packed, and its metadata; once per image and run
//     of airlockd), then the signed record naming them all. Then the session is released, and
//     any host may resume it.
//   - A resume claims the session first, so that one host at a time runs it; a session another
//     host runs is refused, naming that host. When the last published snapshot was taken
//     elsewhere, it is fetched (replacing anything this host kept) and its record imported; a
//     host without the session's image installs it from the blob store under its digest.
//   - A host that dies stops renewing its lease; once the lease expires its claims go with it,
//     and its sessions resume elsewhere from their last published snapshot (what they did
//     since is lost). A host that comes back ends the VMs of sessions another host took.
//   - A host that is alive but cut off from etcd for longer than its lease's TTL (etcd down,
//     hung or unreachable) loses its lease the same way. It rejoins by itself: a new lease
//     once etcd answers again and the old one has expired, then it claims its running sessions
//     again and ends the VMs of those another host took meanwhile (OnRejoined).
//   - A pause whose publishing fails keeps the claim, and marks the snapshot here as newer than
//     the published one (SessionLayout::UnpublishedMarker): a resume here uses it, never the
//     older published one, and a failed resume keeps the claim.
//
//   - A host marked draining takes no new session, resume or fork, and pauses (publishes) each
//     of its running sessions once no command runs in it, for the other hosts to resume.
//
//   - Blobs are collected in two phases (CollectBlobs): a run marks the blobs no published
//     record names, and a run at least the grace later removes those still named by none. A
//     publishing pins each blob before it looks whether the store has it, and unpins them once
//     its record names them; a collection marks a blob as being removed before it reads the
//     pins and then the records, and a publishing that finds that mark waits for the removal to
//     end and uploads the blob again. Whichever writes first, the other sees it (etcd is
//     linearizable): a blob a record names or is about to name is never removed. The pins go
//     with the lease the publishing started under, and its record is written only while they
//     hold (a host that lost its lease mid-upload does not publish); a collection's marks go
//     with a lease of its own, and it removes nothing once that is lost. Hosts of versions
//     without pins are protected by the grace alone. Templates are each host's own
//     and never in the blob store.
//
// Trust: the blob store and etcd are untrusted storage. What is loaded is what the snapshot's
// manifest names, and the manifest and the record are signed with the host key, so every host of
// a fleet must have the same host key ($AIRLOCK_HOME/host.key). A changed blob, manifest or
// record is refused. A published record carries a generation, one more than the newest this
// host saw for the session; a host refuses a record older than one it wrote or read (or of a
// session it removed), so putting an older signed record back in etcd rolls back only hosts
// that never saw the newer one. Not covered: those, and deleting owner keys.
//
// Thread-safe.
#ifndef AIRLOCK_DAEMON_SESSION_HANDOFF_H_
#define AIRLOCK_DAEMON_SESSION_HANDOFF_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/daemon/records.h"
#include "src/image/image_store.h"
#include "src/providers/blob_store.h"
#include "src/providers/etcd_client.h"
#include "src/providers/host_lease.h"
#include "src/providers/host_provider.h"

namespace airlock {

struct HandoffOptions {
  std::string prefix = "/airlock";  // etcd keys; every host of a fleet uses the same
  std::string host_id;              // unique in the fleet
  int64_t ttl_seconds = 10;         // the host lease's
  std::string capacity_json = "{}";
  // Start waits this long for the lease of this host's previous run to expire (a restart
  // after a crash); 0: not at all.
  absl::Duration wait_for_previous = absl::Seconds(30);
  // Where this host remembers, per session, the newest generation of its published record it
  // has written or read (a file per session id, kept after the session is removed); empty: no
  // rollback check.
  std::string generations_dir;
};

class SessionHandoff {
 public:
  // Registers the host at etcd. key: the host key snapshots are signed with.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SessionHandoff>> Start(
      std::unique_ptr<providers::BlobStore> blobs, std::unique_ptr<providers::EtcdClient> etcd,
      HandoffOptions options, std::string key);
  ~SessionHandoff();

  const std::string& host_id() const { return options_.host_id; }

  // Runs fn on this object's thread each time the host has rejoined the fleet with a new lease
  // after losing its old one (its claims went with it: fn claims what it runs again). nullptr:
  // nothing. Returns once a run of the previous fn has ended.
  void OnRejoined(std::function<void()> fn);

  // Makes this host the session's owner; FailedPrecondition naming the host that owns it.
  [[nodiscard]] absl::Status Claim(const std::string& id);
  // For a session whose VM ran on here while this host was away (down, or cut off from etcd):
  // Claim, and then FailedPrecondition too (given up again) when another host published the
  // session since this host last saw it (it took the session over, ran it and paused it: this
  // VM is behind, and must not go on).
  [[nodiscard]] absl::Status ClaimAsItWas(const std::string& id);
  // Gives the session up (OK if this host did not own it).
  [[nodiscard]] absl::Status Release(const std::string& id);

  // A volume the session attaches, as a publishing takes it along (by slot).
  struct VolumeDisk {
    std::string path;         // its disk (frozen: the session is paused and holds it)
    uint64_t size_bytes = 0;  // its filesystem's size (VolumeRecord::size_bytes)
    bool snapshot = false;    // a read-only volume (NAME@TAG)
  };
  // Uploads the snapshot in dir (manifest.json and its files), the disks of the session's
  // volumes (by slot, each under its sparse digest) and the session's image as this host's
  // store has it (unless uploaded by this object already), and publishes them with the
  // session's record as the session's latest.
  [[nodiscard]] absl::Status Publish(const SessionRecord& record, const std::string& dir,
                                     const ImageInfo& image,
                                     const std::vector<VolumeDisk>& volumes = {});

  struct Published {
    SessionRecord record;     // state paused
    std::string host;         // the host that took the snapshot
    uint64_t generation = 0;  // 1 for its first publishing, one more each time (0: before them)
    std::string manifest;     // its manifest's blob digest
    // The session's image: its root filesystem's blob (packed) and size, and its metadata's
    // blob (image.json). Empty for a record published without its image.
    std::string image_rootfs;
    uint64_t image_rootfs_size = 0;
    std::string image_meta;
    // The disks of the volumes it attaches, by slot (as many as record.volumes).
    struct Volume {
      std::string digest;  // "sha256:..." of the disk (SparseSha256), its blob
      uint64_t size_bytes = 0;
      bool snapshot = false;
    };
    std::vector<Volume> volumes;
  };
  // The session's last published snapshot; NotFound when there is none; DataLoss, saying so,
  // for one older than this host saw (put back in etcd).
  [[nodiscard]] absl::StatusOr<Published> Find(const std::string& id);
  // Downloads a published snapshot into dir, replacing what is there (written beside it and
  // renamed: a crash leaves the old one or the new one whole).
  [[nodiscard]] absl::Status Fetch(const Published& published, const std::string& dir);
  // Downloads the disk of the published session's volume in `slot` into a new file at path
  // (0600; not there before), and checks it is the disk that was published (DATA_LOSS if not:
  // the file is removed).
  [[nodiscard]] absl::Status FetchVolume(const Published& published, size_t slot,
                                         const std::string& path);
  // Installs the published session's image into `images` under the record's image digest
  // (untagged: a session names its image by digest), from the blob store. NotFound, saying to
  // pull it, when the record was published without its image.
  [[nodiscard]] absl::Status FetchImage(const Published& published, ImageStore& images);
  // The session is removed: its snapshot is no longer published (its blobs stay: others may
  // share them).
  [[nodiscard]] absl::Status Forget(const std::string& id);

  // The fleet's session index: each session of every host, as the host that holds it last
  // wrote it, for `airlock ls` anywhere in the fleet. Index writes the session's entry only
  // while this host holds it (owner key), so a late write after another host took it over
  // changes nothing (OK either way: the holder's entry is the true one).
  [[nodiscard]] absl::Status Index(const SessionRecord& record);
  // Removes the session's entry if this host wrote it, or whoever wrote it (for the host that
  // holds the session's claim and removes the session).
  [[nodiscard]] absl::Status Unindex(const std::string& tenant, const std::string& id,
                                     bool whoever_wrote_it = false);
  struct IndexEntry {
    SessionRecord record;     // with its state and reason
    std::string host;         // the host that wrote it
    uint64_t generation = 0;  // of the session's published record when it was written
  };
  // The tenant's entries, or every tenant's (tenant empty), by id. Entries whose signature or
  // form is wrong are left out and logged.
  [[nodiscard]] absl::StatusOr<std::vector<IndexEntry>> ReadIndex(const std::string& tenant) const;
  // One of the tenant's entries; NotFound when the index has none.
  [[nodiscard]] absl::StatusOr<IndexEntry> ReadIndex(const std::string& tenant,
                                                     const std::string& id) const;

  struct BlobCollection {
    uint64_t blobs = 0;               // in the store
    uint64_t referenced = 0;          // named by a published record
    uint64_t records = 0;             // published records read
    uint64_t pinned = 0;              // named by none, but a publishing relies on them: kept
    uint64_t waiting = 0;             // marked by an earlier run, within the grace: kept for now
    std::vector<std::string> marked;  // named by none, marked by this run
    struct Removed {
      std::string digest;
      uint64_t bytes = 0;
    };
    std::vector<Removed> removed;  // past the grace and named by none (dry run: would be)
    uint64_t removed_bytes = 0;
  };
  // One run of the blob collection (see the rules above): marks what no record names, and
  // removes what an earlier run marked at least `grace` ago and is still named by none. With
  // dry_run it only says what it would do. One run at a time in the fleet (FailedPrecondition
  // naming the one that runs), its lock and removal marks bound to a lease of its own; nothing
  // is removed when a record cannot be verified (DataLoss naming it), a manifest cannot be read
  // for another reason than being gone or changed, or the fleet has more records than one read
  // holds.
  [[nodiscard]] absl::StatusOr<BlobCollection> CollectBlobs(absl::Duration grace, bool dry_run);

  struct HostInfo {
    std::string id;
    std::string capacity_json;
    std::vector<std::string> sessions;  // those it runs now
    bool draining = false;
    bool up = true;  // registered now (a host that is down is listed when it is drained)
  };
  // Every host registered now, and every host marked draining, by id.
  [[nodiscard]] absl::StatusOr<std::vector<HostInfo>> Hosts() const;

  // Marks a host of the fleet draining, or ends that (airlock hosts drain); `by` says who asked.
  // The host need not be up: a host drained while down takes nothing when it comes back.
  // pause_sessions false: the host only takes nothing new (the host pool's mark while it checks
  // that a host it would release is idle).
  [[nodiscard]] absl::Status SetDraining(const std::string& host, bool draining,
                                         const std::string& by, bool pause_sessions = true);
  // Whether a host is marked draining, and (pauses) whether it pauses its sessions for it.
  [[nodiscard]] absl::StatusOr<bool> Draining(const std::string& host,
                                              bool* pauses = nullptr) const;

  // The host that owns session id now (its claim), or nullopt when none does.
  [[nodiscard]] absl::StatusOr<std::optional<std::string>> Owner(const std::string& id) const;
  // Where a registered host takes forwarded calls (its airlockd --fleet-listen); "" when it
  // takes none; NotFound when it is not registered (down).
  [[nodiscard]] absl::StatusOr<std::string> AddressOf(const std::string& host) const;

 private:
  SessionHandoff(std::unique_ptr<providers::BlobStore> blobs,
                 std::unique_ptr<providers::EtcdClient> etcd, HandoffOptions options,
                 std::string key)
      : blobs_(std::move(blobs)),
        etcd_(std::move(etcd)),
        options_(std::move(options)),
        key_(std::move(key)) {}

  // The first line of a published record; the HMAC covers everything before its own line.
  static constexpr char kRecordHeader[] = "airlock-session-handoff 1\n";

  std::shared_ptr<providers::HostLease> lease() const {
    absl::MutexLock lock(&lease_mu_);
    return lease_;
  }
  // The rejoin thread: waits for a lost lease, then takes a new one (see above).
  void Rejoin();
  std::string SnapshotKey(const std::string& id) const;
  // <prefix>/index/<tenant, hex>/ and that followed by the id.
  std::string IndexPrefix(const std::string& tenant) const;
  absl::StatusOr<IndexEntry> VerifyIndexEntry(absl::string_view value) const;
  // The newest generation of the session's published record this host wrote or read (0: none).
  uint64_t SeenGeneration(const std::string& id) const;
  // Remembers a newer one (an older one changes nothing).
  absl::Status RaiseGeneration(const std::string& id, uint64_t generation);
  // The blobs one publishing relies on: keys bound to the lease it started with.
  struct Pins {
    int64_t lease = 0;
    std::vector<std::string> keys;
  };
  // Pins the blob for a publishing, and waits while a collection removes it.
  absl::Status Pin(const std::string& digest, Pins* pins);
  void Unpin(const Pins& pins);
  // The blob digests the published records name, and how many records there are. manifests:
  // the files of each manifest read so far, by its digest (manifests never change).
  absl::StatusOr<std::set<std::string>> ReferencedBlobs(
      uint64_t* records, std::map<std::string, std::vector<std::string>>* manifests);
  // Pin first, then upload unless the store has the blob already.
  absl::Status PutFile(const std::string& digest, const std::string& path, Pins* pins);
  absl::Status PutBytes(const std::string& digest, const std::string& bytes, Pins* pins);
  absl::StatusOr<std::string> GetBytes(const std::string& digest, size_t max_bytes);
  // Downloads a blob PutFile stored into out (at most max_size bytes once unpacked).
  absl::Status GetFile(const std::string& digest, uint64_t max_size, int out);
  struct ImageBlobs {
    std::string rootfs;
    uint64_t rootfs_size = 0;
    std::string meta;
  };
  // Uploads an image's root filesystem and metadata unless the store has them (hashed once
  // per image digest).
  absl::StatusOr<ImageBlobs> PutImage(const ImageInfo& image, Pins* pins);

  const std::unique_ptr<providers::BlobStore> blobs_;
  const std::unique_ptr<providers::EtcdClient> etcd_;
  const HandoffOptions options_;
  const std::string key_;
  providers::HostLeaseOptions lease_options_;  // set by Start
  mutable absl::Mutex lease_mu_;
  std::shared_ptr<providers::HostLease> lease_ ABSL_GUARDED_BY(lease_mu_);
  bool lease_lost_ ABSL_GUARDED_BY(lease_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(lease_mu_) = false;
  absl::Mutex rejoined_mu_;  // held while on_rejoined_ runs
  std::function<void()> on_rejoined_ ABSL_GUARDED_BY(rejoined_mu_);
  std::thread rejoiner_;
  absl::Mutex generations_mu_;  // held while a generation file is read and replaced
  absl::Mutex images_mu_;
  // By image digest: uploaded already.
  std::map<std::string, ImageBlobs> images_ ABSL_GUARDED_BY(images_mu_);
};

// The hosts of a fleet as a HostProvider: a VM is placed on this host (a session runs where it
// is asked for; another host takes a paused one over by resuming it there), and Hosts lists
// every host registered with the capacity it published and the sessions it owns.
class FleetHosts : public providers::HostProvider {
 public:
  // Neither is owned; both outlive this.
  FleetHosts(SessionHandoff* handoff, providers::LocalHost* local)
      : handoff_(handoff), local_(local) {}

  std::string host_id() const override { return handoff_->host_id(); }
  absl::StatusOr<VmDriver*> Place(const providers::VmPlacement& vm) override {
    return local_->Place(vm);
  }
  VmDriver& local() override { return local_->local(); }
  absl::StatusOr<std::vector<providers::HostInfo>> Hosts() override;

 private:
  SessionHandoff* handoff_;
  providers::LocalHost* local_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_SESSION_HANDOFF_H_
