#!/usr/bin/env bash
# Session benchmarks against baselines measured in the same run, on a private airlockd:
#   exec round trip of `true` (CLI -> daemon -> guest -> back) vs the guest's own fork/exec of true
#   stdout throughput guest -> client
#   `airlock ls` with 100 sessions recorded
# Usage: bench/session_bench.sh [ROUNDS]   (after scripts/setup.sh; as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-20}
. bench/private_home.sh

. bench/timing.sh

id=$($airlock session create)
$airlock exec "$id" -- true   # warm the path once
rtts=()
for _ in $(seq "$rounds"); do
  t0=$(now_ms); $airlock exec "$id" -- true; t1=$(now_ms); rtts+=($((t1 - t0)))
done
rtt=$(printf '%s\n' "${rtts[@]}" | median)
guest=$($airlock exec "$id" -- python3 -c "
import subprocess, time
runs = []
for _ in range($rounds):
    t = time.monotonic(); subprocess.run(['true']); runs.append((time.monotonic() - t) * 1000)
print(round(sorted(runs)[len(runs) // 2]))")

bytes=$((256 * 1024 * 1024))
t0=$(now_ms); $airlock exec "$id" -- head -c $bytes /dev/zero | wc -c >/dev/null; t1=$(now_ms)
mbps=$(awk -v b=$bytes -v ms=$((t1 - t0)) 'BEGIN {printf "%.0f", b / 1e6 / (ms / 1000)}')
$airlock rm "$id" >/dev/null

# 100 sessions on record (stopped ones cost no VM; ls reads the same rows either way).
kill "$(cat "$home/airlockd.pid")"; sleep 1
sqlite3 "$home/state.db" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100)
  INSERT INTO sessions(id, tenant, image, image_digest, state, reason, created_ms, last_used_ms,
    vcpus, memory_bytes, pids, disk_bytes, ttl_seconds, hostname)
  SELECT printf('bench%07d', i), 'uid:0', 'airlock/bookworm-python', 'sha256:0', 3, 'bench', 0, 0,
    1, 536870912, 1024, 1073741824, 0, 'bench' FROM n;"
$airlock ls >/dev/null   # restarts the daemon
ls_times=()
for _ in $(seq "$rounds"); do
  t0=$(now_ms); $airlock ls -a >/dev/null; t1=$(now_ms); ls_times+=($((t1 - t0)))
done
ls_ms=$(printf '%s\n' "${ls_times[@]}" | median)
count=$($airlock ls -a -q | wc -l)

printf '%-52s %10s  %s\n' "measure (median of $rounds)" "value" "target"
printf '%-52s %8s ms\n' "airlock exec ID -- true, end to end" "$rtt"
printf '%-52s %8s ms\n' "the guest's own fork/exec of true (baseline)" "$guest"
printf '%-52s %8s ms  <= 20 ms\n' "exec round trip above the guest's own cost" "$((rtt - guest))"
printf '%-52s %6s MB/s  >= 50 MB/s\n' "stdout throughput guest -> client (256 MiB)" "$mbps"
printf '%-52s %8s ms  <= 50 ms\n' "airlock ls -a with $count sessions" "$ls_ms"
