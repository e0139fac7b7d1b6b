#!/usr/bin/env bash
# A command through another host of a fleet (README, "Any host answers for any session")
# against the same command on the host that runs the session, in this run: two airlockd on
# loopback with a blob store directory, an etcd and a fleet CA of their own; host B runs the
# session, and `airlock exec ID -- true` is timed on B and on A (forwarded to B over mutual
# TLS), alternately; then 16 MiB of stdout each way, the stream's cost.
# Usage: bench/forward_bench.sh [ROUNDS]   (after scripts/test.sh has installed etcd-server)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-20}
. bench/private_daemon.sh
. bench/timing.sh
. bench/loopback_etcd.sh

# The fleet's CA and a certificate per host, naming the host id.
ca=$work/ca
mkdir -p "$ca"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$ca/ca.key" -out "$ca/ca.pem" -days 1 \
  -subj /CN=bench-fleet-ca 2>/dev/null
for h in a b; do
  openssl req -newkey rsa:2048 -nodes -keyout "$ca/$h.key" -out "$ca/$h.csr" -subj "/CN=$h" 2>/dev/null
  echo "subjectAltName=DNS:$h" >"$ca/$h.ext"
  openssl x509 -req -in "$ca/$h.csr" -CA "$ca/ca.pem" -CAkey "$ca/ca.key" -CAcreateserial \
    -out "$ca/$h.pem" -days 1 -extfile "$ca/$h.ext" 2>/dev/null
done

# host NAME FLEET_PORT: a host that takes forwarded calls on that port.
host() {
  fleet_host "$1" --fleet-listen "127.0.0.1:$2" --fleet-cert "$ca/$1.pem" --fleet-key "$ca/$1.key" \
    --fleet-ca "$ca/ca.pem"
}
host a $((etcd_port + 2))
host b $((etcd_port + 3))

id=$(on b session create --idle-timeout 0)
on a exec "$id" -- true >/dev/null  # the first forwarded call opens the channel between hosts
local_ms=() forwarded_ms=()
for _ in $(seq "$rounds"); do
  local_ms+=("$(time_ms on b exec "$id" -- true)")
  forwarded_ms+=("$(time_ms on a exec "$id" -- true)")
done
stream_local_ms=() stream_forwarded_ms=()
for _ in 1 2 3 4 5; do
  stream_local_ms+=("$(time_ms on b exec "$id" -- head -c 16777216 /dev/zero)")
  stream_forwarded_ms+=("$(time_ms on a exec "$id" -- head -c 16777216 /dev/zero)")
done
stream_local=$(med "${stream_local_ms[@]}") stream_forwarded=$(med "${stream_forwarded_ms[@]}")
[ "$(on a ls --json | grep -c '"host": *"b"')" -ge 1 ] || { echo "the session left host b" >&2; exit 1; }
on b rm "$id" >/dev/null

l=$(med "${local_ms[@]}") f=$(med "${forwarded_ms[@]}")
row() { printf '%-52s %10s   %s\n' "$1" "$2" "$3"; }
row "measure ($accel, median of $rounds)" "measured" "ratio"
row "exec true on the host that runs the session" "$l ms" "-"
row "exec true through another host (forwarded)" "$f ms" "$(ratio "$f" "$l")x local (+$((f - l)) ms)"
row "16 MiB of stdout, on its host (median of 5)" "$stream_local ms" "-"
row "16 MiB of stdout, forwarded (median of 5)" "$stream_forwarded ms" "$(ratio "$stream_forwarded" "$stream_local")x local"
