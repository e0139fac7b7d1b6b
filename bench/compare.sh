#!/usr/bin/env bash
# The whole performance table (ARCHITECTURE.md, "Performance targets") in one run, each line
# beside its target and the baselines measured in this same run: a host `sh -c true`,
# bubblewrap (the process sandbox agents use instead), bare QEMU start-up (the floor for any
# VM start), a bare restore (a paused session's snapshot restored by Airlock's own launcher
# with no daemon in the path: build/airlock-bare-restore, the floor for resume and fork) and a
# cold boot of the same VM. Runs its own airlockd on a private home.
# Usage: bench/compare.sh [ROUNDS, 2 or more]   (after scripts/setup.sh; as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
# (The first round's pause is of a pooled session: the others time a resumed session's.)
[ "$rounds" -ge 2 ] || { echo "compare.sh: ROUNDS must be 2 or more" >&2; exit 1; }
command -v bwrap >/dev/null || { echo "compare.sh: needs bwrap (Debian's bubblewrap)" >&2; exit 1; }
. bench/private_daemon.sh
. bench/timing.sh
m() { printf '%s\n' "$@" | median; }
# Waits until airlockd has set the paused session's RAM apart in its snapshot (a few seconds
# after the pause; at most 60 s).
apart() {
  for _ in $(seq 600); do
    [ -e "$AIRLOCK_HOME/sessions/$1/snapshot/memory" ] && return 0
    sleep 0.1
  done
  echo "compare.sh: the snapshot of $1 kept its RAM in the state" >&2
  return 1
}
# Waits until the warm pool holds a VM (at most 60 s).
pooled() {
  for _ in $(seq 120); do
    [ "$($airlock ps --json | grep -c '"pool": true')" -ge 1 ] && return 0
    sleep 0.5
  done
  echo "compare.sh: the warm pool stayed empty" >&2
  return 1
}

cmake --build build --target airlock-bare-restore >/dev/null
bwrap_args=(bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --unshare-all --die-with-parent)

# Baselines.
host_sh=() bw_true=() bw_py=() bare=() cli=()
for _ in $(seq "$rounds"); do
  host_sh+=("$(time_ms sh -c true)")
  bw_true+=("$(time_ms "${bwrap_args[@]}" true)")
  bw_py+=("$(time_ms "${bwrap_args[@]}" python3 -c pass)")
  cli+=("$(time_ms "$airlock" --version)")
  bare+=("$(bare_qemu_ms)")
done
bare_x10=()
for _ in $(seq "$rounds"); do bare_x10+=("$(bare_qemu_x10_ms)"); done
bare_kib=$(bare_qemu_overhead_kib)
start_daemon cold --no-templates
cold=()
for _ in $(seq "$rounds"); do
  t0=$(now_ms); id=$($airlock session create --idle-timeout 0); t1=$(now_ms)
  cold+=($((t1 - t0))); $airlock rm "$id" >/dev/null
done

# Airlock with templates and its warm pool (one VM per kind, so each round finds one ready).
start_daemon warm --pool 1
$airlock run -- true >/dev/null   # the template, and the pool's first demand
run_true=() run_py=() create=()
for _ in $(seq "$rounds"); do
  pooled; run_true+=("$(time_ms $airlock run -- true)")
  pooled; run_py+=("$(time_ms $airlock run -- python3 -c pass)")
  pooled; t0=$(now_ms); id=$($airlock session create); t1=$(now_ms); create+=($((t1 - t0)))
  $airlock rm "$id" >/dev/null
done

