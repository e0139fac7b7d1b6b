#!/usr/bin/env bash
# The HTTP gateway (`airlock expose`) against the same server reached from inside its own guest
# (`airlock exec ID -- curl`/python on the guest's loopback), measured in the same run on a
# private airlockd:
#   download throughput (MB/s) of a 64 MiB file, median of the rounds
#   requests per second: REQUESTS small GETs one after another, each on a new connection
# Usage: bench/gateway_bench.sh [ROUNDS] [REQUESTS]   (after scripts/setup.sh; as root; needs
# curl and python3 on the host)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
requests=${2:-200}
. bench/timing.sh
. bench/private_home.sh
export AIRLOCK_HTTP_LISTEN=127.0.0.1:0

id=$($airlock session create --memory 1g --idle-timeout 0)
$airlock exec "$id" -- sh -c 'mkdir -p /srv && head -c 67108864 /dev/urandom > /srv/blob &&
  echo small > /srv/small'
$airlock exec -d -w /srv "$id" -- python3 -m http.server 8000 2>/dev/null
$airlock exec "$id" -- sh -c "until python3 -c \"import socket;
socket.create_connection(('127.0.0.1', 8000))\" 2>/dev/null; do sleep 0.2; done"
url=$($airlock expose "$id" 8000)
token=${url##*airlock_token=}
port=$(echo "$url" | sed -E 's|^http://[^:/]+:([0-9]+)/.*|\1|')
headers=(-H "X-Airlock-Session: $id" -H "X-Airlock-Port: 8000" -H "X-Airlock-Token: $token")

# Small GETs, each on a new connection: requests per second (python, so no process per request).
rps_script='
import http.client, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
headers = dict(h.split(": ", 1) for h in sys.argv[4:])
t0 = time.monotonic()
for _ in range(n):
    c = http.client.HTTPConnection(host, port, timeout=60)
    c.request("GET", "/small", headers=headers)
    assert c.getresponse().read() == b"small\n"
    c.close()
print(round(n / (time.monotonic() - t0)))
'

gateway_mbps=() guest_mbps=() gateway_rps=() guest_rps=()
for _ in $(seq "$rounds"); do
  gateway_mbps+=($(curl -s -o /dev/null -w '%{speed_download}' "${headers[@]}" \
                   "http://127.0.0.1:$port/blob" | awk '{printf "%.0f", $1 / 1e6}'))
  guest_mbps+=($($airlock exec "$id" -- curl -s -o /dev/null -w '%{speed_download}' \
                 http://127.0.0.1:8000/blob | awk '{printf "%.0f", $1 / 1e6}'))
  gateway_rps+=($(python3 -c "$rps_script" 127.0.0.1 "$port" "$requests" \
                  "X-Airlock-Session: $id" "X-Airlock-Port: 8000" "X-Airlock-Token: $token"))
  guest_rps+=($($airlock exec "$id" -- python3 -c "$rps_script" 127.0.0.1 8000 "$requests"))
done
$airlock rm "$id" >/dev/null

m() { printf '%s\n' "$@" | median; }
gm=$(m "${gateway_mbps[@]}") lm=$(m "${guest_mbps[@]}") gr=$(m "${gateway_rps[@]}") lr=$(m "${guest_rps[@]}")
printf '%-52s %10s %10s %8s\n' "" "gateway" "in guest" "ratio"
awk -v g="$gm" -v l="$lm" 'BEGIN { printf "%-52s %10d %10d %8.2f\n", "download of 64 MiB (MB/s, median)", g, l, g / l }'
awk -v g="$gr" -v l="$lr" -v n="$requests" 'BEGIN {
  printf "%-52s %10d %10d %8.2f\n", "GETs per second, a new connection each (" n ")", g, l, g / l }'
