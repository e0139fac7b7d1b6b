#!/usr/bin/env bash
# The whole test suite (run scripts/setup.sh first): formatting, unit tests, the unit tests and
# fuzz targets under ASan+UBSan, then the tests that boot real VMs.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== clang-format, gofmt"
git ls-files -- '*.cc' '*.h' | xargs clang-format --dry-run --Werror
unformatted=$(gofmt -l sdk/go/*.go)
[ -z "$unformatted" ] || { echo "gofmt: $unformatted" >&2; exit 1; }

echo "== unit tests"
# The etcd client's test runs Debian's etcd on loopback (a test counterpart only: airlock
# itself needs no etcd on one host, so scripts/setup.sh does not install it).
if [ ! -x /usr/bin/etcd ]; then
  echo "test: installing etcd-server (for the etcd client's test)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >&2
fi
# The S3 blob store's test runs s3rver, an S3-compatible server from npm, on loopback.
if [ ! -d tests/s3/node_modules/s3rver ]; then
  (cd tests/s3 && npm ci --no-audit --no-fund >/dev/null)
fi
ninja -C build >/dev/null
(cd build && ctest -L unit --output-on-failure)

echo "== unit tests and fuzzers under ASan+UBSan (clang)"
if [ ! -f build-asan/build.ninja ]; then
  CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DAIRLOCK_SANITIZE=ON -DAIRLOCK_BUILD_GUEST=OFF -DAIRLOCK_FUZZ=ON >/dev/null
fi
ninja -C build-asan >/dev/null
(cd build-asan && ctest -L unit --output-on-failure)
fuzz_seconds=${AIRLOCK_FUZZ_SECONDS:-20}
for fuzzer in build-asan/*_fuzz; do
  name=$(basename "$fuzzer" _fuzz)
  scratch=$(mktemp -d)
  echo "fuzzing $name for ${fuzz_seconds}s"
  "$fuzzer" -max_total_time="$fuzz_seconds" -artifact_prefix="$scratch/" "$scratch" "fuzz/corpus/$name" \
    > "$scratch.log" 2>&1 || { tail -50 "$scratch.log"; cp "$scratch"/crash-* . 2>/dev/null; exit 1; }
  rm -rf "$scratch" "$scratch.log"
done

echo "== the agent image for the Claude Code test (npm's package, its scripts run in a build VM)"
build/airlock image build --debian bookworm --packages git \
  --npm "@anthropic-ai/claude-code@${AIRLOCK_TEST_CLAUDE_CODE:-2.1.197}" --tag airlock/claude >/dev/null

echo "== VM tests (airlock mcp driven by the MCP SDK client, timeline pages in headless Chromium, the SDKs)"
if [ ! -d tests/mcp/node_modules/@modelcontextprotocol/sdk ]; then
  (cd tests/mcp && npm ci --no-audit --no-fund >/dev/null)
fi
if [ ! -d tests/pages/node_modules/puppeteer-core ]; then
  (cd tests/pages && npm ci --no-audit --no-fund >/dev/null)
fi
if [ ! -d tests/otlp/node_modules/@opentelemetry/otlp-transformer ]; then
  (cd tests/otlp && npm ci --no-audit --no-fund >/dev/null)
fi
# The TypeScript SDK: its packages, its stubs and types from the proto, its API reference.
(cd sdk/js && { [ -d node_modules/@grpc/grpc-js ] || npm ci --no-audit --no-fund >/dev/null; } &&
  npm run --silent build && npm run --silent doc >/dev/null)
if ! command -v chromium >/dev/null; then
  echo "test: installing chromium (for the timeline page test)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2
fi
(cd build && ctest -L vm --output-on-failure)
