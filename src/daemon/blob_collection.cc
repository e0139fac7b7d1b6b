// SessionHandoff's blob collection and the pins publishings hold (session_handoff.h says the
// rules and why they are safe).
#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "src/common/hex.h"
#include "src/common/log.h"
#include "src/daemon/fleet_record.h"
#include "src/daemon/session_handoff.h"
#include "src/providers/blob_digest.h"
#include "src/vm/snapshot_manifest.h"

namespace airlock {
namespace {

// How long a publishing waits for a collection to finish removing a blob it needs (one Delete
// of the store and one of etcd).
constexpr absl::Duration kRemovalWait = absl::Seconds(60);

}  // namespace

absl::Status SessionHandoff::Pin(const std::string& digest, Pins* pins) {
  std::string key =
      absl::StrCat(options_.prefix, "/blob-pins/", digest, "/", host_id(), "-", RandomHex(8));
  // Kept even when the answer is an error: the pin may have been made all the same.
  pins->keys.push_back(key);
  if (absl::Status st = etcd_->Put(key, host_id(), pins->lease); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("pinning blob ", digest, ": ", st.message()));
  }
  std::string removing = absl::StrCat(options_.prefix, "/blob-gc/removing/", digest);
  absl::Time give_up = absl::Now() + kRemovalWait;
  for (;;) {
    absl::StatusOr<std::optional<providers::EtcdKeyValue>> kv = etcd_->Get(removing);
    if (!kv.ok()) return kv.status();
    if (!*kv) return absl::OkStatus();
    if (absl::Now() >= give_up) {
      return absl::UnavailableError(
          absl::StrCat("blob ", digest, " is still being removed by a blob collection (",
                       (*kv)->value, ") after ", absl::FormatDuration(kRemovalWait),
                       "; try again once that collection has ended"));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

void SessionHandoff::Unpin(const Pins& pins) {
  for (const std::string& key : pins.keys) {
    // One left behind goes with the lease it was made under, and only keeps a blob.
    LogIfFailed(etcd_->Delete(key), absl::StrCat("blob pin ", key, " not removed"));
  }
}

absl::StatusOr<std::set<std::string>> SessionHandoff::ReferencedBlobs(
    uint64_t* records, std::map<std::string, std::vector<std::string>>* manifests) {
  std::string prefix = absl::StrCat(options_.prefix, "/sessions/");
  absl::StatusOr<std::vector<providers::EtcdKeyValue>> keys =
      etcd_->GetPrefix(prefix, providers::kMaxEtcdEntries);
  if (!keys.ok()) return keys.status();
  if (keys->size() >= providers::kMaxEtcdEntries) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the fleet has more than ", providers::kMaxEtcdEntries / 2,
                     " sessions, more than one collection reads: nothing is removed"));
  }
  std::set<std::string> named;
  *records = 0;
  for (const providers::EtcdKeyValue& kv : *keys) {
    absl::string_view id = absl::string_view(kv.key).substr(prefix.size());
    if (!absl::ConsumeSuffix(&id, "/snapshot")) continue;
    auto refuse = [&](absl::string_view why) {
      return absl::DataLossError(
          absl::StrCat("the published record of session ", id, " cannot be read (", why,
                       "), so what it names is unknown: nothing is removed. Delete its key ",
                       kv.key, " from etcd (or, if this host lists the session, airlock rm ", id,
                       "), and collect again"));
    };
    absl::StatusOr<FleetRecord> verified =
        VerifyFleetRecord(kv.value, kRecordHeader, PublishedRecordFields(), key_);
    if (!verified.ok()) return refuse(verified.status().message());
    ++*records;
    const std::string& manifest = verified->fields["manifest"];
    if (!providers::BlobDigestHex(manifest).ok()) return refuse("its manifest is malformed");
    named.insert(manifest);
    if (auto it = verified->fields.find("image-blobs"); it != verified->fields.end()) {
      std::vector<std::string> parts = absl::StrSplit(it->second, '\t');
      if (parts.size() != 3) return refuse("its image line is malformed");
      named.insert(parts[0]);
      named.insert(parts[2]);
    }
    // Its volumes' disks ("DIGEST,SIZE,SNAPSHOT" each).
    if (auto it = verified->fields.find("volume-disks");
        it != verified->fields.end() && !it->second.empty()) {
      for (absl::string_view line : absl::StrSplit(it->second, ' ')) {
        std::string digest(line.substr(0, line.find(',')));
        if (!providers::BlobDigestHex(digest).ok())
          return refuse("its volume-disks line is malformed");
        named.insert(std::move(digest));
      }
    }
    // The files its manifest names. A manifest the store no longer has, or that was changed,
    // names nothing any host would load (that session cannot be resumed); any other failure
    // to read it stops the collection, since its files are then unknown.
    auto files = manifests->find(manifest);
    if (files == manifests->end()) {
      absl::StatusOr<std::string> text = GetBytes(manifest, kMaxManifestBytes);
      absl::StatusOr<SnapshotManifest> parsed =
          text.ok() ? VerifyManifest(*text, key_) : absl::StatusOr<SnapshotManifest>(text.status());
      if (!parsed.ok() && !absl::IsNotFound(parsed.status()) &&
          !absl::IsDataLoss(parsed.status()) && !absl::IsInvalidArgument(parsed.status())) {
        return absl::Status(parsed.status().code(),
                            absl::StrCat("reading session ", id, "'s manifest ", manifest, ": ",
                                         parsed.status().message(), "; nothing is removed"));
      }
      std::vector<std::string> digests;
      if (parsed.ok()) {
        for (const SnapshotFile& f : parsed->files) digests.push_back("sha256:" + f.sha256);
      } else {
        LogWarning(absl::StrCat("blob collection: session ", id, "'s manifest ", manifest,
                                " names nothing (", parsed.status().message(), ")"));
      }
      files = manifests->emplace(manifest, std::move(digests)).first;
    }
    named.insert(files->second.begin(), files->second.end());
  }
  return named;
}

