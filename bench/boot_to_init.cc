// The baseline for bench/run_bench.sh: a /init that ends the VM the moment the kernel starts
// it, so timing a bare QEMU run of it measures boot to /init. The microvm machine has no ACPI to
// power off with, so it reboots, which QEMU's -no-reboot turns into an exit.
#include <sys/reboot.h>
#include <unistd.h>

int main() {
  reboot(RB_AUTOBOOT);
  return 0;
}
