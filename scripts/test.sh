#!/usr/bin/env bash
# The whole test suite (run scripts/setup.sh first): formatting, the unit tests and fuzz targets
# under ASan+UBSan (clang), then the tests that boot real VMs against the plain build. Both
# builds go through the compiler cache that scripts/setup.sh set up; each phase's duration is
# printed at the end, pass or fail.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

phases=()
phase_name=""
phase_start=$SECONDS
suite_start=$SECONDS
phase() {
  if [ -n "$phase_name" ]; then
    phases+=("$(printf '%6ss  %s' $((SECONDS - phase_start)) "$phase_name")")
  fi
  phase_name=$1
  phase_start=$SECONDS
  [ -z "$1" ] || echo "== $1"
}
report() {
  status=$?
  phase ""
  echo "== phases"
  printf '%s\n' "${phases[@]}"
  printf '%6ss  total (%s)\n' $((SECONDS - suite_start)) "$([ $status = 0 ] && echo passed || echo failed)"
}
trap report EXIT

# ctest in DIR (NAME: which times these are) with ARGS, the longest tests first wherever an
# earlier run measured them: ctest's cost data is kept outside the build tree, like the
# compiler cache, so a fresh clone schedules well too.
run_ctest() {
  local dir=$1 costs=${AIRLOCK_CACHE:-/var/cache/airlock}/ctest-costs-$2.txt status=0
  shift 2
  mkdir -p "$dir/Testing/Temporary"
  if [ ! -f "$dir/Testing/Temporary/CTestCostData.txt" ] && [ -f "$costs" ]; then
    cp "$costs" "$dir/Testing/Temporary/CTestCostData.txt"
  fi
  (cd "$dir" && ctest "$@") || status=$?
  cp "$dir/Testing/Temporary/CTestCostData.txt" "$costs" 2>/dev/null || true
  return "$status"
}

phase "clang-format, gofmt"
git ls-files -- '*.cc' '*.h' | xargs clang-format --dry-run --Werror
unformatted=$(gofmt -l sdk/go/*.go sdk/go/examples)
[ -z "$unformatted" ] || { echo "gofmt: $unformatted" >&2; exit 1; }

phase "test counterparts (etcd, npm packages, chromium), skipped when present"
# Debian's etcd for the etcd client's test and the fleet test (a test counterpart only: airlock
# itself needs no etcd on one host, so scripts/setup.sh does not install it), and Chromium for
# the page tests.
apt_missing=()
[ -x /usr/bin/etcd ] || apt_missing+=(etcd-server)
command -v chromium >/dev/null || apt_missing+=(chromium)
if [ ${#apt_missing[@]} -gt 0 ]; then
  echo "test: installing ${apt_missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${apt_missing[@]}" >&2
fi
# npm's packages: s3rver (an S3-compatible server), the MCP SDK client, puppeteer-core for the
# pages, OpenTelemetry's definitions for the OTLP test, the TypeScript SDK's own, and E2B's SDK
# and ComputeSDK's E2B provider for the E2B-compatible API's tests.
for dir_and_marker in tests/s3:s3rver tests/mcp:@modelcontextprotocol/sdk \
  tests/pages:puppeteer-core tests/otlp:@opentelemetry/otlp-transformer sdk/js:@grpc/grpc-js \
  tests/e2b:@computesdk/e2b; do
  dir=${dir_and_marker%%:*}
  [ -d "$dir/node_modules/${dir_and_marker#*:}" ] || (cd "$dir" && npm ci --no-audit --no-fund >/dev/null)
done

phase "build under ASan+UBSan (clang): unit tests, fuzzers"
scripts/configure.sh build-asan -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_COMPILER=clang++ -DAIRLOCK_SANITIZE=ON -DAIRLOCK_BUILD_GUEST=OFF -DAIRLOCK_FUZZ=ON
ninja --quiet -C build-asan

phase "unit tests and fuzz corpora under ASan+UBSan"
run_ctest build-asan unit -L unit -j"$jobs" --output-on-failure

fuzz_seconds=${AIRLOCK_FUZZ_SECONDS:-20}
phase "fuzzing, ${fuzz_seconds}s a target, $jobs at once"
# One fuzz target: libFuzzer past its seed corpus; a crash keeps its input here (crash-*).
fuzz_one() {
  local name=$1 scratch
  scratch=$(mktemp -d)
  if ! "build-asan/${name}_fuzz" -max_total_time="$fuzz_seconds" -artifact_prefix="$scratch/" \
    "$scratch" "fuzz/corpus/$name" >"$scratch.log" 2>&1; then
    echo "fuzzing $name failed:" >&2
    tail -50 "$scratch.log" >&2
    cp "$scratch"/crash-* . 2>/dev/null || true
    return 1
  fi
  echo "fuzzed $name"
  rm -rf "$scratch" "$scratch.log"
}
export -f fuzz_one
export fuzz_seconds
# build-asan/NAME_fuzz: one link to airlock_fuzz per target.
for fuzzer in build-asan/*_fuzz; do if [ -L "$fuzzer" ]; then basename "$fuzzer" _fuzz; fi; done |
  xargs -P "$jobs" -I{} bash -c 'fuzz_one {}'

phase "build (plain): VM tests, SDKs"
ninja --quiet -C build
(cd sdk/js && npm run --silent build && npm run --silent doc >/dev/null)

phase "the agent images for the Claude Code and OpenCode tests (npm's packages, their scripts run in build VMs)"
build/airlock image build --debian bookworm --packages git \
  --npm "@anthropic-ai/claude-code@${AIRLOCK_TEST_CLAUDE_CODE:-2.1.197}" --tag airlock/claude >/dev/null
build/airlock image build --debian bookworm --packages git,ripgrep \
  --npm "opencode-ai@${AIRLOCK_TEST_OPENCODE:-1.18.33}" --tag airlock/opencode >/dev/null

vm_jobs=${AIRLOCK_VM_TEST_JOBS:-$((jobs * 2))}
phase "VM tests, $vm_jobs suites at once (the CLI, airlock mcp, pages in Chromium, the SDKs)"
# Each suite runs its own airlockd and mostly waits on its guests: more suites than cores.
run_ctest build vm -L vm -j"$vm_jobs" --output-on-failure