absl::StatusOr<SessionHandoff::BlobCollection> SessionHandoff::CollectBlobs(absl::Duration grace,
                                                                            bool dry_run) {
  // A lease of this run's own holds its lock and its removal marks: they go when the run ends
  // (revoked) or when this host dies mid-way (expired), whatever failed in between.
  std::string token = absl::StrCat(host_id(), " run ", RandomHex(6));
  providers::EtcdLease run_lease;
  std::atomic<bool> lease_lost = false;
  absl::Notification done;
  std::thread keeper;
  absl::Cleanup end_lease = [&] {
    done.Notify();
    if (keeper.joinable()) keeper.join();
    if (run_lease.id != 0) {
      LogIfFailed(etcd_->RevokeLease(run_lease.id), "blob collection: its lease not revoked");
    }
  };
  std::string lock = absl::StrCat(options_.prefix, "/blob-gc/lock");
  if (!dry_run) {
    absl::StatusOr<providers::EtcdLease> granted = etcd_->GrantLease(options_.ttl_seconds);
    if (!granted.ok()) return granted.status();
    run_lease = *granted;
    keeper = std::thread([&] {
      absl::Duration every = absl::Seconds(std::max<int64_t>(1, run_lease.ttl_seconds / 3));
      while (!done.WaitForNotificationWithTimeout(every)) {
        if (!etcd_->KeepAlive(run_lease.id).ok()) lease_lost = true;
      }
    });
    absl::StatusOr<bool> locked = etcd_->CreateIfAbsent(lock, token, run_lease.id);
    if (!locked.ok()) return locked.status();
    absl::StatusOr<std::optional<providers::EtcdKeyValue>> holder = etcd_->Get(lock);
    if (!holder.ok()) return holder.status();
    // (A retried create that took effect answers false: the value says whose it is.)
    if (!*holder || (*holder)->value != token) {
      std::string who = *holder ? (*holder)->value : "another host";
      return absl::FailedPreconditionError(
          absl::StrCat("a blob collection runs now (", who, "); try again once it has finished"));
    }
  }
  BlobCollection out;
  absl::StatusOr<std::vector<std::string>> listed = blobs_->List();
  if (!listed.ok()) return listed.status();
  out.blobs = listed->size();
  std::map<std::string, std::vector<std::string>> manifests;
  absl::StatusOr<std::set<std::string>> named = ReferencedBlobs(&out.records, &manifests);
  if (!named.ok()) return named.status();
  std::string marks_prefix = absl::StrCat(options_.prefix, "/blob-gc/marks/");
  absl::StatusOr<std::vector<providers::EtcdKeyValue>> marks =
      etcd_->GetPrefix(marks_prefix, providers::kMaxEtcdEntries);
  if (!marks.ok()) return marks.status();
  std::map<std::string, int64_t> marked_at;  // unix seconds, by digest
  for (const providers::EtcdKeyValue& kv : *marks) {
    int64_t at = 0;
    std::string digest = kv.key.substr(marks_prefix.size());
    if (absl::SimpleAtoi(kv.value, &at)) {
      marked_at[digest] = at;
    } else if (!dry_run) {
      LogIfFailed(etcd_->Delete(kv.key), "blob collection: a malformed mark not removed");
    }
  }
  int64_t now = absl::ToUnixSeconds(absl::Now());
  std::set<std::string> in_store(listed->begin(), listed->end());
  std::vector<std::string> due;
  for (const std::string& digest : *listed) {
    auto mark = marked_at.find(digest);
    if (named->count(digest)) {
      ++out.referenced;
      if (mark != marked_at.end() && !dry_run) {
        LogIfFailed(etcd_->Delete(marks_prefix + digest), "blob collection: a mark not removed");
      }
    } else if (mark == marked_at.end()) {
      if (!dry_run) {
        if (absl::Status st = etcd_->Put(marks_prefix + digest, absl::StrCat(now)); !st.ok()) {
          return st;
        }
      }
      out.marked.push_back(digest);
    } else if (absl::Seconds(now - mark->second) < grace) {
      ++out.waiting;
    } else {
      due.push_back(digest);
    }
  }
  // Marks of blobs the store no longer has (removed by hand, or a run that stopped half-way).
  for (const auto& [digest, at] : marked_at) {
    if (!in_store.count(digest) && !dry_run) {
      LogIfFailed(etcd_->Delete(marks_prefix + digest), "blob collection: a mark not removed");
    }
  }
  if (due.empty()) return out;

  // Due: each marked as being removed, and only then are the pins and then the records read
  // again (in that order: see session_handoff.h).
  std::string removing_prefix = absl::StrCat(options_.prefix, "/blob-gc/removing/");
  if (!dry_run) {
    for (const std::string& digest : due) {
      if (absl::Status st = etcd_->Put(removing_prefix + digest, token, run_lease.id); !st.ok()) {
        return st;
      }
    }
  }
  std::string pins_prefix = absl::StrCat(options_.prefix, "/blob-pins/");
  std::set<std::string> pinned;
  for (const std::string& digest : due) {
    absl::StatusOr<std::vector<providers::EtcdKeyValue>> pins =
        etcd_->GetPrefix(absl::StrCat(pins_prefix, digest, "/"), 1);
    if (!pins.ok()) return pins.status();
    if (!pins->empty()) pinned.insert(digest);
  }
  uint64_t records = 0;
  absl::StatusOr<std::set<std::string>> named_now = ReferencedBlobs(&records, &manifests);
  if (!named_now.ok()) return named_now.status();
  for (const std::string& digest : due) {
    if (pinned.count(digest)) {
      ++out.pinned;
    } else if (named_now->count(digest)) {
      ++out.referenced;  // named since
      if (!dry_run) {
        LogIfFailed(etcd_->Delete(marks_prefix + digest), "blob collection: a mark not removed");
      }
    } else if (lease_lost) {
      // Its removal marks may be gone: a publishing no longer waits for this run.
      return absl::UnavailableError(
          "the blob collection lost its etcd lease part-way; nothing more is removed (run it "
          "again)");
    } else {
      absl::StatusOr<uint64_t> size = blobs_->Stat(digest);
      uint64_t bytes = size.ok() ? *size : 0;
      if (!dry_run) {
        if (absl::Status st = blobs_->Delete(digest); !st.ok()) {
          LogWarning(absl::StrCat("blob collection: blob ", digest, " not removed (", st.message(),
                                  "); the next run tries again"));
          continue;
        }
        LogIfFailed(etcd_->Delete(marks_prefix + digest), "blob collection: a mark not removed");
      }
      out.removed.push_back({.digest = digest, .bytes = bytes});
      out.removed_bytes += bytes;
    }
    // Done with it: a publishing that waits for it goes on now (the rest go with the lease).
    if (!dry_run) LogIfFailed(etcd_->Delete(removing_prefix + digest), "blob collection");
  }
  return out;
}

}  // namespace airlock
