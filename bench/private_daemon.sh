# Sourced by the benchmarks that compare airlockd configurations: private homes under $work
# that share the host's image store and kernel, `start_daemon NAME [AIRLOCKD FLAGS...]` (stops
# the previous one, starts airlockd on NAME's home and exports AIRLOCK_HOME and AIRLOCK_SOCKET),
# an EXIT trap that stops it and removes $work, the host's accelerator ($accel), and
# `bare_qemu_ms` (the floor for any VM start). Source bench/timing.sh too.
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
# Milliseconds for QEMU with the VMs' machine and kernel to start, answer QMP and quit.
bare_qemu_ms() {
  time_ms sh -c 'printf "%s\n" "{\"execute\":\"qmp_capabilities\"}" "{\"execute\":\"quit\"}" |
    qemu-system-x86_64 -M microvm,acpi=off,x-option-roms=off,rtc=off '"${accel_args[*]}"' -m 512M \
      -nodefaults -no-user-config -display none -S -kernel '"$kernel"' -qmp stdio'
}