# A live session: exec round trip, stdout, idle memory, pause/resume, fork.
pooled
id=$($airlock session create --idle-timeout 0)
$airlock exec "$id" -- true
pooled   # the refill that create started is done: it does not weigh on what follows
rtt=()
for _ in $(seq $((rounds * 4))); do rtt+=("$(time_ms $airlock exec "$id" -- true)"); done
guest=$($airlock exec "$id" -- python3 -c "
import subprocess, time
runs = []
for _ in range(20):
    t = time.monotonic(); subprocess.run(['true']); runs.append((time.monotonic() - t) * 1000)
print(round(sorted(runs)[len(runs) // 2]))")
# The same through the Python SDK (one process, one connection: no CLI start-up per call).
read -r sdk_rtt sdk_mbps < <(PYTHONPATH=sdk/python /usr/bin/python3 - "$id" $((rounds * 4)) <<'PY'
import statistics, sys, time
import airlock
session_id, rounds = sys.argv[1], int(sys.argv[2])
with airlock.Client() as c:
    s = c.get_session(session_id)
    s.exec(["true"])
    runs = []
    for _ in range(rounds):
        t = time.monotonic(); s.exec(["true"]); runs.append((time.monotonic() - t) * 1000)
    size = 256 << 20
    t = time.monotonic()
    got = sum(len(e.data) for e in s.exec_stream(["head", "-c", str(size), "/dev/zero"])
              if isinstance(e, airlock.Output))
    assert got == size, got
    print(round(statistics.median(runs)), round(size / 1e6 / (time.monotonic() - t)))
PY
)
bytes=$((256 * 1024 * 1024))
# A reference for stdout: the guest alone moving the bytes through one pipe (TCG emulates every
# copy: head's into the pipe and cat's out of it). Airlock's path copies once in the guest, into
# the command's pipe: the agent splices the pages on to the channel, so it can beat this.
guest_pipe=$($airlock exec "$id" -- python3 -c "
import subprocess, time
t = time.monotonic()
subprocess.run(['sh', '-c', 'head -c $bytes /dev/zero | cat > /dev/null'])
print(round($bytes / 1e6 / (time.monotonic() - t)))")
t0=$(now_ms); $airlock exec "$id" -- head -c $bytes /dev/zero | wc -c >/dev/null; t1=$(now_ms)
mbps=$(awk -v b=$bytes -v ms=$((t1 - t0)) 'BEGIN {printf "%.0f", b / 1e6 / (ms / 1000)}')
# Resident memory beyond the guest's RAM mapping (the mapping's own Rss in smaps).
overhead_kib() {
  local pid
  pid=$($airlock ps | awk -v id="$1" '$1 == id {print $2}')
  awk -v ram=$((512 * 1024)) '/^Size:/ {size=$2} /^Rss:/ {total+=$2; if (size == ram) guest+=$2}
    END {print total - guest}' "/proc/$pid/smaps"
}
sleep 2
worked_kib=$(overhead_kib "$id")
pause=() pause_pooled= pause_resumed=() resume=() resume_at_once=() bare_restore=()
bare_restore_x10=()
# The guest changes a little of its RAM (8 MB in /dev/shm) before a timed pause of a resumed
# session: what it changed, not its RAM size, should set the pause's cost.
dirty() { $airlock exec "$1" -- sh -c 'head -c 8000000 /dev/urandom > /dev/shm/dirty'; }
for _ in $(seq "$rounds"); do
  if [ -z "$pause_pooled" ]; then
    pause_pooled=$(time_ms $airlock pause "$id")  # its RAM a template's, mapped privately
  else
    dirty "$id"
    pause_resumed+=("$(time_ms $airlock pause "$id")")  # its RAM its own snapshot's file
  fi
  resume_at_once+=("$(time_ms $airlock resume "$id")")
  pause+=("$(time_ms $airlock pause "$id")")  # its RAM anonymous (copied from the state)
  apart "$id"
  # The floors: the same snapshot restored by Airlock's launcher with no daemon in the path.
  bare_restore+=("$("$root/build/airlock-bare-restore" "$AIRLOCK_HOME/sessions/$id/snapshot")")
  bare_restore_x10+=("$("$root/build/airlock-bare-restore" "$AIRLOCK_HOME/sessions/$id/snapshot" 10)")
  resume+=("$(time_ms $airlock resume "$id")")
done
$airlock pause "$id" >/dev/null
paused_rss=0
if $airlock ps --json | grep -q "\"$id\""; then paused_rss=unknown; fi
$airlock resume "$id" >/dev/null
sleep 2
idle_kib=$(overhead_kib "$id")
fork=()
for _ in $(seq "$rounds"); do
  t0=$(now_ms); forks=$($airlock fork "$id" -n 10); t1=$(now_ms)
  fork+=($((t1 - t0))); $airlock rm $forks >/dev/null
done
$airlock rm "$id" >/dev/null
# Resume against guest RAM: the same session shape at 512 MiB and at 4 GiB.
resume_big=() pause_resumed_big=()
big=$($airlock session create --idle-timeout 0 --memory 4g)
$airlock exec "$big" -- true
$airlock pause "$big" >/dev/null
for _ in $(seq "$rounds"); do
  apart "$big"
  resume_big+=("$(time_ms $airlock resume "$big")")
  dirty "$big"
  pause_resumed_big+=("$(time_ms $airlock pause "$big")")
done
$airlock rm "$big" >/dev/null

cold_ms=$(m "${cold[@]}") bare_ms=$(m "${bare[@]}") bw_py_ms=$(m "${bw_py[@]}")
bare_restore_ms=$(m "${bare_restore[@]}") bare_restore_x10_ms=$(m "${bare_restore_x10[@]}")
fork_ms=$(m "${fork[@]}")
resume_ms=$(m "${resume[@]}") resume_big_ms=$(m "${resume_big[@]}") rtt_ms=$(m "${rtt[@]}")
row() { printf '%-50s %10s   %s\n' "$1" "$2" "$3"; }
row "measure ($accel, median of $rounds)" "measured" "target"
echo "baselines"
row "  host sh -c true" "$(m "${host_sh[@]}") ms" "-"
row "  bwrap true" "$(m "${bw_true[@]}") ms" "-"
row "  bwrap python3 -c pass" "$bw_py_ms ms" "-"
row "  bare QEMU start-up, QMP, quit (floor)" "$bare_ms ms" "-"
row "  ten of them at once" "$(m "${bare_x10[@]}") ms" "-"
row "  bare QEMU RSS beyond guest RAM (floor)" "$((bare_kib / 1024)) MiB" "-"
row "  bare restore of a paused session (no daemon)" "$bare_restore_ms ms" "-"
row "  ten bare restores at once (floor for fork x10)" "$bare_restore_x10_ms ms" "-"
row "  cold boot to ready (no template)" "$cold_ms ms" "-"
row "  airlock --version (CLI start-up, floor of a CLI exec)" "$(m "${cli[@]}") ms" "-"
echo "airlock"
row "  run -- true (a pooled VM ready)" "$(m "${run_true[@]}") ms" "<= 250 ms"
row "  run -- python3 -c pass (a pooled VM ready)" "$(m "${run_py[@]}") ms" \
  "<= 3 x bwrap = $((3 * bw_py_ms)) ms ($(ratio "$(m "${run_py[@]}")" "$bw_py_ms") x)"
row "  session create (from the pool)" "$(m "${create[@]}") ms" "<= 100 ms"
row "  resume of a paused session (512 MiB)" "$resume_ms ms" \
  "<= 1.3 x bare restore ($(ratio "$resume_ms" "$bare_restore_ms") x); <= 150 ms; <= 1/20 of cold = $((cold_ms / 20)) ms"
row "  resume at once after the pause (RAM in the state)" "$(m "${resume_at_once[@]}") ms" "-"
row "  resume of a paused session (4 GiB)" "$resume_big_ms ms" \
  "within 20% of 512 MiB ($(ratio "$resume_big_ms" "$resume_ms") x)"
row "  fork x10 of a running session" "$fork_ms ms" \
  "<= 1.5 x ten bare restores ($(ratio "$fork_ms" "$bare_restore_x10_ms") x); <= 3 x resume = $((3 * resume_ms)) ms"
row "  pause (snapshot to disk, VM gone; RAM anonymous)" "$(m "${pause[@]}") ms" "-"
row "  pause of a pooled session (RAM a template's, once)" "$pause_pooled ms" "-"
pause_resumed_ms=$(m "${pause_resumed[@]}") pause_resumed_big_ms=$(m "${pause_resumed_big[@]}")
row "  pause of a resumed session, 8 MB changed (512 MiB)" "$pause_resumed_ms ms" "-"
row "  pause of a resumed session, 8 MB changed (4 GiB)" "$pause_resumed_big_ms ms" \
  "<= 1.2 x 512 MiB ($(ratio "$pause_resumed_big_ms" "$pause_resumed_ms") x)"
row "  exec ID -- true, end to end" "$rtt_ms ms" "-"
row "  the guest's own fork/exec of true" "$guest ms" "-"
row "  exec round trip above the guest's own cost" "$((rtt_ms - guest)) ms" \
  "<= CLI start-up + 10 ms = $(($(m "${cli[@]}") + 10)) ms"
row "  the same through the Python SDK" "$((sdk_rtt - guest)) ms" "<= 10 ms"
row "  the guest's own pipe, head | cat (reference)" "$guest_pipe MB/s" "-"
row "  stdout guest -> client (256 MiB)" "$mbps MB/s" ">= 50 MB/s"
row "  the same through the Python SDK" "$sdk_mbps MB/s" ">= 50 MB/s"
row "  paused session host RSS" "$paused_rss bytes" "0 (no process)"
row "  idle VM host RSS beyond guest RAM (resumed)" "$((idle_kib / 1024)) MiB" "<= 16 MiB (Firecracker <= 5)"
row "  the same after python and 256 MiB of output" "$((worked_kib / 1024)) MiB" "-"
row "  ratio resume / bare QEMU start-up" "$(ratio "$resume_ms" "$bare_ms")" "-"
