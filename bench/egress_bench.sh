#!/usr/bin/env bash
# Egress benchmarks against baselines measured in the same run, on a private airlockd:
#   download throughput guest <- host server through the proxy, against the same download on
#     the host and the same download inside the guest from the guest's own loopback
#   connection set-up (TCP connect + TLS handshake) from the guest through the proxy, against
#     the same on the host
#   100 concurrent connections from one guest
# Usage: bench/egress_bench.sh [ROUNDS]   (after scripts/setup.sh; as root; needs python3 and
# curl on the host for the test servers)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
. bench/timing.sh
mb=64
. bench/loopback_servers.sh

id=$($airlock session create --memory 1g --allow "bench.test:$http_port" --allow bench.test)
$airlock file write "$id" /tmp/ca.pem < "$home/ca.pem"

# Download throughput (MB/s), median of the rounds.
host_mbps=() guest_mbps=() local_mbps=()
for _ in $(seq "$rounds"); do
  host_mbps+=($(curl -s -o /dev/null -w '%{speed_download}' "http://127.0.0.1:$http_port/blob" |
                awk '{printf "%.0f", $1 / 1e6}'))
  guest_mbps+=($($airlock exec "$id" -- curl -s -o /dev/null -w '%{speed_download}' \
                 "http://bench.test:$http_port/blob" | awk '{printf "%.0f", $1 / 1e6}'))
done
# The guest's own loopback: the same file served inside the guest, without the proxy.
$airlock exec "$id" -- sh -c "head -c $((mb * 1024 * 1024)) /dev/urandom > /tmp/blob &&
  (python3 -m http.server --bind 127.0.0.1 --directory /tmp 8000 >/dev/null 2>&1 &) && sleep 2"
for _ in $(seq "$rounds"); do
  local_mbps+=($($airlock exec "$id" -- curl -s -o /dev/null -w '%{speed_download}' \
                 "http://127.0.0.1:8000/blob" | awk '{printf "%.0f", $1 / 1e6}'))
done

# Connection set-up: TCP connect + TLS handshake (curl's time_appconnect), in ms; the guest's
# own loopback (a TLS server inside it) separates the proxy's share from TCG's slow crypto.
$airlock file write "$id" /tmp/tls.pem < "$home/tls.pem"
$airlock file write "$id" /tmp/tls.key < "$home/tls.key"
$airlock exec "$id" -- sh -c "(python3 -c '
import http.server, ssl
server = http.server.ThreadingHTTPServer((\"127.0.0.1\", 8443), http.server.SimpleHTTPRequestHandler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(\"/tmp/tls.pem\", \"/tmp/tls.key\")
server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()' >/dev/null 2>&1 &) && sleep 2"
host_setup=() guest_setup=() local_setup=()
for _ in $(seq "$rounds"); do
  local_setup+=($($airlock exec "$id" -- curl -s -o /dev/null --cacert /tmp/ca.pem \
                  --resolve bench.test:8443:127.0.0.1 -w '%{time_appconnect}' \
                  https://bench.test:8443/ | awk '{printf "%.0f", $1 * 1000}'))
  host_setup+=($(curl -s -o /dev/null --cacert "$home/ca.pem" --resolve bench.test:443:127.0.0.1 \
                 -w '%{time_appconnect}' https://bench.test/small | awk '{printf "%.0f", $1 * 1000}'))
  guest_setup+=($($airlock exec "$id" -- curl -s -o /dev/null --cacert /tmp/ca.pem \
                  -w '%{time_appconnect}' https://bench.test/small | awk '{printf "%.0f", $1 * 1000}'))
done

# 100 concurrent connections from one guest, each fetching a small file.
concurrent=$($airlock exec "$id" -- python3 -c "
import concurrent.futures, time, urllib.request
def get(_):
    return urllib.request.urlopen('http://bench.test:$http_port/small', timeout=60).read()
t = time.monotonic()
with concurrent.futures.ThreadPoolExecutor(100) as pool:
    ok = sum(1 for r in pool.map(get, range(100)) if r == b'small\n')
print(ok, round((time.monotonic() - t) * 1000))")
$airlock rm "$id" >/dev/null

# A session limited to 4 MiB/s: the same download.
slow=$($airlock session create --net-rate 4m --allow "bench.test:$http_port")
limited=$($airlock exec "$slow" -- curl -s -o /dev/null -w '%{speed_download}' \
          "http://bench.test:$http_port/blob" | awk '{printf "%.1f", $1 / 1048576}')
$airlock rm "$slow" >/dev/null

m() { printf '%s\n' "$@" | median; }
hm=$(m "${host_mbps[@]}"); gm=$(m "${guest_mbps[@]}"); lm=$(m "${local_mbps[@]}")
hs=$(m "${host_setup[@]}"); gs=$(m "${guest_setup[@]}"); ls_=$(m "${local_setup[@]}")
printf '%-60s %10s  %s\n' "measure (median of $rounds)" "value" "target"
printf '%-60s %6s MB/s\n' "download of $mb MiB on the host (baseline)" "$hm"
printf '%-60s %6s MB/s\n' "the same inside the guest from its own loopback (baseline)" "$lm"
printf '%-60s %6s MB/s\n' "the same from the guest through the egress proxy" "$gm"
printf '%-60s %8s %%  >= 50%% of the host\n' "  proxy download / host download" \
  "$(awk -v a="$gm" -v b="$hm" 'BEGIN {printf "%.0f", 100 * a / b}')"
printf '%-60s %8s %%\n' "  proxy download / guest loopback download" \
  "$(awk -v a="$gm" -v b="$lm" 'BEGIN {printf "%.0f", 100 * a / b}')"
printf '%-60s %8s ms\n' "TCP connect + TLS handshake on the host (baseline)" "$hs"
printf '%-60s %8s ms\n' "the same inside the guest to its own loopback (baseline)" "$ls_"
printf '%-60s %8s ms\n' "the same from the guest through the proxy" "$gs"
printf '%-60s %11s\n' "100 concurrent connections from one guest (ok, ms)" "$concurrent"
printf '%-60s %6s MiB/s  (limit 4 MiB/s)\n' "download in a session with --net-rate 4m" "$limited"
