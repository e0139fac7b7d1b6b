// SessionManager's snapshots: pause, resume (here or, with a fleet, taken over from another
// host) and fork, and setting paused snapshots' RAM apart in the background.
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/byte_size.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/hex.h"
#include "src/common/log.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/session_manager_internal.h"
#include "src/telemetry/tracer.h"
#include "src/vm/snapshot.h"
#include "src/vm/vm_launcher.h"

namespace airlock {

using session_internal::NewSession;
using session_internal::OptionsFor;
using session_internal::PlacementOf;

namespace {

// How long a client's pause or fork waits for a use that has just ended to let go (GiveWay).
constexpr absl::Duration kJustEndedGrace = absl::Seconds(1);

constexpr uint32_t kMaxForks = 64;
// How long after a pause its snapshot's RAM is set apart: a resume that soon is not slowed by
// it (and uses the snapshot as it is).
constexpr absl::Duration kApartDelay = absl::Seconds(3);

// A file's size, 0 if it cannot be read (for the snapshot bytes counted).
uint64_t FileBytes(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

}  // namespace

absl::StatusOr<SessionRecord> SessionManager::Pause(const Principal& who, const std::string& id) {
  std::shared_ptr<absl::Mutex> session_lock = SessionLock(id);
  absl::MutexLock guard(session_lock.get());
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(who.Tenant(), id);
  if (!record.ok()) return record.status();
  if (record->state == SessionState::kPaused) return record;
  return PauseLocked(who, *record, absl::StrCat("paused by ", who.Name()), /*at_ttl=*/false,
                     kJustEndedGrace);
}

absl::StatusOr<SnapshotMemoryApart> SessionManager::PrepareMemoryApart(
    const SessionRecord& record, const std::string& dir, const std::string& work_dir) {
  absl::StatusOr<ImageInfo> image =
      images_.Operators().ResolveDigest(record.image, record.image_digest);
  if (!image.ok()) return image.status();
  LaunchOptions options = OptionsFor(record, layout_);
  options.host_cgroup = absl::StrCat(record.id, "-apart");
  options.background = true;  // the lowest CPU weight: sessions that run come first
  return PrepareSnapshotMemoryApart(hosts_->local(), paths_, *image, dir, work_dir, key_, options);
}

void SessionManager::LogMemoryApart(const SessionRecord& record, const absl::Status& status) {
  if (status.ok() || absl::IsNotFound(status)) return;  // NOT_FOUND: apart already
  LogRecord event{.unix_ms = NowMs(),
                  .stream = LogStream::kEvent,
                  .data = absl::StrCat("snapshot: its RAM stays in the state, so resuming it "
                                       "copies the RAM: ",
                                       status.message())};
  LogIfFailed(store_->commands().AppendOutput(record, {event}),
              absl::StrCat("session ", record.id, ": a snapshot problem not logged"));
}

void SessionManager::ApartLoop() {
  for (;;) {
    SessionRecord record;
    {
      absl::MutexLock lock(&watch_mu_);
      while (!stopping_ && apart_queue_.empty()) apart_cv_.Wait(&watch_mu_);
      while (!stopping_ && absl::Now() < apart_queue_.front().not_before) {
        apart_cv_.WaitWithDeadline(&watch_mu_, apart_queue_.front().not_before);
      }
      if (stopping_) return;
      record = std::move(apart_queue_.front().record);
      apart_queue_.pop_front();
    }
    std::string dir = layout_.Snapshot(record.id);
    telemetry::Span span("snapshot.memory_apart");
    span.SetAttribute("airlock.session.id", record.id);
    // Outside the session's directory, which `rm` may remove meanwhile.
    absl::StatusOr<SnapshotMemoryApart> apart =
        PrepareMemoryApart(record, dir, layout_.Apart(record.id));
    absl::Status status = apart.status();
    if (apart.ok()) {
      // Put in place only while the session is still paused on that very snapshot.
      std::shared_ptr<absl::Mutex> session_lock = SessionLock(record.id);
      absl::MutexLock guard(session_lock.get());
      absl::StatusOr<SessionRecord> now = store_->sessions().Get(record.tenant, record.id);
      if (now.ok() && now->state == SessionState::kPaused) {
        status = CommitSnapshotMemoryApart(dir, *apart);
      } else {
        RemoveTree(apart->dir).IgnoreError();
        status = absl::OkStatus();  // resumed or removed meanwhile: nothing to do
      }
    }
    if (status.ok() || absl::IsNotFound(status) || absl::IsFailedPrecondition(status)) continue;
    absl::StatusOr<SessionRecord> now = store_->sessions().Get(record.tenant, record.id);
    if (!now.ok() || now->state != SessionState::kPaused) continue;  // resumed or removed
    span.SetError(std::string(status.message()));
    LogMemoryApart(record, status);
  }
}

absl::StatusOr<SessionRecord> SessionManager::PauseLocked(const Principal& who,
                                                          const SessionRecord& record,
                                                          const std::string& reason, bool at_ttl,
                                                          absl::Duration just_ended) {
  std::shared_ptr<LiveSession> live = FindLive(record.tenant, record.id);
  if (!live) {
    return absl::FailedPreconditionError(absl::StrCat("session ", record.id, " is ",
                                                      SessionStateName(record.state),
                                                      "; only a running session "
                                                      "can be paused"));
  }
  if (absl::Status s = GiveWay(*live, "pause", just_ended); !s.ok()) return s;
  SnapshotManifest manifest =
      DescribeVm(paths_, record.id, record.image_digest, record.limits.vcpus,
                 record.limits.memory_bytes, *live->vm);
  telemetry::Span span("snapshot");
  span.SetAttribute("airlock.session.id", record.id);
  absl::StatusOr<SnapshotManifest> taken =
      TakeSnapshot(*live->vm, live->disk.get(), layout_.Snapshot(record.id), manifest, key_);
  if (!taken.ok()) {
    span.SetError(std::string(taken.status().message()));
    // Nothing was written; the VM goes on if it still can, or waits, whole, for disk space.
    if (!live->vm->Continue(absl::Now() + absl::Seconds(10)).ok() && !WaitsForDiskSpace(*live)) {
      Retire(record.id, SessionState::kFailed,
             absl::StrCat("pausing failed and the VM could not go on: ",
                          WhyVmFailed(*live, taken.status())));
    }
    return absl::Status(taken.status().code(),
                        absl::StrCat("could not pause session ", record.id, ": ",
                                     taken.status().message(), DiskSpaceHint()));
  }
  counters_.snapshots++;
  counters_.snapshot_bytes += FileBytes(layout_.Snapshot(record.id) + "/" + kSnapshotStateFile);
  span.End();
  // A resumed session's disk and memory had names of their own; the snapshot holds them now.
  unlink(layout_.LiveDisk(record.id).c_str());
  unlink(layout_.LiveMemory(record.id).c_str());
  {
    absl::MutexLock lock(&mu_);
    live_.erase(record.id);
  }
  live->vm->Kill(absl::CancelledError("the session was paused"));
  // Once QEMU has ended, nothing writes the snapshot's files: the hashes the pause took are
  // kept, so that a resume does not read the RAM again (~40 ms at 512 MiB here).
  for (int i = 0; i < 500 && !live->vm->ExitReason().has_value(); ++i) usleep(1000);
  if (live->vm->ExitReason().has_value()) WritersEnded(layout_.Snapshot(record.id));
  live.reset();  // the VM process is reaped here unless a watcher holds it for a moment
  // Cleared first: whoever sees the session paused at its TTL sees no TTL left.
  if (at_ttl) {
    LogIfFailed(store_->sessions().SetTimeToLive(kDaemonPrincipal, record.tenant, record.id, 0),
                absl::StrCat("session ", record.id, ": its time to live not cleared"));
  }
  if (absl::Status st = store_->sessions().SetState(
          who, record.tenant, record.id, SessionState::kPaused, reason, 0, "session.pause");
      !st.ok()) {
    return st;
  }
  LogRecord event{.unix_ms = NowMs(),
                  .stream = LogStream::kEvent,
                  .data = absl::StrCat("session paused: ", reason)};
  LogIfFailed(store_->commands().AppendOutput(record, {event}),
              absl::StrCat("session ", record.id, ": its pause not logged"));
  {
    absl::MutexLock lock(&watch_mu_);
    apart_queue_.push_back({record, absl::Now() + kApartDelay});
  }
  apart_cv_.Signal();
  absl::StatusOr<SessionRecord> paused = store_->sessions().Get(record.tenant, record.id);
  if (paused.ok() && handoff_ != nullptr) {
    if (absl::Status st = Publish(*paused); !st.ok()) return st;
  }
  return paused;
}

std::pair<int, int> SessionManager::PauseAll() {
  std::vector<std::shared_ptr<LiveSession>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, live] : live_) all.push_back(live);
  }
  int paused = 0, failed = 0;
  for (const std::shared_ptr<LiveSession>& live : all) {
    std::shared_ptr<absl::Mutex> session_lock = SessionLock(live->record.id);
    absl::MutexLock guard(session_lock.get());
    absl::StatusOr<SessionRecord> record =
        store_->sessions().Get(live->record.tenant, live->record.id);
    bool ok = record.ok() && record->state == SessionState::kRunning &&
              PauseLocked(kDaemonPrincipal, *record, "airlockd stopped").ok();
    ++(ok ? paused : failed);
  }
  return {paused, failed};
}

