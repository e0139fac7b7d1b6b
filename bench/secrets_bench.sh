#!/usr/bin/env bash
# The cost of interception: the same HTTPS requests from a guest to the same loopback server,
# through an opaque tunnel (a session without secrets: the baseline) and through the
# intercepting path (a session with a secret bound to the host: TLS terminated by airlockd,
# headers swapped, responses masked), measured in one run, on a private airlockd:
#   one request on a new connection (TCP connect + TLS handshake + request), ms
#   a request on a kept-alive connection, ms
#   a download of 32 MiB, MB/s
# Usage: bench/secrets_bench.sh [ROUNDS]   (after scripts/setup.sh; as root; needs python3,
# curl and openssl on the host for the test servers)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
. bench/timing.sh
mb=32
. bench/loopback_servers.sh

export BENCH_KEY=bench-secret-value-0123456789abcdef
tunnel=$($airlock session create --memory 1g --allow bench.test)
# Both sessions' curl read the system bundle: the tunnel's gets the server's CA appended (the
# intercepted one's has the session CA), so both parse the same ~140 certificates.
$airlock file write "$tunnel" /tmp/ca.pem < "$home/ca.pem"
$airlock exec "$tunnel" -- sh -c 'cat /tmp/ca.pem >> /etc/ssl/certs/ca-certificates.crt'
intercepted=$($airlock session create --memory 1g --allow bench.test \
              --secret KEY=env:BENCH_KEY@bench.test)

# ID CURL-OPTION...: appends one round's "new keepalive mbps" to the arrays named by the caller.
measure() {
  local id=$1; shift
  local urls=()
  for _ in $(seq 10); do urls+=(-o /dev/null https://bench.test/small); done
  new+=($($airlock exec "$id" -- sh -c "curl -s $* -H \"Authorization: Bearer \$KEY\" \
          -o /dev/null -w '%{time_total}' https://bench.test/small" |
          awk '{printf "%.0f", $1 * 1000}'))
  # Ten requests on one connection: the median of all but the first.
  kept+=($($airlock exec "$id" -- sh -c "curl -s $* -H \"Authorization: Bearer \$KEY\" \
          -w '%{time_total}\n' ${urls[*]}" | tail -n +2 | sort -n |
          awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)] * 1000}'))
  mbps+=($($airlock exec "$id" -- curl -s "$@" -o /dev/null -w '%{speed_download}' \
           https://bench.test/blob | awk '{printf "%.0f", $1 / 1e6}'))
}
new=() kept=() mbps=()
for _ in $(seq "$rounds"); do measure "$tunnel"; done
tn=("${new[@]}") tk=("${kept[@]}") tm=("${mbps[@]}")
new=() kept=() mbps=()
for _ in $(seq "$rounds"); do measure "$intercepted"; done
in_=("${new[@]}") ik=("${kept[@]}") im=("${mbps[@]}")
used=$($airlock secret ls "$intercepted" | awk '/^KEY/ {print $4}')
$airlock rm "$tunnel" >/dev/null
$airlock rm "$intercepted" >/dev/null

m() { printf '%s\n' "$@" | median; }
printf '%-62s %10s\n' "measure (median of $rounds)" "value"
printf '%-62s %7s ms\n' "request on a new connection, opaque tunnel (baseline)" "$(m "${tn[@]}")"
printf '%-62s %7s ms\n' "the same, intercepted (secret swapped in)" "$(m "${in_[@]}")"
printf '%-62s %10s\n' "  intercepted / tunnel" "$(ratio "$(m "${in_[@]}")" "$(m "${tn[@]}")")"
printf '%-62s %7s ms\n' "request on a kept-alive connection, opaque tunnel (baseline)" "$(m "${tk[@]}")"
printf '%-62s %7s ms\n' "the same, intercepted" "$(m "${ik[@]}")"
printf '%-62s %10s\n' "  intercepted / tunnel" "$(ratio "$(m "${ik[@]}")" "$(m "${tk[@]}")")"
printf '%-62s %5s MB/s\n' "download of $mb MiB, opaque tunnel (baseline)" "$(m "${tm[@]}")"
printf '%-62s %5s MB/s\n' "the same, intercepted (masked, re-chunked)" "$(m "${im[@]}")"
printf '%-62s %10s\n' "  intercepted / tunnel" "$(ratio "$(m "${im[@]}")" "$(m "${tm[@]}")")"
printf '%-62s %10s\n' "the secret was used (secret ls: last use)" "${used:-never}"
