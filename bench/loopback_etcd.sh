# Sourced by the fleet benchmarks after bench/private_daemon.sh: an etcd of the run's own on
# loopback ($etcd_url, from port $etcd_port; its data under $work), stopped on exit with every
# process in $bench_pids; `fleet_host NAME [FLAGS...]` starts a host of the fleet (blob store
# $work/blobs) on a home of its own, and `on NAME ARGS...` runs airlock against it.
command -v etcd >/dev/null || { echo "$0: needs etcd (apt-get install etcd-server)" >&2; exit 1; }
etcd_port=$((20000 + RANDOM % 20000))
etcd_url=http://127.0.0.1:$etcd_port
etcd --name bench --data-dir "$work/etcd" --listen-client-urls "$etcd_url" \
  --advertise-client-urls "$etcd_url" --listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
  --initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
  --initial-cluster "bench=http://127.0.0.1:$((etcd_port + 1))" >"$work/etcd.log" 2>&1 &
bench_pids=($!)
trap 'kill "${bench_pids[@]}" 2>/dev/null; cleanup' EXIT
for _ in $(seq 100); do curl -sf "$etcd_url/health" >/dev/null && break; sleep 0.1; done

fleet_host() {
  local home=$work/$1
  mkdir -p "$home/kernel"
  ln -sfn "$images" "$home/images"
  ln -sf "$kernel" "$home/kernel/vmlinux"
  # Hosts of a fleet share the key their records are signed with: the first host's.
  [ ! -e "$work/host.key" ] || cp "$work/host.key" "$home/host.key"
  AIRLOCK_HOME=$home "$root/build/airlockd" --socket "$home/airlockd.sock" --pool 0 --http-listen off \
    --blob-store "file://$work/blobs" --etcd "$etcd_url" --host-id "$1" "${@:2}" \
    2>>"$work/airlockd-$1.log" &
  bench_pids+=($!)
  for _ in $(seq 200); do [ -S "$home/airlockd.sock" ] && break; sleep 0.05; done
  [ -e "$work/host.key" ] || cp "$home/host.key" "$work/host.key"
}
on() { AIRLOCK_HOME=$work/$1 AIRLOCK_SOCKET=$work/$1/airlockd.sock "$airlock" "${@:2}"; }
