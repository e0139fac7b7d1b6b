# Sourced by the benchmarks that compare airlockd configurations: private homes under $work
# that share the host's image store and kernel, `start_daemon NAME [AIRLOCKD FLAGS...]` (stops
# the previous one, starts airlockd on NAME's home and exports AIRLOCK_HOME and AIRLOCK_SOCKET),
# and an EXIT trap that stops it and removes $work.
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
