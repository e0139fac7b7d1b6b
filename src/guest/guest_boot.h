// Guest boot: turns the initramfs the kernel started us in into the session's root.
//
// Mounts /proc, /sys and /dev, finds the image disk and the writable session disk by their
// virtio serial numbers, assembles the root as overlayfs (read-only image below, session disk
// above), switches into it, mounts the pseudo filesystems there, sets the hostname and brings
// up loopback. Runs once, single-threaded, as PID 1.
#ifndef AIRLOCK_GUEST_GUEST_BOOT_H_
#define AIRLOCK_GUEST_GUEST_BOOT_H_

#include <string>

namespace airlock::guest {

// Serial numbers the host gives the two virtio-blk disks (see src/vm/qemu_driver.cc).
inline constexpr char kImageDiskSerial[] = "airlock-image";
inline constexpr char kSessionDiskSerial[] = "airlock-rw";
// Name of the virtio-serial port that carries the channel.
inline constexpr char kChannelPortName[] = "airlock.0";

// Returns an empty string on success, otherwise what failed (errno text included).
std::string BootRoot();

// A descriptor of the session disk's own root (outside the overlay; the workspace keeps its
// upper layer there), open from BootRoot on; -1 before.
int SessionDiskRoot();

// Finds /dev/vdX whose virtio serial is `serial`; "" if there is none.
std::string FindDiskBySerial(const std::string& serial);

// Writes a line to the console (stdout of PID 1).
void ConsoleLog(const std::string& line);

// Opens the channel port (/dev/vportNpM whose name is kChannelPortName). -1 if absent.
int OpenChannelPort();

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_GUEST_BOOT_H_
