#!/usr/bin/env bash
# Snapshots against their targets (ARCHITECTURE.md, "Performance targets") and their baselines, all
# measured in this run: bare QEMU start-up (the floor for a restore), a cold boot of the same VM
# (through an airlockd with --no-templates), restore (resume), `airlock run -- true` from the
# template, fork x10, pause, and host memory of paused and idle sessions.
# Usage: bench/snapshot_bench.sh [ROUNDS]   (after scripts/setup.sh; runs its own airlockd)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
. bench/private_daemon.sh
. bench/timing.sh

# The floor: QEMU with the same machine and kernel starts, answers QMP, and quits.
bare=()
for _ in $(seq "$rounds"); do
  bare+=("$(bare_qemu_ms)")
done

# Cold boot of the same VM, to the agent being ready (no template).
start_daemon cold --no-templates
cold=()
for _ in $(seq "$rounds"); do
  t0=$(now_ms); id=$($airlock session create --idle-timeout 0); t1=$(now_ms)
  cold+=($((t1 - t0))); $airlock rm "$id" >/dev/null
done

start_daemon warm --pool 0   # restores from the template (compare.sh measures the pool)
$airlock run -- true >/dev/null  # builds the template once
run=() pause=() resume=() fork=()
id=$($airlock session create --idle-timeout 0)
for _ in $(seq "$rounds"); do
  run+=("$(time_ms $airlock run -- true)")
  pause+=("$(time_ms $airlock pause "$id")")
  resume+=("$(time_ms $airlock resume "$id")")
done
$airlock exec "$id" -- true
for _ in $(seq "$rounds"); do
  t0=$(now_ms); forks=$($airlock fork "$id" -n 10); t1=$(now_ms)
  fork+=($((t1 - t0))); $airlock rm $forks >/dev/null
done

# Host memory: a paused session has no process at all; an idle running VM's QEMU resident
# memory beyond the guest RAM it has touched (the RAM mapping's own Rss in smaps).
$airlock pause "$id" >/dev/null
paused_rss=0
if $airlock ps --json | grep -q "\"$id\""; then paused_rss=unknown; fi
$airlock resume "$id" >/dev/null
sleep 2
pid=$($airlock ps | awk -v id="$id" '$1 == id {print $2}')
overhead_kib=$(awk -v ram=$((512 * 1024)) '
  /^[0-9a-f]+-[0-9a-f]+ / {mapping=1} /^Size:/ {size=$2} /^Rss:/ {rss=$2; total+=rss; if (size == ram) guest+=rss}
  END {print total - guest}' "/proc/$pid/smaps")
$airlock rm "$id" >/dev/null

m() { printf '%s\n' "$@" | median; }
cold_ms=$(m "${cold[@]}") resume_ms=$(m "${resume[@]}") bare_ms=$(m "${bare[@]}")
fork_ms=$(m "${fork[@]}") run_ms=$(m "${run[@]}") pause_ms=$(m "${pause[@]}")
row() { printf '%-44s %10s   %s\n' "$1" "$2" "$3"; }
row "measure ($accel, median of $rounds)" "measured" "target (ARCHITECTURE.md)"
row "bare QEMU start-up, QMP, quit (floor)" "$bare_ms ms" "-"
row "cold boot to ready (no template)" "$cold_ms ms" "-"
row "restore (airlock resume)" "$resume_ms ms" "<= 100 ms; <= 1/20 of cold = $((cold_ms / 20)) ms"
row "airlock run -- true (from the template)" "$run_ms ms" "<= 250 ms"
row "fork x10 of a running session" "$fork_ms ms" "<= 3 x restore = $((3 * resume_ms)) ms"
row "pause (snapshot to disk, VM gone)" "$pause_ms ms" "-"
row "paused session host RSS" "$paused_rss bytes" "0 (no process)"
row "idle VM host RSS beyond guest RAM" "$((overhead_kib / 1024)) MiB" "report vs Firecracker <= 5 MiB"
printf '%-44s %10s\n' "ratio restore / cold boot" "$(awk -v a="$resume_ms" -v b="$cold_ms" 'BEGIN {printf "%.3f", a / b}')"
printf '%-44s %10s\n' "ratio restore / bare QEMU start-up" "$(awk -v a="$resume_ms" -v b="$bare_ms" 'BEGIN {printf "%.2f", a / b}')"
