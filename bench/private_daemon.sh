# Sourced by the benchmarks that compare airlockd configurations: private homes under $work
# that share the host's image store and kernel, `start_daemon NAME [AIRLOCKD FLAGS...]` (stops
# the previous one, starts airlockd on NAME's home and exports AIRLOCK_HOME and AIRLOCK_SOCKET),
# an EXIT trap that stops it and removes $work, the host's accelerator ($accel), and
# `bare_qemu_ms` (the floor for any VM start) and the other floors of bare QEMU. Source
# bench/timing.sh too.
root=$PWD
airlock=$root/build/airlock
kernel=$(readlink -f "${AIRLOCK_KERNEL:-/var/lib/airlock/kernel/vmlinux}")
images=${AIRLOCK_HOME:-/var/lib/airlock}/images
work=$(mktemp -d /tmp/airlock-bench-XXXXXX)
chmod 755 "$work"  # QEMU runs unprivileged and must reach the image
daemon_pid=
start_daemon() {
  [ -n "$daemon_pid" ] && { kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true; }
  local home=$work/$1; shift
  mkdir -p "$home/kernel"
  [ -e "$home/images" ] || ln -s "$images" "$home/images"
  ln -sf "$kernel" "$home/kernel/vmlinux"
  export AIRLOCK_HOME=$home AIRLOCK_SOCKET=$home/airlockd.sock
  "$root/build/airlockd" --socket "$AIRLOCK_SOCKET" "$@" 2>>"$work/airlockd.log" &
  daemon_pid=$!
  for _ in $(seq 100); do [ -S "$AIRLOCK_SOCKET" ] && break; sleep 0.05; done
}
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

accel=$($airlock doctor | sed -n 's/^accelerator: \([a-z]*\).*/\1/p')
if [ "$accel" = kvm ]; then accel_args=(-accel kvm -cpu host); else accel_args=(-accel tcg,tb-size=256 -cpu max); fi
bare_qemu_args=(qemu-system-x86_64 -M microvm,acpi=off,x-option-roms=off,rtc=off "${accel_args[@]}"
  -m 512M -nodefaults -no-user-config -display none -S -kernel "$kernel")
# QEMU with the VMs' machine and kernel starts, answers QMP and quits.
bare_qemu() {
  printf '%s\n' '{"execute":"qmp_capabilities"}' '{"execute":"quit"}' |
    "${bare_qemu_args[@]}" -qmp stdio >/dev/null
}
# Milliseconds for bare_qemu: the floor for any VM start.
bare_qemu_ms() { time_ms bare_qemu; }
# Milliseconds for ten bare_qemu at once: the floor for a fork of ten.
bare_qemu_x10_ms() {
  local t0 i
  t0=$(now_ms)
  for i in $(seq 10); do bare_qemu & done
  wait
  echo $(( $(now_ms) - t0 ))
}
# KiB of host memory that a bare QEMU, which never ran a guest instruction, holds beyond its
# guest RAM mapping (the same measure as the VMs' idle overhead): the floor for that overhead.
bare_qemu_overhead_kib() {
  local sock=$work/bare-qmp.sock pid kib
  "${bare_qemu_args[@]}" -qmp "unix:$sock,server=on,wait=off" 2>/dev/null &
  pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
  sleep 1
  kib=$(awk -v ram=$((512 * 1024)) '/^Size:/ {size=$2} /^Rss:/ {total+=$2; if (size == ram) guest+=$2}
    END {print total - guest}' "/proc/$pid/smaps")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -f "$sock"
  echo "$kib"
}
