# Sourced by the benchmarks: a private airlockd home ($home, exported as AIRLOCK_HOME) that
# shares the host's image store and kernel, and an EXIT trap that stops its airlockd and removes
# it. A script that starts more (servers) redefines cleanup_extra.
airlock=$PWD/build/airlock
home=$(mktemp -d /tmp/airlock-bench-XXXXXX)
chmod 755 "$home"
ln -s /var/lib/airlock/images "$home/images"
mkdir "$home/kernel" && ln -s "$(readlink -f /var/lib/airlock/kernel/vmlinux)" "$home/kernel/vmlinux"
export AIRLOCK_HOME=$home AIRLOCK_SOCKET=$home/airlockd.sock
cleanup_extra() { :; }
cleanup() {
  cleanup_extra
  [ -f "$home/airlockd.pid" ] && kill "$(cat "$home/airlockd.pid")" 2>/dev/null || true
  sleep 1; rm -rf "$home"
}
trap cleanup EXIT
