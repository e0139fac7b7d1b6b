#!/usr/bin/env bash
# The activity record's cost: a pip-install-like file workload (Python writing and reading
# back many small files under /root, in nested directories, as a package install does) and
# `python3 -c pass` started many times (process events), each timed in one session of an
# airlockd that records and one that does not (--no-activity-record), both in this invocation.
# Usage: bench/activity_bench.sh [RUNS]   (after scripts/setup.sh; as root)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
. bench/private_daemon.sh
. bench/timing.sh

files='import os, time
t = time.time()
for d in range(40):
    p = "/root/site/pkg%d" % d
    os.makedirs(p, exist_ok=True)
    for f in range(50):
        with open("%s/m%d.py" % (p, f), "w") as out: out.write("x = %d\n" % f)
for d in range(40):
    for f in range(50):
        with open("/root/site/pkg%d/m%d.py" % (d, f)) as i: i.read()
print(int((time.time() - t) * 1000))'
procs='for i in $(seq 30); do python3 -c pass; done'

measure() {  # NAME FLAGS...: prints "files_ms procs_ms", medians over $runs
  local name=$1; shift
  start_daemon "$name" --pool 0 "$@"
  local id f p fs=() ps=()
  id=$($airlock session create --idle-timeout 0)
  for _ in $(seq "$runs"); do
    $airlock exec "$id" -- rm -rf /root/site
    f=$($airlock exec "$id" -- python3 -c "$files")
    p=$(time_ms $airlock exec "$id" -- sh -c "$procs")
    fs+=("$f"); ps+=("$p")
  done
  $airlock rm "$id" >/dev/null
  echo "$(med "${fs[@]}") $(med "${ps[@]}")"
}

read -r off_files off_procs < <(measure off --no-activity-record)
read -r on_files on_procs < <(measure on)
printf '%-46s %10s %10s %7s\n' "workload (median of $runs)" "recorded" "not" "ratio"
printf '%-46s %8s ms %8s ms %7s\n' "2000 files written, then read (python3)" \
  "$on_files" "$off_files" "$(ratio "$on_files" "$off_files")"
printf '%-46s %8s ms %8s ms %7s\n' "30 processes (python3 -c pass)" \
  "$on_procs" "$off_procs" "$(ratio "$on_procs" "$off_procs")"