absl::StatusOr<SessionRecord> SessionManager::Resume(const Principal& who, const std::string& id) {
  std::shared_ptr<absl::Mutex> session_lock = SessionLock(id);
  absl::MutexLock guard(session_lock.get());
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(who.Tenant(), id);
  if (record.ok() && record->state == SessionState::kRunning && FindLive(who.Tenant(), id)) {
    return record;
  }
  if (draining()) return DrainingRefusal("resume sessions");
  if (handoff_ != nullptr) record = TakeOver(who, id, std::move(record));
  if (!record.ok()) return record.status();
  absl::StatusOr<std::shared_ptr<LiveSession>> live = ResumeLocked(who, *record);
  if (!live.ok()) return live.status();
  return (*live)->record;
}

absl::StatusOr<std::shared_ptr<LiveSession>> SessionManager::ResumeLocked(
    const Principal& who, const SessionRecord& record) {
  absl::StatusOr<std::shared_ptr<LiveSession>> live =
      draining() ? DrainingRefusal("resume sessions") : ResumeHere(who, record);
  // A claim TakeOver made is given back: another host may resume it (from its published
  // snapshot; not when this host has a newer one it could not publish).
  if (!live.ok() && handoff_ != nullptr &&
      access(layout_.UnpublishedMarker(record.id).c_str(), F_OK) != 0) {
    LogIfFailed(handoff_->Release(record.id),
                absl::StrCat("session ", record.id, ": not released"));
  }
  return live;
}

