#!/usr/bin/env bash
# Cold `airlock run -- true` end to end against its floor: the same kernel booted by bare QEMU
# to /init (which powers off at once), on the same accelerator. Prints medians and the ratio.
# Usage: bench/run_bench.sh [ROUNDS]   (after scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
kernel=${AIRLOCK_KERNEL:-/var/lib/airlock/kernel/vmlinux}
airlock=build/airlock
accel=$($airlock doctor | sed -n 's/^accelerator: \([a-z]*\).*/\1/p')
if [ "$accel" = kvm ]; then accel_args=(-accel kvm -cpu host); else accel_args=(-accel tcg,tb-size=256 -cpu max); fi

. bench/timing.sh
ninja --quiet -C build bench-initramfs

run_times=() boot_times=()
for _ in $(seq "$rounds"); do
  t0=$(now_ms); $airlock run -- true; t1=$(now_ms); run_times+=($((t1 - t0)))
  t0=$(now_ms)
  qemu-system-x86_64 -M microvm,acpi=off,x-option-roms=off,rtc=off "${accel_args[@]}" -m 512M \
    -nodefaults -no-user-config -nographic -no-reboot -kernel "$kernel" \
    -initrd build/bench-initramfs.cpio -append "console=ttyS0 quiet panic=-1 reboot=t" >/dev/null
  t1=$(now_ms); boot_times+=($((t1 - t0)))
done
run=$(printf '%s\n' "${run_times[@]}" | median)
boot=$(printf '%s\n' "${boot_times[@]}" | median)
printf '%-46s %8s\n' "measure ($accel, median of $rounds)" "ms"
printf '%-46s %8d\n' "airlock run -- true (cold boot, end to end)" "$run"
printf '%-46s %8d\n' "bare QEMU boot to /init and power-off" "$boot"
printf '%-46s %8s\n' "ratio run / bare boot" "$(awk -v a="$run" -v b="$boot" 'BEGIN {printf "%.2f", a / b}')"
