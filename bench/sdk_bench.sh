#!/usr/bin/env bash
# SDK benchmarks against baselines measured in the same run, on a private airlockd:
#   exec round trip of `true` through each SDK (Python sync and asyncio, TypeScript, Go, Rust)
#   against a bare gRPC call of the Python stubs and against the CLI (`airlock exec ID -- true`)
#   256 MiB of stdout streamed through each SDK against the same through the bare stubs
#   a 64 MiB file written and read through files (WriteFileStream/ReadFileStream) against the
#   same bytes through a command's stdin (cat > FILE) and stdout (cat FILE)
# Usage: bench/sdk_bench.sh [ROUNDS]   (after scripts/setup.sh; as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-20}
. bench/private_home.sh
. bench/timing.sh

id=$($airlock session create)
$airlock exec "$id" -- true   # warm the path once
clis=()
for _ in $(seq "$rounds"); do clis+=("$(time_ms "$airlock" exec "$id" -- true)"); done
cli=$(printf '%s\n' "${clis[@]}" | median)

# The TypeScript, Go and Rust SDKs' median round trips (ms) and stdout MB/s, each printed as
# "RTT MBPS" by its own program (built by scripts/test.sh and CMake: sdk/js/dist, build/gopath;
# the Rust one by cargo here, sdk/rust/examples/bench.rs).
js=$(node --input-type=module - "$id" "$rounds" <<'JS'
import { Client } from './sdk/js/dist/index.js';
const [id, rounds] = [process.argv[2], Number(process.argv[3])];
const c = await Client.connect();
const s = await c.getSession(id);
await s.exec(['true']);
const times = [];
for (let i = 0; i < rounds; i++) {
  const t = process.hrtime.bigint();
  await s.exec(['true']);
  times.push(Number(process.hrtime.bigint() - t) / 1e6);
}
times.sort((a, b) => a - b);
const size = 256 << 20;
const t = process.hrtime.bigint();
let bytes = 0;
for await (const e of s.execStream(['head', '-c', String(size), '/dev/zero'])) {
  if (e.type === 'stdout') bytes += e.data.length;
}
if (bytes !== size) throw new Error(`read ${bytes} bytes of ${size}`);
const seconds = Number(process.hrtime.bigint() - t) / 1e9;
console.log(times[Math.floor(times.length / 2)].toFixed(1), (size / 1e6 / seconds).toFixed(0));
c.close();
JS
)
gobench=$(mktemp -d /tmp/airlock-gobench-XXXXXX)
cat > "$gobench/main.go" <<'GO'
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"time"

	airlock "airlock.dev/sdk"
)

func main() {
	ctx := context.Background()
	rounds, _ := strconv.Atoi(os.Args[2])
	c, err := airlock.Dial(ctx, "")
	if err != nil {
		panic(err)
	}
	defer c.Close()
	s, err := c.Sessions.Get(ctx, os.Args[1])
	if err != nil {
		panic(err)
	}
	times := []float64{}
	for i := 0; i <= rounds; i++ {
		t := time.Now()
		if _, err := s.Exec(ctx, []string{"true"}, nil); err != nil {
			panic(err)
		}
		if i > 0 { // the first warms the path
			times = append(times, float64(time.Since(t).Microseconds())/1000)
		}
	}
	sort.Float64s(times)
	size := 256 << 20
	start := time.Now()
	st, err := s.ExecStream(ctx, []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}, nil)
	if err != nil {
		panic(err)
	}
	bytes := 0
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		if ev.Output != nil && !ev.Output.Stderr {
			bytes += len(ev.Output.Data)
		}
	}
	if bytes != size {
		panic(fmt.Sprintf("read %d bytes of %d", bytes, size))
	}
	fmt.Printf("%.1f %.0f\n", times[len(times)/2], float64(size)/1e6/time.Since(start).Seconds())
}
GO
go=$(env GO111MODULE=off GOPATH="$PWD/build/gopath:/usr/share/gocode" GOCACHE="$PWD/build/gocache" \
  GOFLAGS=-buildvcs=false go run "$gobench/main.go" "$id" "$rounds")
rm -rf "$gobench"
rust=$(cd sdk/rust && CARGO_TARGET_DIR=/var/cache/airlock/rust-sdk \
  cargo run --offline --locked --release --quiet --example bench -- "$id" "$rounds")

PYTHONPATH=sdk/python /usr/bin/python3 - "$id" "$rounds" "$cli" "$js" "$go" "$rust" <<'PY'
import asyncio, os, statistics, sys, time
import airlock, airlock.aio
from airlock.v1 import airlock_pb2 as pb, airlock_pb2_grpc as rpc