absl::StatusOr<std::shared_ptr<LiveSession>> SessionManager::ResumeHere(
    const Principal& who, const SessionRecord& record) {
  if (record.state != SessionState::kPaused) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", record.id, " is ", SessionStateName(record.state),
                     record.reason.empty() ? "" : " (" + record.reason + ")",
                     "; only a paused session can be resumed"));
  }
  std::string dir = layout_.Snapshot(record.id);
  SnapshotFiles files;
  telemetry::Span verify("verify");  // the manifest's signature and every file's digest
  verify.SetAttribute("airlock.session.id", record.id);
  absl::StatusOr<SnapshotManifest> manifest = OpenSnapshot(dir, key_, &files, SnapshotUse::kResume);
  if (!manifest.ok()) verify.SetError(std::string(manifest.status().message()));
  verify.End();
  if (!manifest.ok()) {
    // Never loaded: the session cannot come back, and says why.
    std::string why(manifest.status().message());
    LogIfFailed(store_->sessions().SetState(who, record.tenant, record.id, SessionState::kFailed,
                                            why, 0, "session.resume"),
                absl::StrCat("session ", record.id, ": its failure not recorded"));
    return absl::DataLossError(absl::StrCat("session ", record.id, " cannot be resumed: ", why));
  }
  absl::StatusOr<ImageInfo> image =
      images_.Operators().ResolveDigest(record.image, record.image_digest);
  if (!image.ok()) return image.status();
  if (absl::Status s = volumes_.CheckUnchanged(record); !s.ok()) return s;
  // Held until the record says running.
  QuotaAmounts adding = NewSession(record.limits);
  adding.sessions = adding.disk_bytes = 0;  // it exists already
  absl::StatusOr<QuotaReservations::Hold> admitted =
      quotas_.Admit(who, record.tenant, adding, "session.resume " + record.id);
  if (!admitted.ok()) {
    return absl::Status(
        admitted.status().code(),
        absl::StrCat("session ", record.id, " cannot run now: ", admitted.status().message()));
  }
  absl::StatusOr<VmDriver*> driver = hosts_->Place(PlacementOf(record.limits));
  if (!driver.ok()) return driver.status();
  // The VM takes the snapshot's disk and memory file over (they become the session's live
  // disk and RAM), so the snapshot is used up from here on.
  std::string disk_path = absl::StrCat(dir, "/", kSnapshotDiskFile);
  std::string live_path = layout_.LiveDisk(record.id);
  std::string memory_path = absl::StrCat(dir, "/", kSnapshotMemoryFile);
  std::string live_memory_path = layout_.LiveMemory(record.id);
  // The disk checked, made writable through its descriptor (never its path again).
  absl::StatusOr<UniqueFd> disk = ReopenFile(files.disk.get(), /*writable=*/true);
  if (!disk.ok()) return disk.status();
  if (files.memory_own) {
    if (absl::Status s = ReserveGuestMemory(files.memory->get()); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("session ", record.id, " cannot be resumed: ", s.message(),
                                 " (the disk of ", paths_.home, " has ",
                                 FormatBytes(FreeDiskBytes()), " free: free some space there)"));
    }
  }
  if (files.memory_own && rename(memory_path.c_str(), live_memory_path.c_str()) != 0) {
    return ErrnoStatus("rename", memory_path);
  }
  if (rename(disk_path.c_str(), live_path.c_str()) != 0) {
    absl::Status failed = ErrnoStatus("rename", disk_path);
    if (files.memory_own) rename(live_memory_path.c_str(), memory_path.c_str());
    return failed;
  }
  telemetry::Span restore("restore");
  restore.SetAttribute("airlock.session.id", record.id);
  absl::Time restore_started = absl::Now();
  absl::StatusOr<LaunchedVm> vm = RestoreVm(**driver, paths_, *image, files, *manifest,
                                            *std::move(disk), OptionsFor(record, layout_));
  if (!vm.ok()) {
    restore.SetError(std::string(vm.status().message()));
    // Put the disk and memory back so that the snapshot can be tried again (if the guest ran at
    // all, they no longer match and verification will refuse it).
    if ((files.memory_own && rename(live_memory_path.c_str(), memory_path.c_str()) != 0) ||
        rename(live_path.c_str(), disk_path.c_str()) != 0) {
      LogIfFailed(
          store_->sessions().SetState(who, record.tenant, record.id, SessionState::kFailed,
                                      absl::StrCat("resuming failed: ", vm.status().message()), 0,
                                      "session.resume"),
          absl::StrCat("session ", record.id, ": its failure not recorded"));
    }
    return absl::Status(vm.status().code(), absl::StrCat("could not resume session ", record.id,
                                                         ": ", vm.status().message()));
  }
  counters_.restores++;
  counters_.restore_ms.Record(absl::ToDoubleMilliseconds(absl::Now() - restore_started));
  restore.End();
  // Shared sources are read again: a rotated secret takes effect (its placeholder stays).
  if (absl::Status refreshed = secrets_->Refresh(record.id, record.tenant, record.secrets);
      !refreshed.ok()) {
    LogRecord event{.unix_ms = NowMs(),
                    .stream = LogStream::kEvent,
                    .data = absl::StrCat("secrets: ", refreshed.message())};
    LogIfFailed(
        store_->commands().AppendOutput(record, {event}),
        absl::StrCat("session ", record.id,
                     ": the secrets problem not logged"));  // the resume goes on without the value
  }
  SessionRecord running = record;
  running.state = SessionState::kRunning;
  running.reason.clear();
  running.pid = vm->vm->pid();
  absl::StatusOr<std::shared_ptr<LiveSession>> made = MakeLive(running, *std::move(vm), *image);
  if (!made.ok()) return made.status();
  std::shared_ptr<LiveSession> live = *std::move(made);
  if (absl::Status st = admitted->SettleWith(adding,
                                             [&] {
                                               return store_->sessions().SetState(
                                                   who, record.tenant, record.id,
                                                   SessionState::kRunning, "", live->record.pid,
                                                   "session.resume");
                                             });
      !st.ok()) {
    return st;
  }
  LogIfFailed(RemoveTree(dir),
              absl::StrCat("session ", record.id, ": its used snapshot not removed"));
  {
    absl::MutexLock lock(&mu_);

    live_[record.id] = live;
  }
  return live;
}

