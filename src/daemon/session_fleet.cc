// SessionManager's part in a fleet (session_handoff.h): the hosts VMs run on, and handing
// paused sessions over: claim and fetch on resume, publish on pause, forget on removal.
#include <sys/stat.h>
#include <unistd.h>

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
  if (!published.ok()) return published.status();
  if (published->record.tenant != who.Tenant()) {
    if (!local.ok()) return local;
    return absl::FailedPreconditionError(
        absl::StrCat("session ", id, " was published by another tenant's session"));
  }
  if (absl::Status st = handoff_->Claim(id); !st.ok()) return st;
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
  if (st.ok()) st = store_->sessions().Import(who, published->record, published->host);
  if (!st.ok()) {
    span.SetError(std::string(st.message()));
    LogIfFailed(handoff_->Release(id), absl::StrCat("session ", id, ": not released"));
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
  if (st.ok() && !record.volumes.empty()) {
    // Volumes are this host's files: the session stays where they are.
    st = absl::UnimplementedError(
        "volumes do not travel between hosts yet; the session resumes on this host only");
  }
  if (st.ok()) st = handoff_->Publish(record, layout_.Snapshot(record.id), *image);
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
    absl::Status claimed = handoff_->Claim(record.id);
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
}

void SessionManager::ForgetEverywhere(const std::string& id) {
  if (handoff_ == nullptr) return;
  LogIfFailed(handoff_->Forget(id), absl::StrCat("session ", id, ": its snapshot still published"));
  LogIfFailed(handoff_->Release(id), absl::StrCat("session ", id, ": not released"));
}

}  // namespace airlock
