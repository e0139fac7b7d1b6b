#!/usr/bin/env bash
# Volume benchmarks against baselines measured in the same run, on a private airlockd:
#   sequential write (fsynced) and read (cold cache) MB/s in one session: on a volume against
#   the session's own disk
#   `session create` with a volume attached against one without (a session with volumes is
#   restored from the template, never taken from the warm pool, which the baseline may use:
#   the ratio is what a user sees)
#   `volume import` of a directory, and `volume export`
# Usage: bench/volume_bench.sh [ROUNDS] [MB]   (after scripts/setup.sh; as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
mb=${2:-256}
. bench/private_home.sh
. bench/timing.sh

$airlock volume create bench --size $((mb * 2))m >/dev/null
$airlock rm "$($airlock session create)" >/dev/null   # the template, made once
plain=(); with=()
for _ in $(seq "$rounds"); do
  t0=$(now_ms); id=$($airlock session create); t1=$(now_ms); plain+=($((t1 - t0)))
  $airlock rm "$id" >/dev/null
  t0=$(now_ms); id=$($airlock session create --volume bench:/data); t1=$(now_ms); with+=($((t1 - t0)))
  $airlock rm "$id" >/dev/null
done

# MB/s as dd reports it (its last line: "... copied, 1.2 s, 215 MB/s").
rate() { sed -n 's/.*, \([0-9.]*\) \([kMG]\)B\/s$/\1 \2/p' | awk '{r=$1; if ($2=="k") r/=1000; if ($2=="G") r*=1000; print r}'; }
id=$($airlock session create --volume bench:/data --disk $((mb * 2))m)
vw=(); vr=(); dw=(); dr=()
for _ in $(seq "$rounds"); do
  for where in /data /root; do
    w=$($airlock exec "$id" -- sh -c "dd if=/dev/zero of=$where/f bs=1M count=$mb conv=fsync 2>&1 >/dev/null | tail -1" | rate)
    r=$($airlock exec "$id" -- sh -c "sync; echo 3 > /proc/sys/vm/drop_caches; dd if=$where/f of=/dev/null bs=1M 2>&1 | tail -1" | rate)
    $airlock exec "$id" -- rm -f "$where/f"
    if [ "$where" = /data ]; then vw+=("$w"); vr+=("$r"); else dw+=("$w"); dr+=("$r"); fi
  done
done
$airlock rm "$id" >/dev/null

# A directory of 50 MB in 2000 files, imported and exported.
src=$home/src; mkdir "$src"
python3 - "$src" <<'PY'
import os, sys
for d in range(20):
    os.makedirs(f"{sys.argv[1]}/d{d:02}")
    for f in range(100):
        with open(f"{sys.argv[1]}/d{d:02}/f{f:03}", "wb") as out:
            out.write(os.urandom(25 * 1024))
PY
t0=$(now_ms); $airlock volume import bench "$src" >/dev/null; t1=$(now_ms); import_ms=$((t1 - t0))
t0=$(now_ms); $airlock volume export bench "$home/out.tar"; t1=$(now_ms); export_ms=$((t1 - t0))

printf '%-60s %10s %10s %7s\n' "measure (median of $rounds)" "volume" "baseline" "ratio"
printf '%-60s %10s %10s %7s\n' "sequential write, ${mb} MB fsynced (MB/s; baseline: session disk)" \
  "$(med "${vw[@]}")" "$(med "${dw[@]}")" "$(ratio "$(med "${vw[@]}")" "$(med "${dw[@]}")")"
printf '%-60s %10s %10s %7s\n' "sequential read, cold cache (MB/s)" \
  "$(med "${vr[@]}")" "$(med "${dr[@]}")" "$(ratio "$(med "${vr[@]}")" "$(med "${dr[@]}")")"
printf '%-60s %10s %10s %7s\n' "session create (ms; baseline: without a volume)" \
  "$(med "${with[@]}")" "$(med "${plain[@]}")" "$(ratio "$(med "${with[@]}")" "$(med "${plain[@]}")")"
printf '%-60s %10s\n' "volume import of 50 MB in 2000 files (ms)" "$import_ms"
printf '%-60s %10s\n' "volume export of it (ms)" "$export_ms"