absl::StatusOr<std::vector<SessionRecord>> SessionManager::Fork(const Principal& who,
                                                                const std::string& id,
                                                                uint32_t count) {
  if (draining()) return DrainingRefusal("fork sessions");
  if (count == 0) count = 1;
  if (count > kMaxForks) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxForks, " forks at once"));
  }
  if (uint64_t most = quotas_.For(who.Tenant()).forks_per_call; count > most) {
    absl::Status over = absl::ResourceExhaustedError(
        absl::StrCat("over the forks quota of ", most, " per call: asked for ", count));
    LogIfFailed(store_->audit().Audit(who, who.Tenant(), "quota.refuse", "session.fork " + id,
                                      std::string(over.message())),
                "quota refusal not audited");  // the refusal stands either way
    return over;
  }
  std::shared_ptr<absl::Mutex> session_lock = SessionLock(id);
  absl::MutexLock guard(session_lock.get());
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(who.Tenant(), id);
  if (!record.ok()) return record.status();
  if (record->state == SessionState::kPaused) {
    std::string dir = layout_.Snapshot(id);
    // Its read-write volumes are frozen (clean) and nobody else writes them.
    std::vector<UniqueFd> volumes;
    std::vector<int> volume_disks;
    for (const VolumeAttachment& v : record->volumes) {
      volumes.emplace_back(
          v.read_only ? -1 : open(layout_.Volume(v.volume_id).c_str(), O_RDONLY | O_CLOEXEC));
      if (!v.read_only && !volumes.back().valid()) return ErrnoStatus("open volume", v.name);
      volume_disks.push_back(volumes.back().get());
    }
    return ForkFrom(who, *record, dir, count, volume_disks);
  }
  std::shared_ptr<LiveSession> live = FindLive(who.Tenant(), id);
  if (!live) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", id, " is ", SessionStateName(record->state),
                     "; only a running or paused session can be forked"));
  }
  if (absl::Status s = GiveWay(*live, "fork", kJustEndedGrace); !s.ok()) return s;
  absl::StatusOr<ImageInfo> image =
      images_.Operators().ResolveDigest(record->image, record->image_digest);
  if (!image.ok()) return image.status();
  // Snapshot the running session with a copy of its disk, then let it go on. The snapshot is
  // held in memory and unnamed files, only while its forks are made.
  SnapshotManifest manifest = DescribeVm(paths_, id, record->image_digest, record->limits.vcpus,
                                         record->limits.memory_bytes, *live->vm);
  // The helper that sets the RAM apart for the forks (one waits when forks of this kind came
  // lately; else it starts while the snapshot is taken).
  struct stat disk;
  if (fstat(live->disk.get(), &disk) != 0) return ErrnoStatus("stat the session disk");
  ForkHelperKind kind{.image = *image,
                      .memory_bytes = manifest.memory_bytes,
                      .vcpus = record->limits.vcpus,
                      .disk_bytes = disk.st_size};
  absl::StatusOr<ForkHelper> helper = absl::UnknownError("not started");
  // Not for a VM that writes its RAM into a file (a resumed session): TakeForkSnapshot copies
  // that file, apart already.
  bool needs_helper = live->vm->shared_memory_fd() < 0;
  std::thread helper_thread;
  if (needs_helper) helper_thread = std::thread([&] { helper = fork_helpers_->Take(kind); });
  absl::StatusOr<SnapshotFiles> taken =
      TakeForkSnapshot(*live->vm, live->disk.get(), paths_.scratch);
  // Its read-write volumes are copied as they are now, frozen (clean) with the guest stopped.
  std::vector<UniqueFd> volumes;
  std::vector<int> volume_disks;
  for (const VolumeAttachment& v : record->volumes) {
    if (!taken.ok()) break;
    if (v.read_only) {
      volumes.emplace_back();
    } else {
      UniqueFd from(open(layout_.Volume(v.volume_id).c_str(), O_RDONLY | O_CLOEXEC));
      absl::StatusOr<UniqueFd> copy = UnnamedFile(layout_.volumes());
      if (!from.valid()) {
        taken = ErrnoStatus("open volume", v.name);
      } else if (!copy.ok()) {
        taken = copy.status();
      } else if (absl::Status c = CopyDisk(from.get(), copy->get()); !c.ok()) {
        taken = c;
      } else {
        volumes.push_back(*std::move(copy));
      }
    }
    volume_disks.push_back(volumes.empty() ? -1 : volumes.back().get());
  }
  absl::Status resumed = live->vm->Continue(absl::Now() + absl::Seconds(10));
  if (!resumed.ok() && !WaitsForDiskSpace(*live)) {
    Retire(id, SessionState::kFailed,
           absl::StrCat("the VM could not go on after a snapshot for a fork: ",
                        WhyVmFailed(*live, resumed)));
  }
  if (helper_thread.joinable()) helper_thread.join();
  if (!taken.ok()) {
    return absl::Status(taken.status().code(),
                        absl::StrCat("could not snapshot session ", id, ": ",
                                     taken.status().message(), DiskSpaceHint()));
  }
  counters_.snapshots++;
  struct stat state;
  if (fstat(taken->state.get(), &state) == 0) counters_.snapshot_bytes += state.st_size;
  // The forks then map one copy of the RAM and share the pages they do not write (else each
  // copies the RAM from the state).
  if (needs_helper) {
    LogMemoryApart(*record,
                   helper.ok() ? SetForkMemoryApart(*std::move(helper), &*taken) : helper.status());
  }
  absl::StatusOr<std::vector<SessionRecord>> forks =
      ForkFromFiles(who, *record, *image, *taken, manifest, count, volume_disks);
  if (needs_helper) fork_helpers_->Done(kind);
  return forks;
}

