// The baseline for bench/run_bench.sh: a /init that powers the VM off the moment the kernel
// starts it, so timing a bare QEMU run of it measures boot to /init (plus the power-off).
#include <sys/reboot.h>
#include <unistd.h>

int main() {
  reboot(RB_POWER_OFF);
  return 0;
}
