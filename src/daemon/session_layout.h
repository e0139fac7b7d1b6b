// Where airlockd keeps each session's files under $AIRLOCK_HOME: the one place that knows their
// names. Everything else asks it for a path.
//
//   sessions/<id>/                  the session's directory (0700), removed with the session
//   sessions/<id>/vm                a running session's VM: its sockets and record, so that it
//                                   outlives airlockd (see QemuDriver)
//   sessions/<id>/one-shot          marks a session made for one call (`airlock run`)
//   sessions/<id>/snapshot/         a paused session (src/vm/snapshot.h)
//   sessions/<id>/disk.ext4         a resumed session's writable disk (the snapshot's, moved out;
//                                   a new session's disk is unnamed and goes with its VM)
//   sessions/<id>/workspace.ext4    the captured project (read-only in the guest) and
//   sessions/<id>/workspace.manifest  its base manifest (a serialized v1::WorkspaceInfo)
//   sessions/<id>/ca.key, ca.pem    the CA of a session with secrets (SessionSecrets, 0600)
//   volumes/<id>.ext4               a volume's disk (0600; src/daemon/volumes.h), outliving
//                                   the sessions that attach it
//   apart/<id>/                     a paused session's snapshot while its RAM is set apart
//
// apart/ holds only work in progress: what a daemon that died left there is deleted (and
// forks/, which older daemons used). A running session's fork snapshot is never on disk.
// A plain value; thread-safe.
#ifndef AIRLOCK_DAEMON_SESSION_LAYOUT_H_
#define AIRLOCK_DAEMON_SESSION_LAYOUT_H_

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace airlock {

class SessionLayout {
 public:
  explicit SessionLayout(std::string home) : home_(std::move(home)) {}

  // The directory of every session's directory.
  std::string sessions() const { return home_ + "/sessions"; }
  std::string Dir(const std::string& id) const { return absl::StrCat(home_, "/sessions/", id); }
  std::string VmRuntime(const std::string& id) const { return File(id, kVmRuntime); }
  std::string OneShotMarker(const std::string& id) const { return File(id, "one-shot"); }
  // Present while the session's snapshot here is newer than the one its fleet has published.
  std::string UnpublishedMarker(const std::string& id) const { return File(id, "unpublished"); }
  std::string Snapshot(const std::string& id) const { return File(id, "snapshot"); }
  std::string LiveDisk(const std::string& id) const { return File(id, "disk.ext4"); }
  // A resumed session's RAM, which its VM writes into (its snapshot's memory file until then).
  std::string LiveMemory(const std::string& id) const { return File(id, "memory"); }
  std::string WorkspaceImage(const std::string& id) const { return File(id, "workspace.ext4"); }
  std::string WorkspaceManifest(const std::string& id) const {
    return File(id, "workspace.manifest");
  }
  // Volumes' disks (not a session's: they outlive sessions).
  std::string volumes() const { return home_ + "/volumes"; }
  std::string Volume(const std::string& id) const {
    return absl::StrCat(home_, "/volumes/", id, ".ext4");
  }
  // Whether a name in a session's directory is its VM's runtime directory.
  static bool IsVmRuntime(const std::string& name) { return name == kVmRuntime; }

  // Work in progress, deleted when a daemon starts (see above).
  // (Forks' snapshots of running sessions were kept here before they moved to memory: an
  // older airlockd's may be left.)
  std::string forks() const { return home_ + "/forks"; }
  std::string apart() const { return home_ + "/apart"; }
  std::string Apart(const std::string& id) const { return absl::StrCat(home_, "/apart/", id); }

 private:
  static constexpr char kVmRuntime[] = "vm";
  std::string File(const std::string& id, const std::string& name) const {
    return absl::StrCat(home_, "/sessions/", id, "/", name);
  }

  std::string home_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_SESSION_LAYOUT_H_
