// SessionManager's part in a fleet (session_handoff.h): the hosts VMs run on, and handing
// paused sessions over: claim and fetch on resume, publish on pause, forget on removal.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "src/common/file_util.h"
#include "src/common/log.h"
#include "src/daemon/session_manager.h"
#include "src/telemetry/tracer.h"
#include "src/vm/snapshot.h"

namespace airlock {

absl::StatusOr<std::vector<providers::HostInfo>> SessionManager::Hosts() {
  absl::StatusOr<std::vector<providers::HostInfo>> hosts = hosts_->Hosts();
  if (!hosts.ok()) return hosts.status();
  for (providers::HostInfo& host : *hosts) {
    if (!host.this_host || !host.sessions.empty()) continue;
    for (const auto& live : LiveSessions(SessionEventHub::kEveryTenant)) {
      host.sessions.push_back(live->record.id);
    }
  }
  return hosts;
}

absl::StatusOr<SessionRecord> SessionManager::TakeOver(const Principal& who, const std::string& id,
                                                       absl::StatusOr<SessionRecord> local) {
  if (local.ok() && local->state != SessionState::kPaused) return local;
  if (!local.ok() && !absl::IsNotFound(local.status())) return local;
  absl::StatusOr<SessionHandoff::Published> published = handoff_->Find(id);
  // Never published: it never left this host (or is no session of the caller's at all).
  if (absl::IsNotFound(published.status())) return local;
  if (absl::IsDataLoss(published.status())) {
    // Changed, signed with another key, or older than one this host saw: nothing is loaded,
    // and the audit says who asked and why it was refused.
    LogIfFailed(store_->audit().Audit(who, who.Tenant(), "session.fetch", id,
                                      std::string(published.status().message())),
                absl::StrCat("session ", id, ": a refused record not audited"));
  }
  if (!published.ok()) return published.status();
  if (published->record.tenant != who.Tenant()) {
    if (!local.ok()) return local;
    return absl::FailedPreconditionError(
        absl::StrCat("session ", id, " was published by another tenant's session"));
  }
  if (absl::Status st = handoff_->Claim(id); !st.ok()) return st;
  // Read again now that no other host can publish it: the holder before may have published a
  // newer one between the read above and the claim.
  published = handoff_->Find(id);
  if (!published.ok() || published->record.tenant != who.Tenant()) {
    LogIfFailed(handoff_->Release(id), absl::StrCat("session ", id, ": not released"));
    if (!published.ok()) return published.status();
    return absl::FailedPreconditionError(
        absl::StrCat("session ", id, " was published by another tenant's session"));
  }
  std::string dir = layout_.Snapshot(id);
  if (local.ok() && published->host == handoff_->host_id() && access(dir.c_str(), F_OK) == 0) {
    return local;  // its last snapshot was taken here, and is still here
  }
  if (local.ok() && access(layout_.UnpublishedMarker(id).c_str(), F_OK) == 0 &&
      access(dir.c_str(), F_OK) == 0) {
    // Its last pause here could not publish (the claim was kept, so no host ran it since): the
    // snapshot here is newer than the published one, which must not replace it.
    return local;
  }
  telemetry::Span span("snapshot.fetch");
  span.SetAttribute("airlock.session.id", id);
  absl::Status st = MakeDirectories(layout_.Dir(id), 0700);
  if (st.ok()) st = handoff_->Fetch(*published, dir);
  if (st.ok()) {
    // A host that never had the session's image takes it from the fleet's blob store.
    ImageStore images = images_.Operators();
    const SessionRecord& r = published->record;
    if (absl::IsNotFound(images.ResolveDigest(r.image, r.image_digest).status())) {
      st = handoff_->FetchImage(*published, images);
    }
  }
  // Its volumes come with it, as that host last wrote them.
  if (st.ok()) st = volumes_.Adopt(who, *published, *handoff_);
  if (st.ok()) st = store_->sessions().Import(who, published->record, published->host);
  if (!st.ok()) {
    span.SetError(std::string(st.message()));
    LogIfFailed(handoff_->Release(id), absl::StrCat("session ", id, ": not released"));
    // What was fetched for a session this host never had is not kept.
    if (!local.ok()) {
      LogIfFailed(RemoveTree(layout_.Dir(id)), absl::StrCat("session ", id, ": not removed"));
    }
    return absl::Status(st.code(), absl::StrCat("could not bring session ", id, " from host ",
                                                published->host, ": ", st.message()));
  }
  LogRecord event{.unix_ms = NowMs(),
                  .stream = LogStream::kEvent,
                  .data = absl::StrCat("session moved here from host ", published->host)};
  LogIfFailed(store_->commands().AppendOutput(published->record, {event}),
              absl::StrCat("session ", id, ": its move not logged"));
  return store_->sessions().Get(who.Tenant(), id);
}

absl::Status SessionManager::Publish(const SessionRecord& record) {
  telemetry::Span span("snapshot.publish");
  span.SetAttribute("airlock.session.id", record.id);
  absl::StatusOr<ImageInfo> image =
      images_.Operators().ResolveDigest(record.image, record.image_digest);
  absl::Status st = image.status();
  // Its volumes go with it: their disks are frozen and held by it while it is paused.
  std::vector<SessionHandoff::VolumeDisk> volumes;
  for (const VolumeAttachment& v : record.volumes) {
    if (!st.ok()) break;
    absl::StatusOr<VolumeRecord> volume = store_->volumes().Get(record.tenant, v.name);
    if (volume.ok() && volume->id != v.volume_id) {
      volume =
          absl::FailedPreconditionError(absl::StrCat("volume ", v.name, " is another one now"));
    }
    st = volume.status();
    if (st.ok()) {
      volumes.push_back({.path = layout_.Volume(v.volume_id),
                         .size_bytes = volume->size_bytes,
                         .snapshot = volume->read_only});
    }
  }
  if (st.ok()) st = handoff_->Publish(record, layout_.Snapshot(record.id), *image, volumes);
  std::string unpublished = layout_.UnpublishedMarker(record.id);
  if (st.ok() && unlink(unpublished.c_str()) == 0) {
    // Gone for good before another host may take the session, or a later resume here would
    // prefer this stale snapshot to a newer one published elsewhere.
    st = SyncDirectory(layout_.Dir(record.id));
  }
  if (st.ok()) st = handoff_->Release(record.id);
  if (st.ok()) return st;
  LogIfFailed(WriteFileAtomically(unpublished, st.ToString(), 0600),
              absl::StrCat("session ", record.id, ": its unpublished snapshot not marked"));
  span.SetError(std::string(st.message()));
  LogRecord event{.unix_ms = NowMs(),
                  .stream = LogStream::kEvent,
                  .data = absl::StrCat("snapshot not published: ", st.message())};
  LogIfFailed(store_->commands().AppendOutput(record, {event}),
              absl::StrCat("session ", record.id, ": its snapshot problem not logged"));
  // This host keeps the session (and its claim): it resumes here only.
  return absl::Status(st.code(),
                      absl::StrCat("session ", record.id,
                                   " is paused, but its snapshot could not be published for other "
                                   "hosts (",
                                   st.message(), "); it can be resumed on this host only"));
}

void SessionManager::ClaimAgain() {
  for (const std::shared_ptr<LiveSession>& live : LiveSessions(SessionEventHub::kEveryTenant)) {
    const SessionRecord& record = live->record;
    std::shared_ptr<absl::Mutex> session_lock = SessionLock(record.id);
    absl::MutexLock guard(session_lock.get());
    if (FindLive(record.tenant, record.id) != live) continue;  // paused or removed meanwhile
    absl::Status claimed = handoff_->ClaimAsItWas(record.id);
    if (!absl::IsFailedPrecondition(claimed)) {
      // Claimed again; or etcd failed once more, and the next rejoin tries again.
      LogIfFailed(claimed, absl::StrCat("session ", record.id, ": not claimed again"));
      continue;
    }
    // Another host resumed it from its last published snapshot while this one was cut off:
    // it runs there, and this VM must not go on (what it did since that snapshot is lost).
    std::string why = "another host took it over while this host was cut off from etcd";
    LogWarning(absl::StrCat("session ", record.id, ": ended here: ", claimed.message()));
    {
      absl::MutexLock lock(&mu_);
      live_.erase(record.id);
    }
    live->vm->Kill(absl::AbortedError(absl::StrCat("session ", record.id, ": ", why)));
    LogIfFailed(RemoveTree(layout_.Dir(record.id)),
                absl::StrCat("session ", record.id, ": files not removed"));
    LogRecord event{.unix_ms = NowMs(),
                    .stream = LogStream::kEvent,
                    .data = absl::StrCat("session ended on this host: ", why)};
    LogIfFailed(store_->commands().AppendOutput(record, {event}),
                absl::StrCat("session ", record.id, ": its end here not logged"));
    LogIfFailed(store_->sessions().SetState(kDaemonPrincipal, record.tenant, record.id,
                                            SessionState::kPaused, why, 0, "session.takeover"),
                absl::StrCat("session ", record.id, ": its state not kept"));
  }
  IndexHeld();  // what changed while this host was cut off
}

namespace {

// How often the index thread writes all this host's entries again (and removes its stale ones).
constexpr absl::Duration kIndexPass = absl::Seconds(30);
// How often the fleet's index is read while someone watches other hosts' sessions.
constexpr absl::Duration kFleetWatchEvery = absl::Seconds(1);
// How often a host looks whether it is marked draining.
constexpr absl::Duration kDrainLookEvery = absl::Seconds(2);

}  // namespace

void SessionManager::IndexOne(const std::string& tenant, const std::string& id) {
  // Under the session's lock, so that a pause cannot release it between what is read here and
  // the claim below.
  std::shared_ptr<absl::Mutex> session_lock = SessionLock(id);
  absl::MutexLock guard(session_lock.get());
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(tenant, id);
  if (!record.ok()) return;
  if (record->state == SessionState::kStopped || record->state == SessionState::kFailed) {
    // Ended: the fleet lists only sessions that can run; its host's `ls -a` keeps the rest.
    LogIfFailed(handoff_->Unindex(tenant, id),
                absl::StrCat("fleet index: session ", id, " not removed"));
    return;
  }
  if (record->state == SessionState::kRunning && FindLive(tenant, id) != nullptr) {
    // A session that runs here is this host's: one made here is claimed now (a resumed one
    // was claimed before it ran). Refused: another host took it over while this one was cut
    // off, which ClaimAgain settles.
    if (absl::Status claimed = handoff_->Claim(id); !claimed.ok()) {
      LogIfFailed(claimed, absl::StrCat("fleet index: session ", id, " not claimed"));
      return;
    }
  }
  // Written only while this host holds the session (Index writes nothing otherwise).
  LogIfFailed(handoff_->Index(*record), absl::StrCat("fleet index: session ", id, " not written"));
}

void SessionManager::IndexHeld() {
  absl::StatusOr<std::vector<SessionRecord>> records = store_->sessions().ListEveryTenant();
  if (!records.ok()) {
    LogWarning(absl::StrCat("fleet index: sessions not read: ", records.status().message()));
    return;
  }
  // What this host wrote: rewritten only where it changed, removed where the session ended or
  // is gone from here (removed, or ended before this thread started).
  std::map<std::string, SessionHandoff::IndexEntry> mine;
  absl::StatusOr<std::vector<SessionHandoff::IndexEntry>> index = handoff_->ReadIndex("");
  if (index.ok()) {
    for (SessionHandoff::IndexEntry& e : *index) {
      if (e.host == handoff_->host_id()) mine.emplace(e.record.id, std::move(e));
    }
  }
  for (const SessionRecord& r : *records) {
    auto it = mine.find(r.id);
    bool indexed = it != mine.end();
    bool ended = r.state == SessionState::kStopped || r.state == SessionState::kFailed;
    bool same =
        indexed && it->second.record.state == r.state && it->second.record.reason == r.reason;
    if (indexed) mine.erase(it);
    if (same || (ended && !indexed)) continue;
    IndexOne(r.tenant, r.id);
  }
  for (const auto& [id, e] : mine) {
    LogIfFailed(handoff_->Unindex(e.record.tenant, id),
                absl::StrCat("fleet index: session ", id, " not removed"));
  }
}

bool SessionManager::RunsHere(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return live_.count(id) > 0;
}

void SessionManager::RefreshDraining() {
  if (handoff_ == nullptr) return;
  bool pauses = true;
  absl::StatusOr<bool> draining = handoff_->Draining(handoff_->host_id(), &pauses);
  if (!draining.ok()) return;  // etcd unreachable a moment: as it was
  bool pausing = *draining && pauses;
  bool was_draining = draining_.exchange(*draining);
  if (drain_pauses_.exchange(pausing) != pausing || was_draining != *draining) {
    LogInfo(absl::StrCat("host ", handoff_->host_id(),
                         !*draining ? " is no longer draining"
                         : pausing  ? " is draining: it takes nothing new and pauses its sessions"
                                    : " is draining: it takes nothing new"));
  }
}

absl::Status SessionManager::DrainingRefusal(const std::string& what) const {
  return absl::FailedPreconditionError(absl::StrCat(
      "host ", handoff_ != nullptr ? handoff_->host_id() : "", " is being drained and does not ",
      what,
      ": ask another host of the fleet (airlock hosts), or end the drain with `airlock "
      "hosts drain --undo ",
      handoff_ != nullptr ? handoff_->host_id() : "", "`"));
}

void SessionManager::IndexLoop() {
  std::shared_ptr<SessionEventHub::Subscription> events =
      store_->events()->Subscribe(SessionEventHub::kEveryTenant, "");
  IndexHeld();
  RefreshDraining();
  absl::Time next_pass = absl::Now() + kIndexPass;
  absl::Time next_drain_look = absl::Now() + kDrainLookEvery;
  for (;;) {
    {
      absl::MutexLock lock(&watch_mu_);
      if (stopping_) return;
    }
    if (absl::Now() >= next_drain_look) {
      RefreshDraining();
      next_drain_look = absl::Now() + kDrainLookEvery;
    }
    if (absl::Now() >= next_pass) {
      // Every so often all of it again: writes that failed (etcd unreachable a moment) are
      // made now.
      IndexHeld();
      next_pass = absl::Now() + kIndexPass;
    }
    std::optional<SessionEvent> e = events->Next(absl::Now() + absl::Milliseconds(500));
    if (!e) continue;
    if (e->lost > 0) IndexHeld();    // it fell behind: what it missed
    if (!e->host.empty()) continue;  // another host's session (FleetWatchLoop's)
    if (e->kind == SessionEvent::Kind::kRemoved) {
      LogIfFailed(handoff_->Unindex(e->tenant, e->session_id),
                  absl::StrCat("fleet index: session ", e->session_id, " not removed"));
    } else if (e->kind == SessionEvent::Kind::kState) {
      IndexOne(e->tenant, e->session_id);  // as it is now (a later event brings what follows)
    }
  }
}

std::shared_ptr<void> SessionManager::WatchFleet() {
  if (handoff_ == nullptr || store_->events() == nullptr) return nullptr;
  {
    absl::MutexLock lock(&watch_mu_);
    // The first watcher: the index is read at once, so that what changes from now on is told.
    if (fleet_watchers_++ == 0) fleet_watch_wanted_ = true;
  }
  return std::shared_ptr<void>(new int(0), [this](void* token) {
    delete static_cast<int*>(token);
    absl::MutexLock lock(&watch_mu_);
    --fleet_watchers_;
  });
}

void SessionManager::FleetWatchLoop() {
  // What the fleet's other hosts had at the last read, by session id.
  struct Seen {
    std::string tenant;
    SessionState state;
    std::string host;
    std::string reason;
  };
  std::map<std::string, Seen> seen;
  bool have_read = false;  // `seen` is a read made while someone watched
  for (;;) {
    {
      absl::MutexLock lock(&watch_mu_);
      watch_mu_.AwaitWithTimeout(
          absl::Condition(
              +[](SessionManager* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(m->watch_mu_) {
                return m->stopping_ || m->fleet_watch_wanted_;
              },
              this),
          kFleetWatchEvery);
      if (stopping_) return;
      fleet_watch_wanted_ = false;
      if (fleet_watchers_ == 0) {
        have_read = false;
        continue;
      }
    }
    absl::StatusOr<std::vector<SessionHandoff::IndexEntry>> index = handoff_->ReadIndex("");
    if (!index.ok()) continue;  // (airlock ls says why)
    const std::string& here = handoff_->host_id();
    std::map<std::string, Seen> now;
    std::set<std::string> mine;
    for (const SessionHandoff::IndexEntry& e : *index) {
      if (e.host == here) {
        mine.insert(e.record.id);
      } else {
        now[e.record.id] = {.tenant = e.record.tenant,
                            .state = e.record.state,
                            .host = e.host,
                            .reason = e.record.reason};
      }
    }
    if (have_read) {
      int64_t unix_ms = absl::ToUnixMillis(absl::Now());
      for (const auto& [id, s] : now) {
        auto before = seen.find(id);
        if (before != seen.end() && before->second.state == s.state &&
            before->second.host == s.host) {
          continue;
        }
        SessionEvent e{.kind = SessionEvent::Kind::kState,
                       .tenant = s.tenant,
                       .session_id = id,
                       .unix_ms = unix_ms,
                       .state = s.state,
                       .reason = s.reason,
                       .host = s.host};
        store_->events()->Publish(e);
      }
      for (const auto& [id, s] : seen) {
        // Gone from the other hosts: here now (this host's own events say so), or ended there.
        if (now.contains(id) || mine.contains(id)) continue;
        store_->events()->Publish({.kind = SessionEvent::Kind::kRemoved,
                                   .tenant = s.tenant,
                                   .session_id = id,
                                   .unix_ms = unix_ms,
                                   .reason = "it ended there (its record stays on that host)",
                                   .host = s.host});
      }
    }
    seen = std::move(now);
    have_read = true;
  }
}

namespace {

// An entry whose host is no longer in the fleet says so, and what a resume would do.
void SayIfHostGone(SessionManager::ListedSession& s, const std::set<std::string>& live_hosts,
                   SessionHandoff& handoff) {
  if (s.record.state != SessionState::kRunning || live_hosts.contains(s.host)) return;
  absl::Status published = handoff.Find(s.record.id).status();
  std::string what =
      published.ok() ? absl::StrCat("`airlock resume ", s.record.id,
                                    "` takes it over from its last published snapshot")
      : absl::IsNotFound(published)
          ? std::string("it never published a snapshot, so no host can take it over")
          : absl::StrCat("its published snapshot cannot be read: ", published.message());
  s.record.reason = absl::StrCat("host ", s.host, " is gone (its lease expired); ", what);
}

}  // namespace

absl::StatusOr<std::vector<SessionManager::ListedSession>> SessionManager::List(
    const std::string& tenant) {
  bool every = tenant == SessionEventHub::kEveryTenant;
  absl::StatusOr<std::vector<SessionRecord>> local =
      every ? store_->sessions().ListEveryTenant() : store_->sessions().List(tenant);
  if (!local.ok()) return local.status();
  std::vector<ListedSession> out;
  if (handoff_ == nullptr) {
    for (SessionRecord& r : *local) out.push_back({.record = std::move(r), .host = ""});
    return out;
  }
  const std::string& here = handoff_->host_id();
  absl::StatusOr<std::vector<SessionHandoff::IndexEntry>> index =
      handoff_->ReadIndex(every ? "" : tenant);
  if (!index.ok()) {
    // This host's view alone: what it last saw of each session.
    LogWarning(absl::StrCat("fleet index not read; listing this host's sessions only: ",
                            index.status().message()));
    for (SessionRecord& r : *local) out.push_back({.record = std::move(r), .host = here});
    return out;
  }
  std::set<std::string> live_hosts;
  if (absl::StatusOr<std::vector<SessionHandoff::HostInfo>> hosts = handoff_->Hosts(); hosts.ok()) {
    for (const SessionHandoff::HostInfo& h : *hosts) live_hosts.insert(h.id);
  } else {
    live_hosts.insert(here);  // unknown: none is said to be gone
    for (const SessionHandoff::IndexEntry& e : *index) live_hosts.insert(e.host);
  }
  std::map<std::string, const SessionHandoff::IndexEntry*> indexed;
  for (const SessionHandoff::IndexEntry& e : *index) indexed[e.record.id] = &e;
  for (SessionRecord& r : *local) {
    auto it = indexed.find(r.id);
    // Another host wrote it last: it took the session over, and its entry is the newer.
    if (it != indexed.end() && it->second->host != here) continue;
    // Paused, released, and neither indexed nor published: removed on the host that took it.
    // (One whose pause here could not publish, volumes included, is this host's still.)
    if (it == indexed.end() && r.state == SessionState::kPaused &&
        access(layout_.UnpublishedMarker(r.id).c_str(), F_OK) != 0 &&
        absl::IsNotFound(handoff_->Find(r.id).status())) {
      continue;
    }
    out.push_back({.record = std::move(r), .host = here});
  }
  for (const SessionHandoff::IndexEntry& e : *index) {
    if (e.host == here) continue;  // this host's own record is the fresher
    out.push_back({.record = e.record, .host = e.host});
    SayIfHostGone(out.back(), live_hosts, *handoff_);
  }
  std::stable_sort(out.begin(), out.end(), [](const ListedSession& a, const ListedSession& b) {
    return a.record.created_ms < b.record.created_ms;
  });
  return out;
}

absl::StatusOr<SessionManager::ListedSession> SessionManager::Find(const std::string& tenant,
                                                                   const std::string& id) {
  absl::StatusOr<SessionRecord> local = store_->sessions().Get(tenant, id);
  if (handoff_ == nullptr || (!local.ok() && !absl::IsNotFound(local.status()))) {
    if (!local.ok()) return local.status();
    return ListedSession{.record = *std::move(local), .host = ""};
  }
  const std::string& here = handoff_->host_id();
  absl::StatusOr<SessionHandoff::IndexEntry> entry = handoff_->ReadIndex(tenant, id);
  if (entry.ok() && entry->host != here) {
    ListedSession s{.record = std::move(entry->record), .host = entry->host};
    std::set<std::string> live_hosts{here, s.host};
    if (absl::StatusOr<std::vector<SessionHandoff::HostInfo>> hosts = handoff_->Hosts();
        hosts.ok()) {
      live_hosts = {here};
      for (const SessionHandoff::HostInfo& h : *hosts) live_hosts.insert(h.id);
    }
    SayIfHostGone(s, live_hosts, *handoff_);
    return s;
  }
  if (!local.ok()) return local.status();
  return ListedSession{.record = *std::move(local), .host = here};
}

void SessionManager::ForgetEverywhere(const std::string& id) {
  if (handoff_ == nullptr) return;
  LogIfFailed(handoff_->Forget(id), absl::StrCat("session ", id, ": its snapshot still published"));
  LogIfFailed(handoff_->Release(id), absl::StrCat("session ", id, ": not released"));
}

}  // namespace airlock
