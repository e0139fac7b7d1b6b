#!/usr/bin/env bash
# What the egress proxy costs airlockd per connection, on a private airlockd: SESSIONS busy
# sessions (default 16) each holding CONNECTIONS idle connections (default 50) through the proxy
# to a loopback server, against the same sessions holding none (the baseline, measured in the
# same run). Prints airlockd's open descriptors and resident memory in both states, and what
# one connection adds.
# Usage: bench/proxy_resources.sh [SESSIONS] [CONNECTIONS]   (after scripts/setup.sh; as root)
set -euo pipefail
cd "$(dirname "$0")/.."
sessions=${1:-16}
connections=${2:-50}
mb=1
. bench/loopback_servers.sh

fds() { ls "/proc/$pid/fd" | wc -l; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }

ids=()
for _ in $(seq "$sessions"); do
  ids+=("$($airlock session create --idle-timeout 0 --allow "bench.test:$http_port")")
done
sleep 2
pid=$(cat "$home/airlockd.pid")
base_fds=$(fds) base_rss=$(rss_kib)

# Each session opens its connections and keeps them, idle, in the background.
for id in "${ids[@]}"; do
  $airlock exec "$id" -- sh -c "(python3 -c '
import socket, time
held = [socket.create_connection((\"bench.test\", $http_port)) for _ in range($connections)]
time.sleep(600)' >/dev/null 2>&1 &) && sleep 1"
done
# Until every connection is dialed (or 60 s).
want=$((base_fds + sessions * connections))
for _ in $(seq 120); do [ "$(fds)" -ge "$want" ] && break; sleep 0.5; done
busy_fds=$(fds) busy_rss=$(rss_kib)
held=$((sessions * connections))

for id in "${ids[@]}"; do $airlock rm "$id" >/dev/null; done
printf '%-44s %10s %10s\n' "" "baseline" "busy"
printf '%-44s %10d %10d\n' "airlockd open descriptors" "$base_fds" "$busy_fds"
printf '%-44s %10d %10d\n' "airlockd resident memory (KiB)" "$base_rss" "$busy_rss"
printf '%-44s %10d\n' "connections held ($sessions sessions x $connections)" "$held"
awk -v b="$base_fds" -v f="$busy_fds" -v r0="$base_rss" -v r1="$busy_rss" -v n="$held" 'BEGIN {
  printf "%-44s %10.2f\n", "descriptors per connection (ratio)", (f - b) / n
  printf "%-44s %10.1f\n", "resident KiB per idle connection", (r1 - r0) / n
}'