session_id, rounds, cli = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
(js, js_mbps), (go, go_mbps), (rust, rust_mbps) = (map(float, a.split()) for a in sys.argv[4:7])
size = 256 << 20
reading = ["head", "-c", str(size), "/dev/zero"]

def ms(f):
    t = time.monotonic(); f(); return (time.monotonic() - t) * 1000

def median_ms(f):
    f()
    return statistics.median(ms(f) for _ in range(rounds))

with airlock.Client() as c:
    s = c.get_session(session_id)
    stub = rpc.SessionsStub(c._channel)

    def bare(argv):
        start = pb.ExecStart(session_id=session_id, argv=[a.encode() for a in argv])
        out = 0
        for r in stub.Exec(iter([pb.ExecRequest(start=start)])):
            out += len(r.stdout)
        return out

    def sdk_stream(argv):
        return sum(len(e.data) for e in s.exec_stream(argv) if isinstance(e, airlock.Output))

    bare_rtt = median_ms(lambda: bare(["true"]))
    sdk_rtt = median_ms(lambda: s.exec(["true"]))
    t_bare = ms(lambda: bare(reading))
    t_sdk = ms(lambda: sdk_stream(reading))
    t_sdk_exec = ms(lambda: s.exec(reading))
    blob = os.urandom(64 << 20)
    t_stdin = ms(lambda: s.exec(["sh", "-c", "cat > /tmp/bench-stdin.bin"], stdin=blob))
    t_write = ms(lambda: s.files.write("/tmp/bench.bin", blob))
    t_cat = ms(lambda: s.exec(["cat", "/tmp/bench.bin"]))
    t_read = ms(lambda: s.files.read("/tmp/bench.bin"))

async def aio_rtt():
    async with airlock.aio.Client() as c:
        s = await c.get_session(session_id)
        await s.exec(["true"])
        times = []
        for _ in range(rounds):
            t = time.monotonic(); await s.exec(["true"]); times.append((time.monotonic() - t) * 1000)
        return statistics.median(times)

aio = asyncio.run(aio_rtt())
mbps = lambda t: size / 1e6 / (t / 1000)
print(f"{'measure (median of %d)' % rounds:<56} {'value':>10}  ratio")
print(f"{'exec true: bare gRPC call of the stubs (baseline)':<56} {bare_rtt:8.1f} ms")
print(f"{'exec true: Python SDK, sync':<56} {sdk_rtt:8.1f} ms  {sdk_rtt / bare_rtt:.2f}x")
print(f"{'exec true: Python SDK, asyncio':<56} {aio:8.1f} ms  {aio / bare_rtt:.2f}x")
print(f"{'exec true: TypeScript SDK':<56} {js:8.1f} ms  {js / bare_rtt:.2f}x")
print(f"{'exec true: Go SDK':<56} {go:8.1f} ms  {go / bare_rtt:.2f}x")
print(f"{'exec true: Rust SDK':<56} {rust:8.1f} ms  {rust / bare_rtt:.2f}x")
print(f"{'exec true: airlock exec ID -- true (CLI process)':<56} {cli:8.1f} ms  {cli / bare_rtt:.2f}x")
print(f"{'256 MiB stdout: bare gRPC call (baseline)':<56} {mbps(t_bare):6.0f} MB/s")
print(f"{'256 MiB stdout: Python SDK exec_stream':<56} {mbps(t_sdk):6.0f} MB/s  {t_bare / t_sdk:.2f}x")
print(f"{'256 MiB stdout: Python SDK exec (collected)':<56} {mbps(t_sdk_exec):6.0f} MB/s  {t_bare / t_sdk_exec:.2f}x")
for name, rate in (("TypeScript", js_mbps), ("Go", go_mbps), ("Rust", rust_mbps)):
    print(f"{'256 MiB stdout: ' + name + ' SDK, streamed':<56} {rate:6.0f} MB/s  {rate / mbps(t_bare):.2f}x")
fmbps = lambda t: (64 << 20) / 1e6 / (t / 1000)
print(f"{'64 MiB into the guest: exec stdin, cat > FILE (baseline)':<56} {fmbps(t_stdin):6.0f} MB/s")
print(f"{'64 MiB into the guest: files.write':<56} {fmbps(t_write):6.0f} MB/s  {t_stdin / t_write:.2f}x")
print(f"{'64 MiB out of the guest: exec stdout, cat FILE (baseline)':<56} {fmbps(t_cat):6.0f} MB/s")
print(f"{'64 MiB out of the guest: files.read':<56} {fmbps(t_read):6.0f} MB/s  {t_cat / t_read:.2f}x")
PY
$airlock rm "$id" >/dev/null
