#!/usr/bin/env bash
# `airlock ls` of a fleet (README, "Every host lists the whole fleet"): N paused sessions made
# across three hosts (a blob store directory and an etcd on loopback), listed on the third from
# the fleet's index in etcd, against the same `ls` there before any session was made, in this
# run. Each session is made on its host and paused (published), so N need not fit in memory.
# Usage: bench/fleet_ls_bench.sh [SESSIONS [ROUNDS]]   (after scripts/test.sh has installed
# etcd-server; 200 sessions take about ten minutes under TCG)
set -euo pipefail
cd "$(dirname "$0")/.."
sessions=${1:-200}
rounds=${2:-10}
. bench/private_daemon.sh
. bench/timing.sh
. bench/loopback_etcd.sh

# More sessions than a tenant's default quota of 64 on a host.
echo "default sessions=$((sessions + 16))" >"$work/quotas"
for h in a b c; do fleet_host "$h" --quota-file "$work/quotas"; done
empty_ms=()
for _ in $(seq "$rounds"); do empty_ms+=("$(time_ms on c ls)"); done

hosts=(a b c)
for i in $(seq "$sessions"); do
  h=${hosts[$((i % 3))]}
  id=$(on "$h" session create --memory 128m --idle-timeout 0)
  on "$h" pause "$id" >/dev/null
done
listed=$(on c ls --json | grep -c '"id"')
[ "$listed" -eq "$sessions" ] || { echo "ls on c lists $listed sessions, not $sessions" >&2; exit 1; }
full_ms=() json_ms=()
for _ in $(seq "$rounds"); do
  full_ms+=("$(time_ms on c ls)")
  json_ms+=("$(time_ms on c ls --json)")
done

e=$(med "${empty_ms[@]}") f=$(med "${full_ms[@]}") j=$(med "${json_ms[@]}")
row() { printf '%-56s %10s   %s\n' "$1" "$2" "$3"; }
row "measure ($accel, median of $rounds)" "measured" "ratio"
row "airlock ls on host c, no session in the fleet" "$e ms" "-"
row "airlock ls on host c, $sessions sessions across 3 hosts" "$f ms" "$(ratio "$f" "$e")x empty"
row "airlock ls --json, the same" "$j ms" "$(ratio "$j" "$e")x empty"
