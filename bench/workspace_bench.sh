#!/usr/bin/env bash
# Workspace benchmarks against baselines measured in the same run, on a private airlockd:
#   `airlock session create --workspace` of a 100 MB / 20k-file git project, against
#   `session create` without one (the VM's own cost), `cp -a` and `git clone --local` of the
#   project on the host
#   `airlock diff` after changing 100 files, and `airlock promote` of one commit of them
# Usage: bench/workspace_bench.sh [ROUNDS]   (after scripts/setup.sh; as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
. bench/private_home.sh
. bench/timing.sh

# The project: 200 directories of 100 files of 5 KiB (random, so nothing compresses away).
project=$home/project
mkdir "$project"
python3 - "$project" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(200):
    os.makedirs(f"{root}/pkg{d:03}")
    for f in range(100):
        with open(f"{root}/pkg{d:03}/mod{f:03}.py", "wb") as out:
            out.write(os.urandom(2560).hex().encode())
PY
git -C "$project" init -q -b main
git -C "$project" add -A
git -C "$project" -c user.name=b -c user.email=b@b -c gc.auto=0 commit -qm base
git -C "$project" gc -q   # packed, as a real project's history is (and no gc runs behind the timings)
size=$(du -sm --exclude=.git "$project" | cut -f1)
files=$(find "$project" -path "$project/.git" -prune -o -type f -print | wc -l)

$airlock rm "$($airlock session create)" >/dev/null   # the template, made once
plain=(); ws=(); cpa=(); clone=()
for _ in $(seq "$rounds"); do
  t0=$(now_ms); id=$($airlock session create); t1=$(now_ms); plain+=($((t1 - t0)))
  $airlock rm "$id" >/dev/null
  t0=$(now_ms); id=$($airlock session create --workspace "$project"); t1=$(now_ms); ws+=($((t1 - t0)))
  $airlock rm "$id" >/dev/null
  sync; t0=$(now_ms); cp -a "$project" "$home/copy"; sync; t1=$(now_ms); cpa+=($((t1 - t0)))
  rm -rf "$home/copy"
  sync; t0=$(now_ms); git clone -q --local "$project" "$home/clone"; sync; t1=$(now_ms)
  clone+=($((t1 - t0))); rm -rf "$home/clone"
done

id=$($airlock session create --workspace "$project")
$airlock exec "$id" -w /workspace -- sh -c 'for d in $(seq -w 0 99); do echo changed >> pkg0$d/mod000.py; done'
diffs=(); for _ in $(seq "$rounds"); do
  t0=$(now_ms); $airlock diff --stat "$id" >/dev/null; t1=$(now_ms); diffs+=($((t1 - t0)))
done
$airlock exec "$id" -w /workspace -- git -c user.name=a -c user.email=a@a commit -qam bench
t0=$(now_ms); $airlock promote "$id" >/dev/null; t1=$(now_ms); promote=$((t1 - t0))
$airlock rm "$id" >/dev/null

ws_ms=$(med "${ws[@]}"); plain_ms=$(med "${plain[@]}"); cp_ms=$(med "${cpa[@]}"); clone_ms=$(med "${clone[@]}")
printf 'project: %s MB in %s files, with its .git\n' "$size" "$files"
printf '%-56s %8s\n' "measure (median of $rounds)" "ms"
printf '%-56s %8s\n' "session create --workspace" "$ws_ms"
printf '%-56s %8s\n' "session create (no workspace; the VM's own cost)" "$plain_ms"
printf '%-56s %8s\n' "  so the workspace costs" "$((ws_ms - plain_ms))"
printf '%-56s %8s\n' "cp -a of the project on the host (baseline)" "$cp_ms"
printf '%-56s %8s\n' "git clone --local of the project on the host (baseline)" "$clone_ms"
printf '%-56s %8s\n' "airlock diff --stat, 100 files changed" "$(med "${diffs[@]}")"
printf '%-56s %8s\n' "airlock promote, 1 commit of 100 files" "$promote"
awk -v w=$((ws_ms - plain_ms)) -v c="$cp_ms" -v g="$clone_ms" 'BEGIN {
  printf "ratio: workspace capture+upload / cp -a = %.2f, / git clone --local = %.2f\n", w / c, w / g }'
