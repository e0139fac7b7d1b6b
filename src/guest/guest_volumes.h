// Volumes inside the guest: named disks of the tenant's (serial "airlock-vol<slot>", see
// src/vm/qemu_driver.cc) that kSync asks the agent to mount where the session wants them. Every
// VM has kVolumeSlots such disks, each an empty placeholder unless the session attached a volume
// there, so that a template serves sessions with and without volumes.
//
// A read-write volume is frozen (FIFREEZE) while its session is paused or being removed: its
// disk then holds a clean filesystem (journal flushed, nothing to recover), which the next
// session that attaches it, read-only or not, can mount as it is.
#ifndef AIRLOCK_GUEST_GUEST_VOLUMES_H_
#define AIRLOCK_GUEST_GUEST_VOLUMES_H_

#include <string>
#include <vector>

#include "src/common/channel_messages.h"

namespace airlock::guest {

// PID 1, when kSync asks: mounts each volume whose slot is not mounted yet (a restored or
// forked guest keeps its mounts). Returns "" or what failed.
std::string MountVolumes(const std::vector<VolumeMount>& volumes);

// PID 1, on kPause: freezes the read-write volumes it mounted, so that their disks hold clean
// filesystems while the guest is stopped.
void FreezeVolumes();

// PID 1, on kSync: thaws what FreezeVolumes froze.
void ThawVolumes();

// `/proc/1/exe volume-freeze PATH...`: freezes the filesystems mounted at those paths (the host
// runs it before it ends a running session's VM for good). Returns the exit status.
int VolumeFreezeMain(int argc, char** argv);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_GUEST_VOLUMES_H_
