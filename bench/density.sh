#!/usr/bin/env bash
# Density: N idle running sessions of the default image (default 100) on a private airlockd,
# and what they cost the host: the VMs' proportional resident memory (PSS: pages shared with
# the template and with each other counted once), their plain RSS summed, and the drop in the
# host's MemAvailable. Target (ARCHITECTURE.md): 100 sessions within 4 GiB. Then the same
# after each session ran real work once (issue 44's workload) and idled again: what the VMs
# keep of what their guests used, and how many the host killed on the way.
# Usage: bench/density.sh [N]   (after scripts/setup.sh; as root)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-100}
. bench/private_home.sh
. bench/timing.sh

# Room for N sessions in root's quotas; no warm pool (only sessions are measured).
printf 'tenant uid:0 sessions=%d running=%d vcpus=%d memory=%dg\n' \
  $((count + 8)) $((count + 8)) $((count + 8)) $((count + 8)) > "$home/quotas"
"$PWD/build/airlockd" --socket "$AIRLOCK_SOCKET" --pool 0 --quota-file "$home/quotas" \
  2>>"$home/airlockd.log" &
echo $! > "$home/airlockd.pid"
for _ in $(seq 100); do [ -S "$AIRLOCK_SOCKET" ] && break; sleep 0.05; done

available_kib() { awk '/^MemAvailable:/ {print $2}' /proc/meminfo; }
$airlock run -- true >/dev/null   # the template exists before the baseline is taken
sync; echo 1 > /proc/sys/vm/drop_caches
before=$(available_kib)
t0=$(now_ms)
ids=()
for i in $(seq "$count"); do
  ids+=("$($airlock session create --idle-timeout 0)")
  [ $((i % 10)) = 0 ] && echo "density.sh: $i sessions" >&2
done
t1=$(now_ms)
sleep 5   # let them settle (idle)

# The VMs' summed PSS and RSS (KiB) into $pss and $rss.
measure_vms() {
  local pids pid p r
  pids=$($airlock ps --json | grep -o '"pid": [0-9]*' | awk '{print $2}')
  pss=0 rss=0
  for pid in $pids; do
    read -r p r < <(awk '/^Pss:/ {p=$2} /^Rss:/ {r=$2} END {print p, r}' "/proc/$pid/smaps_rollup")
    pss=$((pss + p)) rss=$((rss + r))
  done
}
after=$(available_kib)
measure_vms
idle_pss=$pss idle_rss=$rss idle_drop=$((before - after))

# Real work, once per session, then idle again: what a VM keeps of what its guest used. The
# workload of issue 44's reproducer (700 MiB written to the session disk, then 380 MiB of RAM
# touched), $(nproc) sessions at a time.
workload='dd if=/dev/zero of=/root/f bs=1M count=700 2>/dev/null && python3 -c "
b = bytearray(380 << 20)
for i in range(0, len(b), 4096): b[i] = 1" && rm /root/f'
t2=$(now_ms)
printf '%s\n' "${ids[@]}" | xargs -P "$(nproc)" -I{} "$airlock" exec {} -- sh -c "$workload" ||
  true  # a session the host killed is counted below
t3=$(now_ms)
sleep 5
measure_vms
worked_pss=$pss worked_rss=$rss worked_drop=$((before - $(available_kib)))
failed=$($airlock ls -a | grep -c ' failed ' || true)
daemon_rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$(cat "$home/airlockd.pid")/status")
$airlock rm "${ids[@]}" >/dev/null

mib() { echo $(($1 / 1024)); }
printf '%-52s %10s   %s\n' "measure ($count idle sessions, 512 MiB each)" "value" "target"
printf '%-52s %7s ms\n' "create all of them, one after another" "$((t1 - t0))"
printf '%-52s %6s MiB   %s\n' "idle: VMs' proportional memory (sum of PSS)" "$(mib $idle_pss)" \
  "<= 4096 MiB for 100"
printf '%-52s %6s MiB\n' "idle: per session (PSS)" "$(mib $((idle_pss / count)))"
printf '%-52s %6s MiB\n' "idle: VMs' RSS summed (shared pages counted each time)" "$(mib $idle_rss)"
printf '%-52s %6s MiB\n' "idle: host MemAvailable drop" "$(mib $idle_drop)"
printf '%-52s %7s ms\n' "after work: the workload in every session" "$((t3 - t2))"
printf '%-52s %6s\n' "after work: sessions the host killed" "$failed"
printf '%-52s %6s MiB\n' "after work: VMs' proportional memory (sum of PSS)" "$(mib $worked_pss)"
printf '%-52s %6s MiB\n' "after work: per session (PSS)" "$(mib $((worked_pss / count)))"
printf '%-52s %6s MiB\n' "after work: host MemAvailable drop" "$(mib $worked_drop)"
printf '%-52s %6s MiB\n' "airlockd's own RSS" "$(mib "$daemon_rss")"
