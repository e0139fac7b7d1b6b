// SessionHandoff's blob collection and the pins publishings hold (session_handoff.h says the
// rules and why they are safe).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
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

absl::Status SessionHandoff::Pin(const std::string& digest, std::vector<std::string>* pins) {
  std::shared_ptr<providers::HostLease> lease = this->lease();
  std::string key =
      absl::StrCat(options_.prefix, "/blob-pins/", digest, "/", host_id(), "-", RandomHex(8));
  if (absl::Status st = etcd_->Put(key, host_id(), lease->lease_id()); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("pinning blob ", digest, ": ", st.message()));
  }
  pins->push_back(std::move(key));
  std::string removing = absl::StrCat(options_.prefix, "/blob-gc/removing/", digest);
  absl::Time give_up = absl::Now() + kRemovalWait;
  for (;;) {
    absl::StatusOr<std::optional<providers::EtcdKeyValue>> kv = etcd_->Get(removing);
    if (!kv.ok()) return kv.status();
    if (!*kv) return absl::OkStatus();
    if (absl::Now() >= give_up) {
      return absl::UnavailableError(absl::StrCat(
          "blob ", digest, " is still being removed by host ", (*kv)->value, " after ",
          absl::FormatDuration(kRemovalWait), "; try again once that collection has ended"));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

void SessionHandoff::Unpin(const std::vector<std::string>& pins) {
  for (const std::string& key : pins) {
    // One left behind goes with this host's lease.
    LogIfFailed(etcd_->Delete(key), absl::StrCat("blob pin ", key, " not removed"));
  }
}

absl::StatusOr<std::set<std::string>> SessionHandoff::ReferencedBlobs(uint64_t* records) {
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
                       "), so what it names is unknown: nothing is removed. Remove the session "
                       "(airlock rm ",
                       id, ") or its key ", kv.key, " from etcd, and collect again"));
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
    // The files its manifest names. A manifest gone or changed: that session cannot be
    // resumed anyway, and its files are kept (they may be shared with others).
    absl::StatusOr<std::string> text = GetBytes(manifest, kMaxManifestBytes);
    absl::StatusOr<SnapshotManifest> files =
        text.ok() ? VerifyManifest(*text, key_) : absl::StatusOr<SnapshotManifest>(text.status());
    if (!files.ok()) {
      LogWarning(absl::StrCat("blob collection: session ", id, "'s manifest ", manifest,
                              " unreadable (", files.status().message(), ")"));
      continue;
    }
    for (const SnapshotFile& file : files->files)
      named.insert(absl::StrCat("sha256:", file.sha256));
  }
  return named;
}

absl::StatusOr<SessionHandoff::BlobCollection> SessionHandoff::CollectBlobs(absl::Duration grace,
                                                                            bool dry_run) {
  std::shared_ptr<providers::HostLease> lease = this->lease();
  std::string lock = absl::StrCat(options_.prefix, "/blob-gc/lock");
  if (!dry_run) {
    absl::StatusOr<bool> locked = etcd_->CreateIfAbsent(lock, host_id(), lease->lease_id());
    if (!locked.ok()) return locked.status();
    if (!*locked) {
      absl::StatusOr<std::optional<providers::EtcdKeyValue>> kv = etcd_->Get(lock);
      return absl::FailedPreconditionError(
          absl::StrCat("host ", kv.ok() && *kv ? (*kv)->value : "another host",
                       " is collecting blobs now; try again once it has finished"));
    }
  }
  absl::Cleanup unlock = [&] {
    if (!dry_run) LogIfFailed(etcd_->Delete(lock), "blob collection: its lock not removed");
  };
  BlobCollection out;
  absl::StatusOr<std::vector<std::string>> listed = blobs_->List();
  if (!listed.ok()) return listed.status();
  out.blobs = listed->size();
  absl::StatusOr<std::set<std::string>> named = ReferencedBlobs(&out.records);
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

  // Due: each marked as being removed, and only then are pins and records read again (in that
  // order: see session_handoff.h).
  std::string removing_prefix = absl::StrCat(options_.prefix, "/blob-gc/removing/");
  std::vector<std::string> removing;
  for (const std::string& digest : due) {
    if (dry_run) {
      removing.push_back(digest);
      continue;
    }
    absl::StatusOr<bool> created =
        etcd_->CreateIfAbsent(removing_prefix + digest, host_id(), lease->lease_id());
    if (!created.ok()) return created.status();
    if (*created) removing.push_back(digest);
  }
  absl::Cleanup unmark_removing = [&] {
    if (dry_run) return;
    for (const std::string& digest : removing) {
      LogIfFailed(etcd_->Delete(removing_prefix + digest),
                  "blob collection: a removal mark not removed");
    }
  };
  std::string pins_prefix = absl::StrCat(options_.prefix, "/blob-pins/");
  absl::StatusOr<std::vector<providers::EtcdKeyValue>> pins =
      etcd_->GetPrefix(pins_prefix, providers::kMaxEtcdEntries);
  if (!pins.ok()) return pins.status();
  std::set<std::string> pinned;
  for (const providers::EtcdKeyValue& kv : *pins) {
    absl::string_view rest = absl::string_view(kv.key).substr(pins_prefix.size());
    pinned.insert(std::string(rest.substr(0, rest.find('/'))));
  }
  uint64_t records = 0;
  absl::StatusOr<std::set<std::string>> named_now = ReferencedBlobs(&records);
  if (!named_now.ok()) return named_now.status();
  for (const std::string& digest : removing) {
    if (pinned.count(digest)) {
      ++out.pinned;
      continue;
    }
    if (named_now->count(digest)) {
      ++out.referenced;  // named since
      if (!dry_run) {
        LogIfFailed(etcd_->Delete(marks_prefix + digest), "blob collection: a mark not removed");
      }
      continue;
    }
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
  return out;
}

}  // namespace airlock
