# Sourced by the fleet benchmarks after bench/private_daemon.sh: an etcd of the run's own on
# loopback ($etcd_url, from port $etcd_port; its data under $work), stopped on exit with every
# process in $bench_pids.
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