absl::StatusOr<std::vector<SessionRecord>> SessionManager::ForkFrom(
    const Principal& who, const SessionRecord& source, const std::string& dir, uint32_t count,
    const std::vector<int>& volume_disks) {
  SnapshotFiles files;
  absl::StatusOr<SnapshotManifest> manifest = OpenSnapshot(dir, key_, &files);
  if (!manifest.ok()) return manifest.status();
  absl::StatusOr<ImageInfo> image =
      images_.Operators().ResolveDigest(source.image, source.image_digest);
  if (!image.ok()) return image.status();
  return ForkFromFiles(who, source, *image, files, *manifest, count, volume_disks);
}

absl::StatusOr<std::vector<SessionRecord>> SessionManager::ForkFromFiles(
    const Principal& who, const SessionRecord& source, const ImageInfo& image,
    const SnapshotFiles& files, const SnapshotManifest& manifest, uint32_t count,
    const std::vector<int>& volume_disks) {
  const UniqueFd& from = files.disk;
  QuotaAmounts each = NewSession(source.limits), all;
  each.disk_bytes += volumes_.ReadWriteBytes(source);  // each fork's copies of them
  for (uint32_t i = 0; i < count; ++i) {
    all.sessions += each.sessions;
    all.running += each.running;
    all.vcpus += each.vcpus;
    all.memory_bytes += each.memory_bytes;
    all.disk_bytes += each.disk_bytes;
  }
  // Held until every fork's record exists (as creating, which counts as running).
  absl::StatusOr<QuotaReservations::Hold> admitted =
      quotas_.Admit(who, who.Tenant(), all, "session.fork " + source.id);
  if (!admitted.ok()) {
    return absl::Status(admitted.status().code(),
                        absl::StrCat("cannot make ", count, " forks of ", source.id, ": ",
                                     admitted.status().message()));
  }
  std::vector<SessionRecord> made;
  std::vector<std::string> made_volumes;
  auto undo = [&](const absl::Status& why) {
    for (const SessionRecord& s : made)
      LogIfFailed(Remove(who, s.id, "its fork failed"),
                  absl::StrCat("fork ", s.id, " not removed after a sibling failed"));
    for (const std::string& name : made_volumes) {
      LogIfFailed(volumes_.Remove(who, name),
                  absl::StrCat("volume ", name, " of a failed fork not removed"));
    }
    return absl::Status(why.code(),
                        absl::StrCat("could not fork session ", source.id, ": ", why.message()));
  };
  // Records and disk copies first (cheap), then the restores in parallel: they spend most of
  // their time starting QEMU and waiting for the guest.
  std::vector<SessionRecord> records;
  std::vector<absl::StatusOr<UniqueFd>> disks;
  for (uint32_t i = 0; i < count; ++i) {
    SessionRecord s = source;
    s.id = RandomHex(6);
    if (s.id.empty()) return undo(absl::InternalError("getrandom failed"));
    s.hostname = "airlock-" + s.id.substr(0, 8);
    s.state = SessionState::kCreating;
    s.reason.clear();
    s.pid = 0;
    s.created_ms = s.last_used_ms = NowMs();
    absl::StatusOr<std::vector<VolumeAttachment>> volumes =
        volumes_.CopyForFork(who, source, volume_disks, s.id, &made_volumes);
    if (!volumes.ok()) return undo(volumes.status());
    s.volumes = *std::move(volumes);
    if (absl::Status st =
            admitted->SettleWith(each, [&] { return store_->sessions().Create(who, s); });
        !st.ok()) {
      return undo(st);
    }
    records.push_back(s);
    made.push_back(s);
    if (s.workspace.present()) {
      // The base is read-only: every fork shares the parent's image (and copies its manifest).
      if (absl::Status st = MakeDirectories(layout_.Dir(s.id), 0700); !st.ok()) return undo(st);
      for (auto file : {&SessionLayout::WorkspaceImage, &SessionLayout::WorkspaceManifest}) {
        std::string from = (layout_.*file)(source.id), to = (layout_.*file)(s.id);
        if (link(from.c_str(), to.c_str()) != 0) return undo(ErrnoStatus("link", to));
      }
    }
    if (!s.secrets.empty()) {
      // The fork's guest trusts its parent's CA and holds its placeholders.
      secrets_->CopyValues(source.id, s.id);
      if (absl::Status st = SessionSecrets::CopyCa(layout_.Dir(source.id), layout_.Dir(s.id));
          !st.ok()) {
        return undo(st);
      }
    }
    absl::StatusOr<UniqueFd> disk = UnnamedFile(paths_.scratch);
    if (disk.ok()) {
      if (absl::Status c = CopyDisk(from.get(), disk->get()); !c.ok()) disk = c;
    }
    disks.push_back(std::move(disk));
  }
  std::vector<absl::StatusOr<LaunchedVm>> vms;
  for (uint32_t i = 0; i < count; ++i) vms.emplace_back(absl::UnknownError("not started"));
  {
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < count; ++i) {
      threads.emplace_back([&, i] {
        if (!disks[i].ok()) {
          vms[i] = disks[i].status();
          return;
        }
        absl::StatusOr<VmDriver*> driver = hosts_->Place(PlacementOf(records[i].limits));
        if (!driver.ok()) {
          vms[i] = driver.status();
          return;
        }
        vms[i] = RestoreVm(**driver, paths_, image, files, manifest, *std::move(disks[i]),
                           OptionsFor(records[i], layout_));
      });
    }
    for (std::thread& t : threads) t.join();
  }
  absl::Status first_error;
  for (uint32_t i = 0; i < count; ++i) {
    SessionRecord& s = records[i];
    if (!vms[i].ok()) {
      LogIfFailed(
          store_->sessions().SetState(who, s.tenant, s.id, SessionState::kFailed,
                                      std::string(vms[i].status().message()), 0, "session.fork"),
          absl::StrCat("fork ", s.id, ": its failure not recorded"));
      if (first_error.ok()) first_error = vms[i].status();
      continue;
    }
    counters_.restores++;
    s.state = SessionState::kRunning;
    s.pid = vms[i]->vm->pid();
    absl::StatusOr<std::shared_ptr<LiveSession>> made = MakeLive(s, *std::move(vms[i]), image);
    if (!made.ok()) {
      LogIfFailed(
          store_->sessions().SetState(who, s.tenant, s.id, SessionState::kFailed,
                                      std::string(made.status().message()), 0, "session.fork"),
          absl::StrCat("fork ", s.id, ": its failure not recorded"));
      if (first_error.ok()) first_error = made.status();
      continue;
    }
    std::shared_ptr<LiveSession> live = *std::move(made);
    {
      absl::MutexLock lock(&mu_);
      live_[s.id] = std::move(live);
    }
    absl::Status st =
        store_->sessions().SetState(who, s.tenant, s.id, SessionState::kRunning, "", s.pid,
                                    absl::StrCat("session.fork from ", source.id));
    if (!st.ok() && first_error.ok()) first_error = st;
  }
  if (!first_error.ok()) return undo(first_error);
  made = records;
  return made;
}

}  // namespace airlock
